"""The coloured-digits world end to end: two CNNs with the seed's planted biases, the product's renderer,
the real pipeline, and LLM doubles that read only their prompts."""
from __future__ import annotations

import re

import pytest

from fixtures_tiny import cmnist_world as world
from fixtures_tiny.model_diff_llms import AggregatingExplainer, RuleReaderEvaluator, _answer
from nemo_desktop.core.analyses.model_diff import ModelDiffConfig, ModelDiffPipeline, ModelDiffResult
from nemo_desktop.core.analyses.model_diff.optimization import rank_key
from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.store import ResultsStore

CONFIG = ModelDiffConfig(samples_per_condition=10, initial_conditions=10, iterations=4, explore_size=10,
                         beam_size=3, test_conditions=200, seed=0)


def _pipe(models, store=None, explainer=None, evaluator=None, config=CONFIG):
    a, b = models
    return ModelDiffPipeline(a, b, world.generator(), explainer or AggregatingExplainer(),
                             evaluator or RuleReaderEvaluator(), config=config, store=store)


@pytest.fixture(scope="module")
def run(paper_models, tmp_path_factory):
    store = ResultsStore.open(db_path=tmp_path_factory.mktemp("store") / "results.db")
    explainer, evaluator = AggregatingExplainer(), RuleReaderEvaluator()
    pipe = _pipe(paper_models, store, explainer, evaluator)
    result = pipe(JobContext())
    return pipe, result, store, explainer, evaluator


def test_optimization_recovers_the_planted_difference(run):
    _, result, _, _, _ = run
    opt = result.explanation("optimization").text
    assert "angle" not in opt
    diagnostic = {(3, "green"): "[2]", (7, "green"): "[1]"}
    for (digit, colour), want in diagnostic.items():
        assert _answer(opt, digit, colour, 0).startswith(want), opt
    assert not _answer(opt, 3, "red", 0).startswith("[2]"), opt
    assert not _answer(opt, 7, "blue", 0).startswith("[1]"), opt
    scores = {e.method: e.score for e in result.explanations}
    assert scores["optimization"].n == 200 and scores["optimization"].completeness > 0.8
    # On this grid a digit-only summary already scores ~0.86 (only 10% of cells are ties), so Completeness does
    # not separate it from the full rule here; the note's "split" world is where Optimization must beat it.
    assert scores["raw-differences"].tokens > 10 * scores["optimization"].tokens


def test_raw_and_summarization_observe_exactly_the_optimization_budget(run):
    _, result, _, _, _ = run
    for method in ("raw-differences", "summarization"):
        assert result.explanation(method).observed_conditions == CONFIG.observed_budget
    # Optimization observes C0 plus the valid proposals; repeated/invalid ones are dropped and recorded
    valid = sum(e.valid for r in result.iterations for e in r.explored)
    assert result.explanation("optimization").observed_conditions == CONFIG.initial_conditions + valid
    assert len(result.explanation("raw-differences").text.splitlines()) == CONFIG.observed_budget


def test_every_beam_is_exactly_the_top_candidates_by_score(run):
    _, result, _, _, _ = run
    assert [r.t for r in result.iterations] == list(range(CONFIG.iterations + 1))
    for record in result.iterations:
        pool = [c for c in record.rescored + record.candidates if c.error is None]
        ranked = sorted(enumerate(pool), key=lambda ic: rank_key(ic[1], ic[0]))
        assert record.beam == [c.id for _, c in ranked[:CONFIG.beam_size]]
        assert {c.id for c in pool if c.kept} == set(record.beam)
    explored = [e for r in result.iterations for e in r.explored]
    assert any(not e.valid and "chartreuse" in str(e.proposal) for e in explored)  # invalid proposals recorded


def test_result_round_trips_and_a_rerun_makes_no_model_call(run, paper_models):
    pipe, result, store, _, _ = run
    again = ModelDiffResult.from_dict(result.to_dict())
    assert again.to_dict() == result.to_dict()
    assert again.kind == "model" and again.analysis == "model-diff"
    explainer, evaluator = AggregatingExplainer(), RuleReaderEvaluator()
    rerun = _pipe(paper_models, store, explainer, evaluator)(JobContext())
    assert explainer.calls == 0 and evaluator.calls == 0
    assert rerun.explanation("optimization").text == result.explanation("optimization").text


def test_cancel_then_resume_ends_like_an_uninterrupted_run(run, paper_models, tmp_path):
    _, result, _, _, _ = run
    store = ResultsStore.open(db_path=tmp_path / "results.db")
    token = CancelToken()
    explainer = AggregatingExplainer()

    def stop_after_two(p):
        if p.stage == "Optimization" and p.done >= 2:
            token.cancel()

    with pytest.raises(JobCancelled):
        _pipe(paper_models, store, explainer)(JobContext(on_progress=stop_after_two, cancel=token))
    first_calls = explainer.calls
    resumed_explainer = AggregatingExplainer()
    resumed = _pipe(paper_models, store, resumed_explainer)(JobContext())
    assert resumed.explanation("optimization").text == result.explanation("optimization").text
    # iterations 0-2 come from the store: only the remaining iterations' explorer/update calls are made
    per_iteration = 1 + CONFIG.beam_size
    assert resumed_explainer.calls == (CONFIG.iterations - 2) * per_iteration
    assert first_calls >= 1 + CONFIG.beam_size + 2 * per_iteration


def test_token_attribution_finds_the_words_the_rule_reader_needs(run):
    _, result, _, _, _ = run
    for e in result.explanations:
        a = e.attribution
        assert a is not None and len(a.units) <= 20 and a.conditions == 50
        assert " ".join(a.units) == " ".join(e.text.split())  # the units cover the whole text, in order
    opt = result.explanation("optimization").attribution
    # removing any span that names digits breaks a rule the evaluator reads: the score drops
    digit_units = [i for i, u in enumerate(opt.units) if re.search(r"\d", u)]
    assert digit_units and all(opt.delta[i] > 0 for i in digit_units)
    assert max(s for e in result.explanations for s in e.attribution.score) == 1.0  # one scale for the run
