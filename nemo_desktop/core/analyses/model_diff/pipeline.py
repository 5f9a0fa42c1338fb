"""ModelDiffPipeline: how do two classifiers differ, in words? (seed 002)

    pipe = ModelDiffPipeline(classifier_a, classifier_b, generator, llm, evaluator, config=ModelDiffConfig(),
                             store=store)
    result = pipe(ctx)                     # ModelDiffResult, stored (kind "model-diff-result")
    pipe.score_text("Model A ...", ctx)    # score a user's own hypothesis (the seed's "Human" row)

Stages: measure the held-out test conditions (Diff_Model, once, stored), Raw Differences and Summarization on
`observed_budget` random conditions, Optimization (optimization.py), then every explanation is scored on the
test conditions with the evaluator. The run key covers everything that determines the result (models and
revisions, condition source, config, prompt versions, LLMs, token counter), so a re-run returns the stored result
without any model call and an interrupted one resumes from its stored units.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Callable

from .... import __version__
from ...base.errors import MalformedOutputError
from ...base.job_context import JobContext, null_context
from .attribution import attribute, normalise
from .cache import KIND_CONDITION, KIND_RESULT, UnitMemo
from .config import ModelDiffConfig
from .differences import ConditionMeasurement, DifferenceMeter
from .evidence import collect_evidence
from .explainers import parse_explanation, raw_differences
from .labels import match_labels
from .llm_calls import ExplainerLLM, derive_seed
from .metrics import TokenCounter, default_token_counter
from .optimization import Optimizer
from .prompts import ModelDiffPrompts
from .result import IterationRecord, MethodExplanation, ModelDiffResult
from .scoring import ExplanationScorer, model_part

ANALYSIS = "model-diff"
VERSION = "1"


def _classifier_part(c: Any) -> dict[str, Any]:
    return {**model_part(c.info), "classes": list(c.class_names)}


class ModelDiffPipeline:
    def __init__(self, classifier_a: Any, classifier_b: Any, generator: Any, llm: Any, evaluator: Any = None, *,
                 config: ModelDiffConfig | None = None, store: Any = None, token_counter: TokenCounter | None = None,
                 on_iteration: Callable[[IterationRecord], None] | None = None) -> None:
        self.classifier_a, self.classifier_b, self.generator = classifier_a, classifier_b, generator
        self.llm, self.evaluator = llm, evaluator or llm
        self.config = config or ModelDiffConfig()
        self.store = store
        self.memo = UnitMemo(store)
        self.tokens = token_counter or default_token_counter()
        self.prompts = ModelDiffPrompts.load()
        self.space = generator.space
        self.match = match_labels(classifier_a.class_names, classifier_b.class_names, self.space.class_labels(),
                                  self.space.label_aliases)
        self.on_iteration = on_iteration
        cfg = self.config
        measure_parts = {"a": _classifier_part(classifier_a), "b": _classifier_part(classifier_b),
                         "generator": dict(generator.info)}
        self.meter = DifferenceMeter(classifier_a, classifier_b, generator, self.match, m=cfg.samples_per_condition,
                                     seed=cfg.seed, memo=self.memo, key_parts=measure_parts)
        self.explainer = ExplainerLLM(llm, self.memo, temperature=cfg.generation_temperature,
                                      max_new_tokens=cfg.max_new_tokens)
        self.scorer = ExplanationScorer(self.evaluator, self.prompts, self.space.task_description, self.memo,
                                        self.tokens, drop_ratio=cfg.drop_ratio, density_repeats=cfg.density_repeats,
                                        seed=cfg.seed, batch_size=cfg.evaluator_batch,
                                        max_new_tokens=cfg.evaluator_max_new_tokens)
        self.run_key = self.memo.key(KIND_RESULT, analysis=ANALYSIS, version=VERSION, **measure_parts,
                                     config=cfg.to_dict(), prompts=self.prompts.versions(),
                                     llm=model_part(llm.info), evaluator=model_part(self.evaluator.info),
                                     tokens=self.tokens.manifest())

    # -- pieces -----------------------------------------------------------------------------------------------
    def test_measurements(self, ctx: JobContext) -> list[ConditionMeasurement]:
        n = self.config.test_conditions
        conds = self.space.all_conditions() if n == 0 else self.space.sample(n, derive_seed(self.config.seed, "test"))
        return self.meter.measure_all(conds, ctx, "Measuring the held-out test conditions")

    def score_text(self, text: str, ctx: JobContext | None = None, method: str = "user") -> MethodExplanation:
        """Scores any explanation (a user's hypothesis) on the held-out test conditions."""
        ctx = ctx or null_context()
        test = self.test_measurements(ctx)
        return MethodExplanation(method, text, self.scorer.score(text, test, ctx, density=True))

    def manifest(self) -> dict[str, Any]:
        return {"analysis": ANALYSIS, "analysis_version": VERSION, "app_version": __version__,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "model_a": {**_classifier_part(self.classifier_a), "extra": _plain(self.classifier_a.info.extra)},
                "model_b": {**_classifier_part(self.classifier_b), "extra": _plain(self.classifier_b.info.extra)},
                "generator": dict(self.generator.info), "condition_space": self.space.name,
                "task_description": self.space.task_description, "labels": list(self.match.labels),
                "llm": model_part(self.llm.info), "evaluator": model_part(self.evaluator.info),
                "prompts": self.prompts.versions(), "token_counter": self.tokens.manifest(),
                "config": self.config.to_dict(), "run_key": self.run_key, "store_kinds": {
                    "condition": KIND_CONDITION, "result": KIND_RESULT}}

    # -- the whole analysis -----------------------------------------------------------------------------------
    def __call__(self, ctx: JobContext | None = None) -> ModelDiffResult:
        ctx = ctx or null_context()
        stored = self.memo.get(self.run_key)
        if stored is not None:
            result = ModelDiffResult.from_dict(stored)
            result.notes.append("Loaded from the results store.")
            return result
        cfg, timings = self.config, {}
        t0 = time.perf_counter()
        test = self.test_measurements(ctx)
        timings["test_conditions"] = time.perf_counter() - t0
        result = ModelDiffResult(test=test, manifest=self.manifest(), version=VERSION)
        observed_by_id: dict[str, ConditionMeasurement] = {}
        if {"raw-differences", "summarization"} & set(cfg.methods):
            t1 = time.perf_counter()
            conds = self.space.sample(cfg.observed_budget, derive_seed(cfg.seed, "observed"))
            observed = self.meter.measure_all(conds, ctx, "Measuring conditions for Raw Differences")
            observed_by_id.update({m.condition.id: m for m in observed})
            if "raw-differences" in cfg.methods:
                result.explanations.append(MethodExplanation("raw-differences", raw_differences(observed), None,
                                                             len(observed)))
            if "summarization" in cfg.methods:
                result.explanations.append(self._summarize(observed, ctx))
            timings["raw_and_summarization"] = time.perf_counter() - t1
        if "optimization" in cfg.methods:
            t2 = time.perf_counter()
            optimizer = Optimizer(config=cfg, space=self.space, meter=self.meter, explainer=self.explainer,
                                  scorer=self.scorer, prompts=self.prompts, memo=self.memo, run_key=self.run_key,
                                  on_iteration=self._report_iteration(ctx))
            try:
                best, explored, records = optimizer.run(ctx)
            except MalformedOutputError as exc:  # no readable explanation to start from: the method failed
                detail = f" Replies: {exc.detail[:500]}" if exc.detail else ""
                result.explanations.append(MethodExplanation("optimization", "", None, 0,
                                                             error=f"{exc.message}{detail}"))
            else:
                observed_by_id.update({m.condition.id: m for m in explored})
                result.iterations = records
                result.explanations.append(MethodExplanation("optimization", best.text, None, len(explored)))
            timings["optimization"] = time.perf_counter() - t2
        result.observed = list(observed_by_id.values())
        t3 = time.perf_counter()
        for e in ctx.track(result.explanations, stage="Scoring explanations on the test conditions"):
            if e.error is None:
                e.score = self.scorer.score(e.text, test, ctx, density=True)
        timings["scoring"] = time.perf_counter() - t3
        if cfg.attribution_words > 0:
            t4 = time.perf_counter()
            self._attribute(result.explanations, test, ctx)
            timings["attribution"] = time.perf_counter() - t4
        timings["total"] = time.perf_counter() - t0
        result.timings = timings
        result.manifest["calls"] = {"explainer": self.explainer.calls, "evaluator": self.scorer.calls,
                                    "classified_images": self.meter.classified_images}
        if any(e.score and e.score.completeness_undefined for e in result.explanations):
            result.notes.append("Completeness is undefined (reported as 0.00) where the model differences or the "
                                "evaluator's answers are constant over the test conditions.")
        result.evidence, images = collect_evidence(test, self.generator, m=cfg.samples_per_condition, seed=cfg.seed,
                                                   ctx=ctx)
        result.result_key = self.run_key
        self.memo.put(self.run_key, KIND_RESULT, result.to_dict(), artifacts=images)
        return result

    def _attribute(self, explanations: list[MethodExplanation], test: list[ConditionMeasurement],
                   ctx: JobContext) -> None:
        """Token attribution of every explanation, normalised together (attribution.py)."""
        cfg, done = self.config, []
        todo = [e for e in explanations if e.error is None and e.text.strip()]
        for i, e in enumerate(todo):
            e.attribution = attribute(self.scorer, e.text, test, ctx.sub(f"Token attribution ({e.method})",
                                                                         i / len(todo), (i + 1) / len(todo)),
                                      max_units=cfg.attribution_words, conditions=cfg.attribution_conditions)
            done.append(e.attribution)
        normalise(done)

    def _summarize(self, observed: list[ConditionMeasurement], ctx: JobContext) -> MethodExplanation:
        ctx.check_cancelled()
        ctx.progress("Summarization", 0, 1)
        prompt = self.prompts.render_summarize([m.line() for m in observed], self.config.concise_prompt)
        reply = self.explainer.ask(prompt, derive_seed(self.config.seed, "summarization"))
        ctx.progress("Summarization", 1, 1)
        try:
            return MethodExplanation("summarization", parse_explanation(reply), None, len(observed))
        except MalformedOutputError as exc:
            return MethodExplanation("summarization", "", None, len(observed),
                                     error=f"{exc.message} Reply: {reply[:500]}")

    def _report_iteration(self, ctx: JobContext) -> Callable[[IterationRecord], None]:
        def report(record: IterationRecord) -> None:
            ctx.partial({"kind": "model-diff-iteration", "record": record})
            if self.on_iteration:
                self.on_iteration(record)

        return report


def _plain(extra: Any) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(dict(extra or {}), default=str))
