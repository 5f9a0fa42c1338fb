"""Optimization (seed 002 §4, Alg. 3): a beam of n explanations refined by exploration and feedback.

    C <- C0 (random); beam <- n samples of Summarize(RawDiff(C0)); score the beam on C
    for t = 1..T:
        C_new <- Explore(beam with scores)             one P5 call; invalid/repeated proposals dropped, recorded
        C <- C u C_new; rescore the beam on C           P4's "Updated {Metrics}"
        children <- Update(z, score on C_{t-1}, RawDiff(C_new), score on C_t) for z in beam    n P4 calls
        beam <- top n of beam u children by Q on C     ties: fewer tokens, then the older candidate
    return the best of the beam

Q = Completeness + Density (or Completeness alone, Table 2). Alg. 3's greedy accept-if-better is beam=1.
Every iteration is stored as one record under the run's key once complete; a re-run loads the stored ones
and continues with the first missing one (its LLM replies and answers are cached too), so cancelling or
killing the process loses at most the unfinished units and the final explanation is the same.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any, Callable

from ...base.errors import MalformedOutputError
from ...base.job_context import JobContext
from .cache import KIND_ITERATION, UnitMemo
from .conditions import ConditionSpace
from .config import ModelDiffConfig
from .differences import ConditionMeasurement, DifferenceMeter
from .explainers import parse_explanation, parse_proposals, parse_update, proposals_to_conditions
from .llm_calls import ExplainerLLM, derive_seed
from .prompts import ModelDiffPrompts, format_scores
from .result import CandidateRecord, ExploredCondition, IterationRecord, iteration_from_dict
from .scoring import ExplanationScorer


def rank_key(c: CandidateRecord, order: int) -> tuple:
    """Sort key: higher Q first, then fewer tokens, then the older candidate."""
    return (-(c.objective if c.objective is not None else float("-inf")),
            c.score.tokens if c.score else 1 << 30, order)


class Optimizer:
    def __init__(self, *, config: ModelDiffConfig, space: ConditionSpace, meter: DifferenceMeter,
                 explainer: ExplainerLLM, scorer: ExplanationScorer, prompts: ModelDiffPrompts, memo: UnitMemo,
                 run_key: str, on_iteration: Callable[[IterationRecord], None] | None = None) -> None:
        self.cfg, self.space, self.meter, self.explainer, self.scorer = config, space, meter, explainer, scorer
        self.prompts, self.memo, self.run_key, self.on_iteration = prompts, memo, run_key, on_iteration

    # -- helpers ----------------------------------------------------------------------------------------------
    def _score(self, c: CandidateRecord, observed: list[ConditionMeasurement], ctx: JobContext) -> CandidateRecord:
        density = self.cfg.objective == "completeness+density"
        c.score = self.scorer.score(c.text, observed, ctx, density=density)
        c.objective = c.score.objective(self.cfg.objective)
        return c

    def _iteration_key(self, t: int) -> str:
        return self.memo.key(KIND_ITERATION, run=self.run_key, t=t)

    def _store(self, record: IterationRecord, observed: list[ConditionMeasurement]) -> None:
        payload = {"record": asdict(record), "observed": [m.to_dict() for m in observed]}
        self.memo.put(self._iteration_key(record.t), KIND_ITERATION, payload)

    def _load(self, t: int) -> tuple[IterationRecord, list[ConditionMeasurement]] | None:
        hit = self.memo.get(self._iteration_key(t))
        if hit is None:
            return None
        return iteration_from_dict(hit["record"]), [ConditionMeasurement.from_dict(m) for m in hit["observed"]]

    # -- the loop ---------------------------------------------------------------------------------------------
    def run(self, ctx: JobContext) -> tuple[CandidateRecord, list[ConditionMeasurement], list[IterationRecord]]:
        cfg = self.cfg
        records: list[IterationRecord] = []
        loaded = self._load(0)
        if loaded is None:
            record, observed = self._initial(ctx)
        else:
            record, observed = loaded
        records.append(record)
        by_id = {c.id: c for c in record.candidates}
        beam = [by_id[i] for i in record.beam]
        for t in range(1, cfg.iterations + 1):
            ctx.check_cancelled()
            ctx.progress("Optimization", t - 1, cfg.iterations, message=f"iteration {t} of {cfg.iterations}")
            loaded = self._load(t)
            if loaded is None:
                record, observed = self._iterate(t, beam, observed, ctx)
            else:
                record, observed = loaded
            records.append(record)
            pool = {c.id: c for c in record.rescored + record.candidates}
            beam = [pool[i] for i in record.beam]
        ctx.progress("Optimization", cfg.iterations, cfg.iterations)
        return beam[0], observed, records

    def _initial(self, ctx: JobContext) -> tuple[IterationRecord, list[ConditionMeasurement]]:
        cfg, start = self.cfg, time.perf_counter()
        calls0, eval0 = self.explainer.calls, self.scorer.calls
        c0 = self.space.sample(cfg.initial_conditions, derive_seed(cfg.seed, "C0"))
        observed = self.meter.measure_all(c0, ctx, "Optimization: measuring the initial conditions")
        prompt = self.prompts.render_summarize([m.line() for m in observed], cfg.concise_prompt)
        candidates = []
        for j in range(cfg.beam_size):
            ctx.check_cancelled()
            reply = self.explainer.ask(prompt, derive_seed(cfg.seed, "summarize-beam", j))
            cand = CandidateRecord(id=f"t0-{j}", text="", raw_reply=reply)
            try:
                cand.text = parse_explanation(reply)
            except MalformedOutputError as exc:
                cand.error = exc.message
            candidates.append(cand)
        for c in candidates:
            if c.error is None:
                self._score(c, observed, ctx)
        record = IterationRecord(t=0, candidates=candidates, n_conditions=len(observed),
                                 lines=[m.line() for m in observed])
        self._select(record, candidates)
        self._finish(record, observed, calls0, eval0, start)
        return record, observed

    def _finish(self, record: IterationRecord, observed: list, calls0: int, eval0: int, start: float) -> None:
        """Close an iteration: its call counts and time, stored (for resume), reported."""
        record.llm_calls, record.evaluator_calls = self.explainer.calls - calls0, self.scorer.calls - eval0
        record.seconds = time.perf_counter() - start
        self._store(record, observed)
        if self.on_iteration:
            self.on_iteration(record)

    def _select(self, record: IterationRecord, pool: list[CandidateRecord]) -> None:
        valid = [(c, i) for i, c in enumerate(pool) if c.error is None and c.score is not None]
        ranked = sorted(valid, key=lambda ci: rank_key(ci[0], ci[1]))
        kept = [c for c, _ in ranked[:self.cfg.beam_size]]
        for c in pool:
            c.kept = c in kept
        if not kept:
            raise MalformedOutputError("The explainer LLM gave no readable explanation to start Optimization from.",
                                       hint="Check the LLM (a larger or instruction-tuned model) and run again; "
                                            "the replies are kept in the iteration record.",
                                       detail="\n---\n".join(str(c.raw_reply)[:500] for c in pool))
        record.beam = [c.id for c in kept]
        record.best_objective = kept[0].objective

    def _iterate(self, t: int, beam: list[CandidateRecord], observed: list[ConditionMeasurement], ctx: JobContext) \
            -> tuple[IterationRecord, list[ConditionMeasurement]]:
        ctx.check_cancelled()
        cfg, start = self.cfg, time.perf_counter()
        calls0, eval0 = self.explainer.calls, self.scorer.calls
        record = IterationRecord(t=t)
        history = [(c.text, format_scores(c.score, cfg.objective)) for c in beam]
        prompt = self.prompts.render_explore(objective=cfg.objective, history=history,
                                             description=self.space.description(), size=cfg.explore_size)
        reply = self.explainer.ask(prompt, derive_seed(cfg.seed, "explore", t))
        record.explore_reply = reply
        seen = {m.condition.id for m in observed}
        try:
            proposals = proposals_to_conditions(parse_proposals(reply), self.space, seen, cfg.explore_size)
        except MalformedOutputError as exc:
            proposals = []
            record.explored.append(ExploredCondition(None, None, False, f"unreadable reply: {exc.message}"))
        new_conditions = []
        for cond, strategy, reason, item in proposals:
            record.explored.append(ExploredCondition(cond.to_dict() if cond else None, strategy, reason is None,
                                                     reason, item))
            if reason is None:
                new_conditions.append(cond)
        new = self.meter.measure_all(new_conditions, ctx, f"Optimization {t}: measuring explored conditions")
        record.lines = [m.line() for m in new]
        grown = observed + new
        record.n_conditions = len(grown)
        rescored = []
        for c in beam:
            copy = CandidateRecord(id=c.id, text=c.text, parent=c.parent, feedback=c.feedback)
            rescored.append(self._score(copy, grown, ctx))
        children = []
        if new:
            for i, (old, now) in enumerate(zip(beam, rescored)):
                ctx.check_cancelled()
                up = self.prompts.render_update(objective=cfg.objective, explanation=old.text,
                                                before=format_scores(old.score, cfg.objective), lines=record.lines,
                                                after=format_scores(now.score, cfg.objective),
                                                concise=cfg.concise_prompt)
                reply = self.explainer.ask(up, derive_seed(cfg.seed, "update", t, i))
                child = CandidateRecord(id=f"t{t}-{i}", text="", parent=old.id, raw_reply=reply)
                try:
                    child.text, child.feedback = parse_update(reply)
                    self._score(child, grown, ctx)
                except MalformedOutputError as exc:
                    child.error = exc.message
                children.append(child)
        record.rescored, record.candidates = rescored, children
        self._select(record, rescored + children)
        self._finish(record, grown, calls0, eval0, start)
        return record, grown
