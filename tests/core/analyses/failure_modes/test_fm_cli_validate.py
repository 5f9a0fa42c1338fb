"""`nemo failure-modes --validate-cei`: every failure mode's sentences checked with CEI from the command line, on the
digits ink world (the CNN's real shortcut: blue ink = eight, red ink = three). The classifier, the joint space, the
edit-writing MLLM and the PIL editor are registered as model families, so the command loads them as it loads real
ones; the figures go into --json and the HTML report, and a sentence that does not hold up is said so plainly."""
from __future__ import annotations

import json

import pytest

from fm_digits_world import sentence_file
from nemo_desktop.cli.main import main
from nemo_desktop.core.models import families as registry
from test_fm_validate import EditWriterMLLM


@pytest.fixture
def families(monkeypatch, digits, _measured_space):
    from digits_world import DigitsCNNClassifier, DigitsEditor

    registry._ensure_builtin_families()
    made = {"mllm": [], "editor": []}

    def keep(kind, obj):
        made[kind].append(obj)
        return obj

    for key, build in {("classifier", "test-ink-cnn"): lambda s, o: DigitsCNNClassifier(digits[0]),
                       ("classifier", "test-measured"): lambda s, o: _measured_space.fresh(),
                       ("mllm", "test-edit-writer"): lambda s, o: keep("mllm", EditWriterMLLM()),
                       ("editor", "test-digits-editor"): lambda s, o: keep("editor", DigitsEditor())}.items():
        monkeypatch.setitem(registry._FAMILIES, key, build)
    return made


def _args(ink_manifest, tmp_path, *more):
    return ["failure-modes", str(ink_manifest), "--classifier", "test-ink-cnn:x", "--embedder", "test-measured:x",
            "--device", "cpu", "--split", "correctness", "--clusters", "4", "--tau", "none", "--k", "2",
            "--methods", "pdiff", "--sentence-sets", str(sentence_file(tmp_path / "s.json")), *more]


def test_validate_cei_puts_each_sentences_figures_in_the_output_and_report(families, ink_manifest, tmp_path, capsys):
    out, report = tmp_path / "fm.json", tmp_path / "fm.html"
    cei = ["--validate-cei", "--mllm", "test-edit-writer:x", "--editor", "test-digits-editor:x", "--cei-images", "3"]
    assert main(_args(ink_manifest, tmp_path, *cei, "-o", str(out), "--report", str(report))) == 0
    captured = capsys.readouterr()
    assert "CEI validation:" in captured.err and "MLLM calls" in captured.err  # the cost, before it runs
    d = json.loads(out.read_text())
    cv = d["cei_validation"]
    assert cv["settings"] == {"method": "pdiff", "max_images": 3, "sentences": None, "threshold": 5.0}
    vals = cv["validations"]
    assert vals and all(v["method"] == "pdiff" and 1 <= v["n"] <= v["tested"] <= 3 for v in vals)
    for v in vals:
        assert v["held_up"] == (v["mean_cei"] > 5)  # the default threshold, in points
        assert ("did not hold up" in v["verdict"]) == (not v["held_up"])
        assert f"{v['mean_cei']:+.1f} points" in v["verdict"]
    # The colour shortcut is real: an ink sentence of a mode made of red or blue digits holds up, strongly.
    inks = [v for v in vals if v["sentence"] in ("a digit drawn in blue ink", "a digit drawn in red ink")]
    assert inks and max(v["mean_cei"] for v in inks) > 50
    text = captured.out
    assert "CEI validation (n = misclassified images with a CEI, per sentence):" in text
    assert all(v["verdict"] in text for v in vals)
    html = report.read_text(encoding="utf-8")
    assert "CEI validation of the sentences" in html and "Mean CEI" in html and "n / tried" in html
    calls = (sum(len(m.calls) for m in families["mllm"]), sum(len(e.calls) for e in families["editor"]))
    assert calls[0] > 0 and calls[1] > 0

    # Stricter threshold: the same checks from the store (no model call), now said plainly not to hold up.
    assert main(_args(ink_manifest, tmp_path, *cei, "--cei-threshold", "1000", "--json")) == 0
    strict = json.loads(capsys.readouterr().out)["cei_validation"]["validations"]
    assert [v["mean_cei"] for v in strict] == [v["mean_cei"] for v in vals]
    assert all(v["held_up"] is False and "did not hold up under CEI" in v["verdict"] for v in strict)
    assert (sum(len(m.calls) for m in families["mllm"][1:]), sum(len(e.calls) for e in families["editor"][1:])) \
        == (0, 0)


@pytest.mark.parametrize("more, message", [
    (["--validate-cei", "--editor", "test-digits-editor:x"], "needs an MLLM"),
    (["--validate-cei", "--mllm", "test-edit-writer:x"], "image editor"),
    (["--editor", "test-digits-editor:x"], "--validate-cei only"),
    (["--validate-cei", "--mllm", "test-edit-writer:x", "--cei-images", "0"], "at least 1"),
])
def test_missing_parts_are_refused_with_exit_2(families, ink_manifest, tmp_path, more, message, capsys):
    assert main(_args(ink_manifest, tmp_path, *more)) == 2
    assert message in capsys.readouterr().err


def test_the_verdict_says_plainly_what_held_and_what_could_not_be_tested():
    from nemo_desktop.core.analyses.failure_modes.validate import SampleCei, SentenceValidation, verdict

    held, text = verdict(SentenceValidation("blue ink", [SampleCei("a.png", "three")] * 2, 12.34, 2))
    assert held is True and text == ("\u201cblue ink\u201d held up under CEI: removing it from 2 misclassified images "
                                     "of the mode raised the true class's probability by +12.3 points on average.")
    held, text = verdict(SentenceValidation("thick", [SampleCei("a.png", "three")], -0.5, 1), threshold=5)
    assert held is False and text.startswith("\u201cthick\u201d did not hold up under CEI: removing it from 1 "
                                             "misclassified image of the mode changed")
    assert "-0.5 points" in text and "more than 5" in text
    failed = SentenceValidation("night", [SampleCei("a.png", "three", error="The image is not available: gone")],
                                None, 0)
    assert verdict(failed) == (None, "\u201cnight\u201d could not be checked with CEI (1 images tried): The image is "
                                     "not available: gone.")
