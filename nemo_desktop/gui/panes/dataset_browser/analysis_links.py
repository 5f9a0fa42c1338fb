"""What the browser hands to the Analyses pane: one image (the grid's context menu, to a per-sample analysis
such as competency-cf) or the open reference index ("Find failure modes…", the dataset-level analysis)."""
from __future__ import annotations

from PySide6.QtWidgets import QMenu, QPushButton

from .widgets.grid_image import view_current_image

FAILURE_MODES = "failure-modes"


def grid_menu(pane, pos) -> QMenu | None:
    """The grid's context menu at `pos`: view, explain, and every per-sample analysis of one image."""
    index = pane.grid.indexAt(pos)
    if not index.isValid():
        return None
    if not pane.grid.selectionModel().isSelected(index):
        pane.grid.setCurrentIndex(index)  # right-click on an unselected image selects it alone
    menu = QMenu(pane.grid)
    menu.addAction("View image (zoom)\tSpace", lambda: view_current_image(pane))
    menu.addAction("Explain in the workbench", pane.explain_selected)
    path = str(pane.data.paths[pane.grid_model.dataset_row(index)])
    for name, description in pane.image_analyses:
        action = menu.addAction(f"Analyse with {name}…", lambda n=name, p=path: send_to_analysis(pane, n, p))
        action.setToolTip(description)
    menu.popup(pane.grid.viewport().mapToGlobal(pos))
    return menu


def send_to_analysis(pane, name: str, data: str) -> None:
    """Open the Analyses pane on `name` with `data` (an image path, a reference index id) filled in."""
    pane.host.show_pane("analyses").open_with(name, data)


def failure_modes_button(pane) -> QPushButton:
    """The "Find failure modes…" button: the failure-modes analysis on the open dataset's reference index
    (enabled once the dataset is indexed; the page, its settings and its run are the Analyses pane's)."""
    button = QPushButton("Find failure modes…")
    button.setObjectName("findFailureModesButton")
    button.setToolTip("Where does the classifier fail across this dataset, in sentences (failure-modes "
                      "analysis on this dataset's reference index)")
    button.setEnabled(False)

    def clicked() -> None:
        if pane.data is not None and pane.data.index_id:
            send_to_analysis(pane, FAILURE_MODES, pane.data.index_id)

    button.clicked.connect(clicked)
    return button
