"""The Models box of an analysis' page: one combo box per model role the analysis declares (the current model,
a default, a catalog entry, a stored fit), labelled by whether the run needs it with the current choices, and
what the boxes say is chosen. Helper functions taking the Analyses pane (plugin.py)."""
from __future__ import annotations

from typing import Callable

from PySide6.QtWidgets import QComboBox

from ..workbench.widgets.method_form import MIN_FIELD_WIDTH
from ....core.app.jobs.analyses import _NOT_ON_DISK as NOT_ON_DISK
from ....core.app.jobs.analyses import NONE, SESSION_KINDS, PageData, effective_need


def fill_model_rows(pane, page: PageData) -> None:
    """Replace the Models box's rows with one box per role `page`'s analysis uses."""
    pane._model_boxes = {}  # before the old boxes are deleted: nothing reads them any more
    while pane.models_form.rowCount():
        pane.models_form.removeRow(0)
    for role in page.spec.inputs.used():
        box = model_box(page, role, lambda: pane._inputs_changed())
        pane._model_boxes[role] = box
        pane.models_form.addRow(role_label(page, role, {}), box)
    relabel_models(pane)
    pane.models_box.setVisible(bool(pane._model_boxes))


def show_start(box: QComboBox) -> None:
    """An editable combo shows its text from the start: a choice longer than the field was shown scrolled to its
    end ("rent (demo-digits-classifier)" for "current (demo-digits-classifier)")."""
    if box.lineEdit() is not None:
        box.lineEdit().setCursorPosition(0)


def model_box(page: PageData, role: str, changed: Callable[[], None]) -> QComboBox:
    """The choices for `role`: a stored fit, a reference index, or a model (the session's, a default, or one
    from the catalog); `changed` is called when the choice of a fit or a model changes."""
    spec = page.spec
    box = QComboBox()
    box.setObjectName(f"model_{role}")
    box.setMinimumWidth(MIN_FIELD_WIDTH)
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(12)
    fill_box(box, page, role)
    if role not in ("fitted", "reference"):
        box.setEditable(True)  # a local path or hf: spec works too
        show_start(box)
        box.currentIndexChanged.connect(lambda _i: show_start(box))
        box.currentIndexChanged.connect(lambda _i: changed())
        box.editTextChanged.connect(lambda _t: changed())
    if role == "fitted":
        box.currentIndexChanged.connect(lambda _i: changed())
    return box


def fill_box(box: QComboBox, page: PageData, role: str) -> None:
    """Put `role`'s choices for `page` into `box` (built anew when the session's models change)."""
    spec = page.spec
    need = spec.inputs.need(role)
    if role == "fitted":
        for key, text in page.fitted_choices:
            box.addItem(text, key)
        if not page.fitted_choices:
            box.addItem(f"(fit '{spec.inputs.fitted}' first)", None)
    elif role == "reference":
        box.addItem("(none)", NONE)
        for c in page.data_choices if spec.inputs.data == "index" else []:
            box.addItem(c.label, c.value)
    else:
        loaded = page.loaded.get(role)
        default = page.implied.get(False, {}).get(role) or page.implied.get(True, {}).get(role)
        if role in SESSION_KINDS and need != "optional":
            box.addItem(f"current ({page.current.get(role) or 'none chosen'})", NONE)
        elif role in SESSION_KINDS and loaded:
            # optional, and the session holds one: the run uses it unless "(none)" is picked
            box.addItem(f"current ({loaded})", loaded)
            box.addItem("(none)", NONE)
        elif loaded:  # e.g. a second classifier the session already holds: the run uses it
            box.addItem(f"current ({loaded})", NONE)
        elif default:  # left empty, the analysis loads this one when it needs it
            box.addItem(f"default ({default})", NONE)
        else:
            box.addItem("(none)", NONE)
        for ref in page.model_choices.get(role, []):  # marked when its weights are not on this computer
            status = page.weights.get(ref)
            box.addItem(f"{ref} ({status})" if status in NOT_ON_DISK else ref, ref)


def role_label(page: PageData | None, role: str, chosen: dict[str, str]) -> str:
    from nemo_desktop.core.registry.spec import ROLE_LABELS

    need = effective_need(page, role, chosen) if page is not None else "optional"
    return f"{ROLE_LABELS.get(role, role)}" + (" (optional)" if need == "optional" else "") + ":"


def relabel_current(pane) -> None:
    """The "current (...)" entries follow the session's model as it is now (a model loaded elsewhere, or loaded
    again by a new model process), not as it was when the page was built."""
    if pane.page is None:
        return
    for role, box in getattr(pane, "_model_boxes", {}).items():
        if role in SESSION_KINDS and box.count() and box.itemData(0) == NONE \
                and box.itemText(0).startswith("current ("):
            box.setItemText(0, f"current ({pane.page.current.get(role) or 'none chosen'})")


def relabel_models(pane) -> None:
    """A role's label says 'optional' only when the run can do without it with the current choices (the
    failure-modes embedder is required for a classifier that is not a joint image-text space)."""
    if pane.page is None:
        return
    chosen = chosen_models(pane._model_boxes)
    for role, box in pane._model_boxes.items():
        label = pane.models_form.labelForField(box)
        need = effective_need(pane.page, role, chosen)
        if label is not None:
            label.setText(role_label(pane.page, role, chosen))
        box.setToolTip(f"{label.text().rstrip(':') if label is not None else role}: {need}")


def chosen_models(boxes: dict[str, QComboBox]) -> dict[str, str]:
    """The model each role's box names (NONE: the current / default one, or none)."""
    out = {}
    for role, box in boxes.items():
        data = box.currentData()
        text = box.currentText().strip()
        # An edited entry (a path or spec typed by the user) has no item data of its own.
        out[role] = data if data is not None and box.itemText(box.currentIndex()) == text else text
        if out[role] is None:
            out[role] = NONE
    return out


def refresh_pickers(pane) -> None:
    """When the session holds other models than the shown page's pickers were built with (a load, an unload, a
    restarted model process), prepare the page again on the I/O lane and rebuild its pickers from it."""
    from ...jobs import IO
    from ....core.app.jobs.analyses import page_data

    if pane.page is None or pane.host.session.loaded() == pane._boxes_loaded:
        return
    name, session = pane.page.spec.name, pane.host.session
    pane._boxes_loaded = dict(session.loaded())  # one refresh per change
    handle = pane.host.jobs.submit(lambda ctx: page_data(session, name, ctx), title=f"Preparing {name}",
                                   lane=IO, visible=False, report_errors=False)
    handle.sig_done.connect(lambda page: show_refreshed_pickers(pane, page))


def show_refreshed_pickers(pane, page: PageData) -> None:
    from .page_memory import restore_models

    if pane.page is None or pane.page.spec.name != page.spec.name:
        return  # another page is shown now: it was prepared with the models of its time
    # What the user picked or typed stays; the first row (the current / default model) is built anew.
    boxes = pane._model_boxes
    chosen = {role: ref for role, ref in chosen_models(boxes).items()
              if boxes[role].currentIndex() > 0 or ref != boxes[role].currentData()}
    page.data_choices = pane.page.data_choices  # the data field is left as it is
    pane.page = page
    pane._switching = True
    for role, box in boxes.items():  # in place: the same widgets (focus, references held elsewhere) stay
        box.blockSignals(True)
        box.clear()
        fill_box(box, page, role)
        box.blockSignals(False)
    restore_models(pane, chosen)
    for box in boxes.values():
        show_start(box)
    pane._switching = False
    pane._boxes_loaded = dict(page.loaded)
    pane._inputs_changed()
