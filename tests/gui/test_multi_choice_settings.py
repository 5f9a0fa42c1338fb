"""Settings that are several names from a list (model-diff's explainers, competency's generators, failure modes'
ranking methods) are edited in the derived settings form as check boxes, round-trip to the config, and refuse
an empty choice and unknown names."""
from __future__ import annotations

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.registry import config_params, get_analysis, make_config

pytestmark = pytest.mark.gui


def _form(qtbot, name):
    from nemo_desktop.gui.panes.workbench.widgets.method_form import MethodForm

    form = MethodForm()
    qtbot.addWidget(form)
    form.set_config(get_analysis(name).config)
    return form


@pytest.mark.parametrize("name, field", [("model-diff", "methods"), ("competency-cf", "methods"),
                                         ("competency-cf", "explain_methods"), ("failure-modes", "methods")])
def test_every_tuple_of_choices_gets_a_check_box_per_choice(qtbot, name, field):
    from nemo_desktop.gui.widgets.multi_choice import MultiChoiceEditor

    param = next(p for p in config_params(get_analysis(name).config) if p.name == field)
    form = _form(qtbot, name)
    kind, editor = form.editors[field]
    assert kind == "choices" and isinstance(editor, MultiChoiceEditor)
    assert tuple(editor.boxes) == param.choices  # one box per choice, in the config's order
    assert form.values()[field] == tuple(param.default)  # the defaults come checked


def test_model_diff_methods_round_trip_to_the_config(qtbot):
    form = _form(qtbot, "model-diff")
    editor = form.editors["methods"][1]
    editor.boxes["raw-differences"].setChecked(False)  # as a click does
    assert form.values()["methods"] == ("summarization", "optimization")
    config = make_config(get_analysis("model-diff"), form.values())
    assert config.methods == ("summarization", "optimization")

    form.set_value("methods", ("optimization",))
    assert [n for n, b in editor.boxes.items() if b.isChecked()] == ["optimization"]
    form.set_value("methods", "raw-differences,optimization")  # as a file or the CLI writes it
    assert make_config(get_analysis("model-diff"), form.values()).methods == ("raw-differences", "optimization")


def test_none_chosen_is_said_in_the_form_and_refused_by_the_config(qtbot):
    form = _form(qtbot, "competency-cf")
    editor = form.editors["explain_methods"][1]
    assert not editor.warning.isVisibleTo(editor)
    for box in editor.boxes.values():
        box.setChecked(False)
    assert editor.warning.isVisibleTo(editor) and form.values()["explain_methods"] == ()
    with pytest.raises(ConfigError, match="choose at least one of igd, fgd, reco, lgd, lnn"):
        make_config(get_analysis("competency-cf"), form.values())


def test_unknown_names_are_refused_and_change_nothing(qtbot):
    form = _form(qtbot, "failure-modes")
    before = form.values()["methods"]
    with pytest.raises(ValueError, match="unknown choice.*bogus"):
        form.set_value("methods", ("pdiff", "bogus"))
    assert form.values()["methods"] == before
    with pytest.raises(ConfigError, match="must be one of tops, pdiff, setdiff, fpdiff, not 'bogus'"):
        make_config(get_analysis("failure-modes"), {"methods": ("pdiff", "bogus")})



def test_a_config_without_main_settings_shows_no_empty_area_above_more_settings(qtbot):
    """Issue 28's walkthrough: competency-score's Settings box was an empty grey area over "More settings"."""
    form = _form(qtbot, "competency-score")
    form.show()
    main = form._groups[0]
    assert main.layout().rowCount() == 0 and not main.isVisible()
    from nemo_desktop.core.methods.scitx import SciTXConfig
    from nemo_desktop.gui.panes.workbench.widgets.method_form import MethodForm

    scitx = MethodForm()
    qtbot.addWidget(scitx)
    scitx.set_config(SciTXConfig)
    scitx.show()
    assert scitx._groups[0].layout().rowCount() == 5 and scitx._groups[0].isVisible()  # k, m, seed, steps, size
