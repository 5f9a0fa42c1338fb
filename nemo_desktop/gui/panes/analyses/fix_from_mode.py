""""Try a fix…" from a failure mode (the Analyses page's failure-mode picker and the dataset browser's mode bar):
the mode's stored result and position fill the `fix` page, whose targeted data is then the mode's images with
their true labels; its sentence is shown above the page's settings. The settings are read in the core
(core/analyses/fix/from_mode.py) on the I/O lane; this only opens the page through the main window, as the
workbench's "Try a fix…" does (workbench/fix_link.py)."""
from __future__ import annotations

from typing import Any

from ...jobs import IO, JobHandle

ANALYSIS = "fix"


def try_fix_from_mode(host: Any, mode: Any, on_opened=None) -> JobHandle | None:
    """Open the fix page for `mode` (a failure_modes.members.ModeRef), then call `on_opened(what was read)`; None
    (and a word to the user) without a stored mode."""
    from nemo_desktop.core.analyses.fix.from_mode import fix_settings_for_ref

    if mode is None:
        host.show_status("Choose a failure mode first.")
        return None
    if not mode.result_key:
        host.show_message("Try a fix", "This failure-modes result is not stored, so a fix cannot name it. Run "
                                       "the analysis again with the results store.")
        return None
    store = host.session.store()
    handle = host.jobs.submit(lambda ctx: fix_settings_for_ref(store, mode), title="Reading the failure mode",
                              lane=IO, ask_before_quit=False)
    handle.sig_done.connect(lambda out: _open(host, out, on_opened))
    return handle


def _open(host: Any, out: dict, on_opened) -> None:
    note = f"From {out['title']} ({out['images']} images): {out['sentence']}"
    host.show_pane("analyses").open_with(ANALYSIS, None, out["settings"], note=note)
    host.show_status(f"The fix page is filled from {out['title'].lower()}: choose the data folder (train/, "
                     "affected/, rest/) and Run.")
    if on_opened is not None:
        on_opened(out)
