"""Global explanation (§4.2.7) and its CEI (Table 6) on the digits world, and `nemo global RUN`.

The run holds four real per-sample explanations of blue threes taken for eights, made by CamMLLM with
validation: three name the blue ink (the cause), one names thin strokes (the same validated result with its
first candidate selected instead, as a weaker method would). The MLLM double writes the summary of the
majority cause; scored on every sample, the global explanation moves every three back (the recolour
edit), so its mean CEI beats the per-sample one, which the thin-stroke explanation drags down.
"""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from baseline_doubles import GLOBAL_SUMMARIES, GlobalDigitsMLLM
from digits_world import EIGHT, HYPOTHESES, THREE, DigitsCNNClassifier, DigitsEditor, render
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.analyses.global_explanation import (GlobalConfig, GlobalExplainer, GlobalScorer,
                                                          collect_explanations)
from nemo_desktop.core.registry.methods import get_method
from nemo_desktop.core.base.records import ExplanationResult
from nemo_desktop.core.store import result_key


@pytest.fixture(scope="module")
def blue_threes(digits, tmp_path_factory):
    model, (x_test, y_test), _ = digits
    clf = DigitsCNNClassifier(model)
    folder = tmp_path_factory.mktemp("blue-threes")
    paths = []
    for i in np.flatnonzero(y_test == THREE):
        img = render(x_test[i], "blue")
        if int(clf.predict_proba([img])[0].argmax()) == EIGHT:
            paths.append(folder / f"three_{i}.png")
            img.save(paths[-1])
        if len(paths) == 4:
            return paths
    pytest.fail("fewer than 4 blue threes are taken for eights")


def build_run(store, classifier, paths, run_kind="explain-batch"):
    """Explain each image with cam-mllm-validated; the first one keeps its thin-stroke candidate instead."""
    pipe = get_method("cam-mllm-validated").factory(classifier, GlobalDigitsMLLM(), editor=DigitsEditor(),
                                                    store=store)
    run_id = store.create_run(run_kind, {"method": "cam-mllm-validated"})
    validated = []
    for i, path in enumerate(paths):
        r = pipe(path, "three")
        validated.append(r)
        key = r.result_key
        if i == 0:
            thin = replace(r, explanation=r.candidates[0].hypothesis, selected_index=0, cei=r.candidates[0].cei)
            key = result_key("explanation", test="thin-variant", of=r.result_key)
            original = store.get(r.result_key)
            store.put(key, "explanation", thin.to_dict(), {"input": original.load_image("input")})
        store.add_run_item(run_id, f"s{i}", key, "done")
    return run_id, validated


def test_global_explanation_and_its_cei(digits_classifier, blue_threes, store):
    run_id, validated = build_run(store, digits_classifier, blue_threes)
    locals_ = collect_explanations(store, run_id)
    assert [e.result.explanation for e in locals_] == [HYPOTHESES[0]] + [HYPOTHESES[2]] * 3

    mllm, editor = GlobalDigitsMLLM(), DigitsEditor()
    g = GlobalExplainer(mllm, store).explain(locals_, run_id=run_id)
    assert g.explanation == GLOBAL_SUMMARIES["blue ink"] and g.count == 4 and g.method == "cam-mllm-validated"
    assert g.error is None and g.chunk_summaries == [] and g.manifest["complete"]
    (call,) = [c for c in mllm.calls if '"global_explanation"' in c["text"]]
    assert call["temperature"] == 0.0
    assert f"- [true: three; predicted: eight] {HYPOTHESES[0]}" in call["text"]
    assert call["text"].count(f"- [true: three; predicted: eight] {HYPOTHESES[2]}") == 3
    assert store.find("global-explanation", run_id=run_id)[0].payload["explanation"] == g.explanation

    score = GlobalScorer(digits_classifier, mllm, editor, store).score(g, locals_)
    assert score.paired == 4 and score.global_key == g.result_key
    for s, r, e in zip(score.samples, validated, locals_):
        assert s.intervention == "Recolour the digit red" and s.error is None
        # The same edit as the validated blue-ink candidate of that sample, hence the same CEI.
        assert s.cei_global == pytest.approx(r.candidates[2].cei) and s.cei_global > 50
        assert s.cei_local == e.result.cei
    assert score.mean_local == pytest.approx(np.mean([e.result.cei for e in locals_]))
    assert score.mean_global == pytest.approx(np.mean([r.candidates[2].cei for r in validated]))
    assert score.gain > 10  # the thin-stroke explanation's CEI is near zero; the global one fixes every sample
    stored = store.get(score.result_key)
    assert stored.kind == "global-cei" and stored.load_image(score.samples[1].edited_artifact).size == (16, 16)

    # Both answered from the store on a re-run: no model call.
    n_calls, n_clf, n_edits = len(mllm.calls), digits_classifier.calls, len(editor.calls)
    again = GlobalExplainer(mllm, store).explain(locals_, run_id=run_id)
    again_score = GlobalScorer(digits_classifier, mllm, editor, store).score(again, locals_)
    assert again.to_dict() == g.to_dict() and again_score.to_dict() == score.to_dict()
    assert (len(mllm.calls), digits_classifier.calls, len(editor.calls)) == (n_calls, n_clf, n_edits)


def test_large_runs_are_summarised_in_groups_first(digits_classifier, blue_threes, store):
    run_id, _ = build_run(store, digits_classifier, blue_threes)
    mllm = GlobalDigitsMLLM()
    g = GlobalExplainer(mllm, store, GlobalConfig(chunk_size=2)).explain(collect_explanations(store, run_id))
    calls = [c["text"] for c in mllm.calls if '"global_explanation"' in c["text"]]
    assert len(calls) == 3 and len(g.chunk_summaries) == 2 and g.manifest["chunks"] == 2
    # First group: thin + blue (a tie: the double's vote keeps "blue ink", its first keyword); then blue + blue.
    assert g.chunk_summaries == [GLOBAL_SUMMARIES["blue ink"]] * 2
    assert "2 summaries of groups of explanations" in calls[-1]
    assert g.explanation == GLOBAL_SUMMARIES["blue ink"]


def test_collecting_explanations(digits_classifier, blue_threes, store):
    run_id, validated = build_run(store, digits_classifier, blue_threes[:2])
    with pytest.raises(ConfigError, match="No run 'nope'"):
        collect_explanations(store, "nope")
    # A benchmark-style record (the ExplanationResult under "result") and another method in the same run.
    other = ExplanationResult.from_dict({**validated[1].to_dict(), "method": "scitx"})
    bench_key = result_key("bench-sample", test=1)
    store.put(bench_key, "bench-sample", {"result": other.to_dict(), "explanation_key": validated[1].result_key})
    store.add_run_item(run_id, "s9", bench_key, "done")
    store.add_run_item(run_id, "s8", None, "error")
    with pytest.raises(ConfigError, match="several methods"):
        collect_explanations(store, run_id)
    assert [e.item_id for e in collect_explanations(store, run_id, "scitx")] == ["s9"]
    assert len(collect_explanations(store, run_id, "cam-mllm-validated")) == 2
    with pytest.raises(ConfigError, match="no per-sample explanation"):
        collect_explanations(store, run_id, "change-mllm")


def test_scoring_needs_a_way_to_intervene(digits_classifier):
    with pytest.raises(ConfigError, match="no image editor"):
        GlobalScorer(digits_classifier, GlobalDigitsMLLM(), None)


def test_cli_global(digits_classifier, blue_threes, tmp_path, monkeypatch, capsys):
    from nemo_desktop.cli import loading
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.store import ResultsStore
    from nemo_desktop.core.store.paths import get_paths

    with ResultsStore.open(get_paths().ensure()) as store:  # the store the CLI opens
        run_id, _ = build_run(store, digits_classifier, blue_threes)
    loaded = []
    doubles = {"classifier": digits_classifier, "mllm": GlobalDigitsMLLM(), "editor": DigitsEditor()}

    def fake_load(ref, kind, args):
        loaded.append((ref, kind))
        return doubles[kind]

    monkeypatch.setattr(loading, "load", fake_load)
    out = tmp_path / "global.json"
    assert main(["global", run_id, "--score", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"Global explanation of 4 'cam-mllm-validated' explanations in run {run_id}:" in text
    assert GLOBAL_SUMMARIES["blue ink"] in text and "CEI over 4 samples: per-sample explanations" in text
    # The models recorded in the explanations' manifests were loaded.
    assert loaded == [("test-double:scripted-digits-mllm", "mllm"), ("test-double:digits-cnn", "classifier"),
                      ("test-double:digits-editor", "editor")]
    data = json.loads(out.read_text())
    assert data["global"]["explanation"] == GLOBAL_SUMMARIES["blue ink"] and data["score"]["paired"] == 4
    assert data["score"]["gain"] == pytest.approx(data["score"]["mean_global"] - data["score"]["mean_local"])

    assert main(["global", "no-such-run"]) == 2
    assert "No run 'no-such-run'" in capsys.readouterr().err
