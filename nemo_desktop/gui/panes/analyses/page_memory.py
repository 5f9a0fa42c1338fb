"""What each Analyses page remembers of its inputs: its settings (the form built from the analysis' config), the
model chosen in each of its roles, its data (a folder, an image, a stored run) and the key of its last stored
result. Read from the widgets when the page is left, put back when it is shown again, and kept in the window's
settings so that a restart finds every page as it was left. Written as the user goes (a page left, a setting
changed: debounced), not only when the window closes, so that a crash loses none of it; written off the GUI
thread (the window's BackgroundSettings, gui-state.json), gui.ini being read only where an earlier version kept it.
Nothing here is specific to one analysis: the form, the roles and the data come from the registry entry. Helper
functions taking the Analyses pane (plugin.py)."""
from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)

SETTINGS_KEY = "pages"  # in the pane's group of gui.ini (earlier versions): {analysis name: remembered inputs}
STATE_KEY = "panes/analyses/pages"  # the same in the window's BackgroundSettings (gui-state.json)
WRITE_DELAY_MS = 500  # a setting changed: written once the user paused (a spin box's every step is not a write)
REMEMBERED = ("values", "models", "data_text", "data_choice", "result_key")


def remember_shown(pane) -> None:
    """Keep the shown page's settings, models and stored-data choice in its state (before another page is shown
    or the window closes)."""
    if pane.page is None or pane._switching:
        return
    state = pane.state()
    state.values = pane.form.values()
    state.models = pane.chosen_models()
    if pane.data_combo.count():  # a stored run / index (chosen_data reads the folder field for the others)
        state.data_choice = pane.data_combo.currentData()


def background_settings(pane):
    """The window's settings written off the GUI thread (None for a host without them: gui.ini at close only)."""
    return getattr(pane.host, "background_settings", None)


def keep(pane) -> None:
    """Write every page's remembered inputs now (the shown page's read from its widgets first)."""
    remember_shown(pane)
    settings = background_settings(pane)
    if settings is not None:
        settings.setValue(STATE_KEY, to_settings(pane._states))


def kept_text(pane, settings) -> Any:
    """The remembered inputs' text: the latest written as the user went, else gui.ini's (an earlier version's)."""
    background = background_settings(pane)
    text = background.value(STATE_KEY) if background is not None else None
    return text if text is not None else settings.value(SETTINGS_KEY)


def restore_models(pane, models: dict[str, str] | None) -> None:
    """Choose each role's remembered model again: an offered item by its value, a typed path or spec as text."""
    for role, ref in (models or {}).items():
        box = pane._model_boxes.get(role)
        if box is None:
            continue
        i = box.findData(ref)
        if i >= 0:
            box.setCurrentIndex(i)
        elif ref and box.isEditable():
            box.setEditText(ref)


def restore_data_choice(pane, choice: Any) -> None:
    if choice is None:
        return
    i = pane.data_combo.findData(choice)
    if i >= 0:
        pane.data_combo.setCurrentIndex(i)


def to_settings(states: dict) -> str:
    """Every page's remembered inputs as JSON (values that JSON cannot hold are left out, not guessed)."""
    out = {}
    for name, state in states.items():
        kept = {k: getattr(state, k) for k in REMEMBERED if getattr(state, k) not in (None, "", {})}
        if kept:
            out[name] = kept
    try:
        return json.dumps(out, default=lambda _v: None)
    except (TypeError, ValueError) as exc:  # never lose the layout for it: the pages start from defaults
        log.warning("could not keep the analysis pages' settings: %s", exc)
        return "{}"


def from_settings(text: Any) -> dict[str, dict]:
    """{analysis name: remembered inputs} from `to_settings`' text; {} when absent or unreadable."""
    if not text:
        return {}
    try:
        loaded = json.loads(str(text))
    except ValueError:
        log.warning("the analysis pages' remembered settings are unreadable: starting from defaults")
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {name: {k: v for k, v in kept.items() if k in REMEMBERED}
            for name, kept in loaded.items() if isinstance(kept, dict)}


def set_form(pane, config, values: dict | None) -> None:
    """The settings form of `config` with `values` (remembered, or the page's defaults) filled in."""
    try:
        pane.form.set_config(config, values)
    except (TypeError, ValueError) as exc:  # remembered by another version: the page starts from defaults
        log.info("the remembered settings of this page do not fit it (%s): defaults instead", exc)
        pane.form.set_config(config)


def read_last_result(pane, name: str, key: str):
    """The page's last result, read back from the store (after a restart) and shown as when it finished."""
    from ...jobs import IO
    from ....core.app.jobs.analyses import stored_page_result

    store = pane.host.session.store()
    handle = pane.host.jobs.submit(lambda ctx: stored_page_result(store, name, key, ctx),
                                   title="Reading the last result", lane=IO, visible=False, report_errors=False)

    def read(result) -> None:
        state = pane.state(name)
        if result is None:
            state.result_key = None  # no longer stored: not asked for again
        elif state.result is None and state.job is None:
            pane._on_done(name, result)
    handle.sig_done.connect(read)
    return handle
