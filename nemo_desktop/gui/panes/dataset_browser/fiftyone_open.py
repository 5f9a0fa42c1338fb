"""Open ▸ "FiftyOne dataset…" on the dataset browser: a FiftyOne dataset by name as the dataset shown (the
`fiftyone:NAME[#FIELD]` source of core/data/sources.py). The names are listed in a background job (listing starts
FiftyOne's database); the name can also be typed, with #FIELD for another ground-truth field than ground_truth.
Greyed out with the reason when the `fiftyone` extra is missing."""
from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QInputDialog

from nemo_desktop.core.data.sources import FIFTYONE_PREFIX

from ...jobs import IO, JobHandle
from .fiftyone_link import unavailable_reason

TEXT = "FiftyOne dataset…"
WHAT = "A FiftyOne dataset by name, with the labels of its ground_truth field (NAME#FIELD for another field)"


def add_open_action(pane, menu) -> QAction:
    action = menu.addAction(TEXT, lambda: choose_fiftyone(pane))
    action.setObjectName("openFiftyOneAction")
    why = unavailable_reason()
    action.setEnabled(why is None)
    action.setToolTip(why or WHAT)
    menu.setToolTipsVisible(True)  # the reason shows on the greyed entry
    return action


def choose_fiftyone(pane) -> JobHandle | None:
    """List the FiftyOne datasets, then ask which to open (ask_name)."""
    if unavailable_reason():
        return None
    from nemo_desktop.core.data.fiftyone_source import dataset_names

    handle = pane.host.jobs.submit(lambda ctx: dataset_names(), title="Listing FiftyOne datasets", lane=IO,
                                   ask_before_quit=False)
    handle.sig_done.connect(lambda names: _open_chosen(pane, ask_name(pane, names)))
    return handle


def ask_name(pane, names: list[str]) -> str | None:
    """The dataset reference the user picks or types (None when cancelled or empty)."""
    text, ok = QInputDialog.getItem(pane, "Open a FiftyOne dataset",
                                    "FiftyOne dataset (NAME, or NAME#FIELD for another ground-truth field):",
                                    names, 0, True)
    text = (text or "").strip()
    if not ok or not text:
        return None
    return text if text.startswith(FIFTYONE_PREFIX) else FIFTYONE_PREFIX + text


def _open_chosen(pane, ref: str | None) -> None:
    if ref:
        pane.open_path(ref)
