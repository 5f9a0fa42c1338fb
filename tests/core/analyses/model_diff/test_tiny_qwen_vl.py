"""Plumbing: a model-difference run with a tiny random Qwen2-VL (through the real transformers-mllm loader) as
explainer and evaluator completes, and its garbage replies are reported (unreadable answers counted, failed
methods named) instead of crashing the run. The text-only family is covered in tests/core/models."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")


def test_model_diff_on_a_tiny_qwen2_vl(tmp_path):
    from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays
    from fixtures_tiny.mllm import build_tiny_qwen_vl
    from nemo_desktop.core.analyses.model_diff import ModelDiffConfig, SyntheticDigits
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model
    from nemo_desktop.core.registry import Components, build_analysis
    from nemo_desktop.core.store import ResultsStore

    mllm = load_model(ModelSpec("mllm", "transformers-mllm", str(build_tiny_qwen_vl(tmp_path, "qwen2_vl"))),
                      LoadOptions(device="cpu", dtype="float32"))
    X, y = load_digits_arrays()
    a, b = DigitsMLPClassifier.train(X, y, hidden=16, seed=0), DigitsMLPClassifier.train(X[::3], y[::3], seed=2)
    config = ModelDiffConfig(samples_per_condition=2, initial_conditions=2, iterations=1, explore_size=2,
                             beam_size=1, test_conditions=4, max_new_tokens=16, evaluator_max_new_tokens=4)
    with ResultsStore.open(db_path=tmp_path / "results.db") as store:
        comps = Components(classifier=a, classifier_b=b, mllm=mllm, generator=SyntheticDigits(size=16), store=store)
        result = build_analysis("model-diff", comps, config)()
        assert {e.method for e in result.explanations} == {"raw-differences", "summarization", "optimization"}
        raw = result.explanation("raw-differences")
        assert raw.error is None and raw.score.n == 4
        assert 0 <= raw.score.unparsed <= raw.score.n  # unreadable answers are counted, not raised
        for method in ("summarization", "optimization"):
            e = result.explanation(method)
            assert e.error is not None or e.score is not None  # either scored or its failure is stated
        # Stored: the same run again makes no model call.
        again = build_analysis("model-diff", comps, config)()
        assert again.result_key == result.result_key and "Loaded from the results store." in again.notes
