"""The window's 'Make … from the demo' buttons (Analyses pane): build one demo extra (core/demo/extras.py) in the
model process, where the demo itself is built."""
from __future__ import annotations

EXTRAS = ("second-classifier", "fix-folder")


def prepare_demo_extra(session, paths, what: str, ctx):
    """Build (or reuse) `what` of the demo's extras; the second classifier is registered in the user catalog,
    so the model pickers list it."""
    from nemo_desktop.core.demo.extras import ensure_fix_folder, ensure_second_classifier
    from nemo_desktop.core.base.errors import ConfigError

    if what == "second-classifier":
        return ensure_second_classifier(paths, ctx)
    if what == "fix-folder":
        return ensure_fix_folder(paths, ctx)
    raise ConfigError(f"The demo has no extra called '{what}'.", hint=f"One of: {', '.join(EXTRAS)}.")
