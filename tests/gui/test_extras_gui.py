"""The app names the extra a capability needs before anything runs: the report exporter's PDF choice is off with
the extra in its tooltip, the Analyses page's Run says it, and a method's preflight lists it with the models."""
from __future__ import annotations

from types import SimpleNamespace

import pytest





def test_the_pdf_choice_is_off_and_names_the_extra(qtbot, make_window, without):
    from nemo_desktop.gui.panes.report_exporter.plugin import ReportExporterPane

    window = make_window()
    pane = window.show_pane("report_exporter")
    assert pane.pdf_radio.isEnabled()
    without("pdf")
    pane = ReportExporterPane(window)  # a pane built while the extra is missing
    qtbot.addWidget(pane)
    assert not pane.pdf_radio.isEnabled() and "nemo-desktop[pdf]" in pane.pdf_radio.toolTip()
    assert pane.fmt == "html"


def test_run_says_which_extra_an_analysis_needs(without):
    from nemo_desktop.core.registry import get_analysis
    from nemo_desktop.core.app.jobs.analyses import run_problem

    without("competency")
    problem = run_problem(SimpleNamespace(spec=get_analysis("competency-bench")), {}, "data")
    assert "'competency' extra" in problem and "nemo-desktop[competency]" in problem


def test_preflight_names_the_extra_of_the_editor(without, tmp_path, monkeypatch):
    from nemo_desktop.core.base.errors import WeightsNotFoundError
    from nemo_desktop.core.app.session import ModelSession

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    without("editing")
    session = ModelSession()
    monkeypatch.setattr(session, "default_ref", lambda kind: {"editor": "flux-kontext-dev"}.get(kind))
    with pytest.raises(WeightsNotFoundError) as err:
        session.preflight(["editor"])
    assert "flux-kontext-dev needs the 'editing' extra" in err.value.message
