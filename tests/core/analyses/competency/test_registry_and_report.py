"""The competency analyses through the one construction path (registry, build_analysis with `fitted`), and their
report sections: HTML and PDF, images embedded, model text escaped, failures said plainly, n given."""
from __future__ import annotations

import pytest

from fixtures_tiny.competency_world import TINY, RecordingMLLM, write_class_folders

from nemo_desktop.core.analyses.competency import EstimatorFitResult, FittedEstimator
from nemo_desktop.core.base.errors import ConfigError, NemoError
from nemo_desktop.core.registry import Components, build_analysis, get_analysis
from nemo_desktop.core.reports import build_report, render_html, render_pdf

HOSTILE = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'


class HostileMLLM(RecordingMLLM):
    """Answers with markup, as a compromised or confused endpoint might."""

    def chat(self, messages, **kw):
        super().chat(messages, **kw)
        return HOSTILE


@pytest.fixture
def store(tmp_path):
    from nemo_desktop.core.store import ResultsStore

    s = ResultsStore.open(db_path=tmp_path / "s.sqlite", artifacts_dir=tmp_path / "art")
    yield s
    s.close()


@pytest.fixture
def stored_fit(world, store, tmp_path):
    """The fit analysis built from the registry on a folder dataset (60 images): result and analysis."""
    folder = write_class_folders(tmp_path / "data", world.fit_images, world.fit_labels, 60)
    fit = build_analysis("competency-estimator", Components(classifier=world.classifier, store=store),
                         {**TINY, "epochs": 3})
    return fit(folder), fit


def test_the_fitted_component_may_be_the_estimator_its_result_its_key_or_a_folder(world, store, stored_fit,
                                                                                  tmp_path):
    result, fit = stored_fit
    assert isinstance(result, EstimatorFitResult) and result.key and store.get(result.key).kind == "competency-estimator"
    assert result.manifest["dataset"]["n_images"] == 9 * 60
    folder = fit.estimator.save(tmp_path / "est")
    image = world.nines[0]
    scores = []
    for fitted in (fit.estimator, result, result.key, result.key[:10], str(folder)):
        cf = build_analysis("competency-cf", Components(classifier=world.classifier, fitted=fitted, store=store),
                            {"methods": ("reco",), "explain": False})
        scores.append(cf(image).original.competency)
    assert len(set(scores)) == 1
    with pytest.raises(ConfigError, match="needs a fitted estimator"):
        build_analysis("competency-cf", Components(classifier=world.classifier, store=store))
    with pytest.raises(ConfigError, match="No competency estimator is stored"):
        build_analysis("competency-cf", Components(classifier=world.classifier, fitted="0123456789ab", store=store))


def test_an_estimator_refuses_another_classifier(world, store, stored_fit):
    from fixtures_tiny.competency_world import DigitsClassifier, DigitsNet

    other = DigitsClassifier(DigitsNet())
    with pytest.raises(NemoError, match="was fitted for"):
        build_analysis("competency-cf", Components(classifier=other, fitted=stored_fit[0].key, store=store))


def test_explanation_methods_list_leaves_competency_out():
    from nemo_desktop.core.registry.methods import list_methods
    from nemo_desktop.core.registry import list_analyses

    assert "competency-cf" in list_analyses("sample") and "competency-cf" not in list_methods()
    assert get_analysis("competency-cf").inputs.fitted == "competency-estimator"
    assert "competency-estimator" in list_analyses("fit") and "competency-cf" not in list_analyses("fit")


def test_counterfactual_report_embeds_images_escapes_text_and_renders_pdf(world, store, stored_fit):
    result, _ = stored_fit
    cf = build_analysis("competency-cf", Components(classifier=world.classifier, mllm=HostileMLLM(),
                                                    fitted=result, store=store),
                        {"max_iter": 5, "igd_distance": "l2", "explain_methods": ("reco",), "min_side": 32,
                         "threshold": 0.999})
    r = cf(world.nines[0])
    doc = build_report(r.key[:12], store)
    html = render_html(doc)
    assert "<script>alert" not in html and "<img src=x" not in html and "&lt;script&gt;alert" in html
    assert html.count("data:image/png;base64,") >= 2 + 2 * 5  # input, reconstruction, 5 x (cf, |diff|)
    assert "n = 1" in html
    not_reached = [o.method.upper() for o in r.counterfactuals if o.success is False]
    assert not_reached, "threshold 0.999 in 5 steps: some generator must fall short"
    assert "did NOT reach 0.999" in html and f"{', '.join(not_reached)} did not reach competency 0.999" in html
    pdf = render_pdf(doc)
    assert pdf.startswith(b"%PDF") and len(pdf) > 5000


def test_estimator_report_gives_each_class_its_n(world, store, stored_fit):
    from nemo_desktop.core.reports.document import Table

    result, _ = stored_fit
    doc = build_report(result.key, store)
    html = render_html(doc)
    cal_n = result.manifest["dataset"]["n_calibration"]
    assert cal_n == 9 * 15 and f"Mean competency on the calibration images (n = {cal_n})" in html
    assert "held out of the fit set" in html
    stats = next(s for _, s in doc.iter_sections() if s.anchor == "statistics").blocks[0]
    assert isinstance(stats, Table) and stats.header[:2] == ["Class", "n"]
    assert [row[:2] for row in stats.rows] == [[name, "15"] for name in result.manifest["class_names"]]
    from nemo_desktop.core.reports.document import Figures

    cal = next(s for _, s in doc.iter_sections() if s.anchor == "calibration")
    plot = next(b for b in cal.blocks if isinstance(b, Figures)).images[0]
    assert plot.data.startswith(b"\x89PNG") and f"z = {result.calibration['z']:g}" in plot.caption
    assert render_pdf(doc).startswith(b"%PDF")
