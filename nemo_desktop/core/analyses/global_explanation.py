"""Global explanation (NEMO paper §4.2.7, Table 6): many per-sample explanations of a run -> one summary of
the classifier's failure modes, written by the MLLM; optionally scored with CEI as the explanation of
every sample.

    locals_ = collect_explanations(store, run_id, method="scitx")
    g = GlobalExplainer(mllm, store=store).explain(locals_, run_id=run_id)       # -> GlobalExplanation
    score = GlobalScorer(classifier, mllm, editor, store=store).score(g, locals_)  # -> GlobalScore (Table 6)

Aggregation: one line per explanation, `- [true: <y>; predicted: <ŷ>] <explanation>`, in item order, into
resources/prompts/global_explanation.v1.txt (written for NEMO Desktop; the paper does not print its
prompt), greedy decoding, JSON `global_explanation`, one repair turn if unreadable. A run larger than
`chunk_size` explanations is summarised chunk by chunk and the summaries are summarised again with the
same template (map-reduce), so any run fits a small model's context.

Scoring (Table 6, "Local" vs "+ Global"): for every sample the global explanation takes the place of the
hypothesis in the SciTX counterfactual test (intervention.py: A.3 prompt, editor or prompt rewrite,
classifier re-run), giving a CEI per sample; the table compares the mean CEI of the per-sample explanations
with the mean CEI of the global one over the same samples. Interventions depend only on the explanation
and the (true, predicted) class names, so samples sharing a class pair share one intervention text.

Which explanations: the items of a results-store run whose record is an ExplanationResult (kind
"explanation"), or a record holding one under "result" (the benchmark's per-sample records). Each record's
stored input image ("input" artifact) is used for scoring, else the image file it names. Everything is
cached in the store (kinds "global-summary", "global-explanation", "global-cei"): a re-run makes no model
call.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Sequence

import numpy as np
from PIL import Image

from ... import __version__
from ..base.errors import ConfigError, InputImageError, JobCancelled
from ..base.job_context import JobContext, null_context
from ..models.protocols import ChatMessage
from ..registry import AnalysisSpec, Inputs
from ..results import ResultBase
from ..methods.intervention import (CounterfactualTester, InterventionPrompts, InterventionSettings, UnitCache,
                                    ask_json, classifier_part, error_text, image_hash, load_input, model_manifest,
                                    model_part, raw_replies, sample_info, sha_text, unit_key)
from ..methods.pipeline_steps import stored_result
from ..methods.prompts import PromptTemplate, load_prompt
from ..base.records import Candidate, ExplanationResult

VERSION = "1"  # bump when results change for the same inputs (part of every key)
ANALYSIS = "global-explanation"
GLOBAL_KIND, SUMMARY_KIND, SCORE_KIND = "global-explanation", "global-summary", "global-cei"
FIELD = "global_explanation"


@dataclass
class LocalExplanation:
    """One per-sample explanation of a run and where it is stored."""

    item_id: str
    record_key: str  # the store record holding it (and its "input" artifact)
    result: ExplanationResult


@dataclass
class GlobalExplanation(ResultBase):
    explanation: str | None
    count: int  # explanations aggregated
    run_id: str | None = None
    method: str | None = None  # the per-sample method whose explanations were aggregated
    chunk_summaries: list[str] = field(default_factory=list)  # map step (empty for a single chunk)
    error: str | None = None
    raw_reply: str | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    result_key: str | None = None


@dataclass
class SampleScore:
    item_id: str
    true_name: str
    pred_name: str
    cei_local: float | None  # CEI of the sample's own explanation (from its result)
    cei_global: float | None  # CEI of the global explanation on this sample
    prob_true_before: float | None = None
    prob_true_after: float | None = None
    intervention: str | None = None
    edited_artifact: str | None = None
    error: str | None = None


@dataclass
class GlobalScore(ResultBase):
    """Table 6: mean CEI of the per-sample explanations vs of the global one, over the same samples."""

    global_key: str | None
    samples: list[SampleScore]
    mean_local: float | None
    mean_global: float | None
    paired: int  # samples with both CEIs (the means are over these)
    notes: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)
    result_key: str | None = None

    @property
    def gain(self) -> float | None:
        if self.mean_local is None or self.mean_global is None:
            return None
        return self.mean_global - self.mean_local

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "gain": self.gain}  # derived, for readers of the JSON; ignored when read


# -- which explanations -------------------------------------------------------------------------------------
def collect_explanations(store: Any, run_id: str, method: str | None = None) -> list[LocalExplanation]:
    """The explained items of run `run_id` (of one method). Several methods without `method` -> ConfigError."""
    if store.get_run(run_id) is None:
        known = ", ".join(r["run_id"] for r in store.list_runs()[:10]) or "none"
        raise ConfigError(f"No run '{run_id}' in the results store.", hint=f"Known runs: {known}.")
    found: list[LocalExplanation] = []
    for item in sorted(store.run_items(run_id), key=lambda it: it["item_id"]):
        key = item.get("result_key")
        rec = store.get(key) if key else None
        if rec is None:
            continue
        data = rec.payload if rec.kind == "explanation" else rec.payload.get("result")
        if not isinstance(data, dict) or "sample" not in data:
            continue
        result = ExplanationResult.from_dict(data)
        if result.explanation:
            found.append(LocalExplanation(item["item_id"], rec.key, result))
    methods = Counter(e.result.method for e in found)
    if method is not None:
        found = [e for e in found if e.result.method == method]
    elif len(methods) > 1:
        listed = ", ".join(f"{m} ({n})" for m, n in methods.most_common())
        raise ConfigError(f"Run '{run_id}' holds explanations of several methods: {listed}.",
                          hint="Choose the method whose explanations to aggregate (--method).")
    if not found:
        raise ConfigError(f"Run '{run_id}' has no per-sample explanation" + (f" of method '{method}'." if method
                                                                              else "."),
                          hint=f"Methods in the run: {', '.join(methods) or 'none'}.")
    return found


# -- aggregation --------------------------------------------------------------------------------------------
@dataclass
class GlobalConfig:
    chunk_size: int = 100  # explanations per MLLM call; more are summarised chunk by chunk (map-reduce)
    max_new_tokens: int = 512

    def __post_init__(self) -> None:
        if self.chunk_size < 2:
            raise ConfigError("The chunk size of the global explanation must be at least 2.")


class GlobalExplainer:
    """The MLLM aggregates per-sample explanations into one global explanation."""

    def __init__(self, mllm: Any, store: Any = None, config: GlobalConfig | None = None,
                 prompt: PromptTemplate | None = None, repair: PromptTemplate | None = None) -> None:
        if mllm is None:
            raise ConfigError("The global explanation is written by a multimodal LLM, and none was given.",
                              hint="Give one with --mllm.")
        self.mllm = mllm
        self.store = store
        self.config = config or GlobalConfig()
        self.prompt = prompt or load_prompt("global_explanation")
        self.repair = repair or load_prompt("json_repair")

    def explain(self, explanations: Sequence[LocalExplanation | ExplanationResult], *, run_id: str | None = None,
                ctx: JobContext | None = None) -> GlobalExplanation:
        ctx = ctx or null_context()
        cfg = self.config
        results = [e.result if isinstance(e, LocalExplanation) else e for e in explanations]
        results = [r for r in results if r.explanation]
        if not results:
            raise ConfigError("There are no per-sample explanations to aggregate.")
        methods = sorted({r.method for r in results})
        lines = [f"- [true: {r.sample.true_name}; predicted: {r.sample.pred_name}] {_one_line(r.explanation)}"
                 for r in results]
        units = UnitCache(self.store)
        key = unit_key(GLOBAL_KIND, run_id=run_id, lines_sha256=sha_text("\n".join(lines)),
                       mllm=model_part(self.mllm.info), prompt_version=self.prompt.version,
                       repair_version=self.repair.version, chunk_size=cfg.chunk_size,
                       max_new_tokens=cfg.max_new_tokens, version=VERSION)
        stored = stored_result(units, key, ctx, GlobalExplanation)
        if stored is not None:
            return stored
        t0 = time.perf_counter()
        chunks = [lines[i:i + cfg.chunk_size] for i in range(0, len(lines), cfg.chunk_size)]
        summaries: list[str] = []
        transient = False
        error = raw = None
        if len(chunks) > 1:
            ctx.progress("Summarising groups of explanations", 0, len(chunks))
            for i, chunk in enumerate(chunks):
                ctx.check_cancelled()
                unit, failed = self._summarise(units, chunk, "explanations", "Explanations")
                transient |= failed
                if unit.get("text"):
                    summaries.append(unit["text"])
                ctx.progress("Summarising groups of explanations", i + 1, len(chunks))
            if not summaries:
                error = "Every group summary failed; see the stored units."
            final_items, kind, heading = [f"- {_one_line(s)}" for s in summaries], \
                "summaries of groups of explanations", "Summaries"
        else:
            final_items, kind, heading = chunks[0], "explanations", "Explanations"
        text = None
        if error is None:
            ctx.check_cancelled()
            ctx.progress("Writing the global explanation", 0, 1)
            unit, failed = self._summarise(units, final_items, kind, heading)
            transient |= failed
            text, error, raw = unit.get("text"), unit.get("error"), raw_replies(unit)
            ctx.progress("Writing the global explanation", 1, 1)
        out = GlobalExplanation(
            explanation=text, count=len(results), run_id=run_id, method=methods[0] if len(methods) == 1 else None,
            chunk_summaries=summaries, error=error, raw_reply=raw, timings={"total": time.perf_counter() - t0},
            manifest={"version": VERSION, "app_version": __version__, "date": _now(), "complete": not transient,
                      "mllm": model_manifest(self.mllm.info), "methods": methods,
                      "prompts": {"global_explanation": self.prompt.version, "repair": self.repair.version},
                      "config": asdict(cfg), "chunks": len(chunks),
                      "units": {"computed": units.computed, "reused": units.reused}})
        if self.store is not None:
            out.result_key = key
            self.store.put(key, GLOBAL_KIND, out.to_dict())
        return out

    def _summarise(self, units: UnitCache, items: list[str], kind: str, heading: str) -> tuple[dict, bool]:
        prompt = self.prompt.render(count=len(items), item_kind=kind, item_heading=heading, items="\n".join(items))
        key = unit_key(SUMMARY_KIND, mllm=model_part(self.mllm.info), prompt_version=self.prompt.version,
                       repair_version=self.repair.version, prompt_sha256=sha_text(prompt),
                       max_new_tokens=self.config.max_new_tokens)
        hit = units.get(key)
        if hit is not None:
            return hit.payload, False
        try:
            outcome = ask_json(self.mllm, self.repair, [ChatMessage.user(prompt)], FIELD, self.config.max_new_tokens,
                               0.0, None)
        except JobCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded, not cached: a re-run retries
            return {"text": None, "error": f"The MLLM failed: {error_text(exc)}"}, True
        payload = {"text": outcome.pop("value"), "items": len(items), **outcome}
        units.put(key, SUMMARY_KIND, payload)
        return payload, False


# -- scoring (Table 6) --------------------------------------------------------------------------------------
class GlobalScorer:
    """CEI of one global explanation on every sample, with the same counterfactual test as SciTX."""

    def __init__(self, classifier: Any, mllm: Any, editor: Any = None, store: Any = None,
                 settings: InterventionSettings | None = None, prompts: InterventionPrompts | None = None) -> None:
        self.tester = CounterfactualTester(classifier, mllm, editor, prompts=prompts, settings=settings)
        if not self.tester.can_test:
            raise ConfigError(f"The global explanation cannot be scored: {self.tester.why_not()}.",
                              hint="Give an MLLM and an image editor, or use a zero-shot classifier.")
        self.classifier = classifier
        self.store = store

    def score(self, global_explanation: GlobalExplanation | str, explanations: Sequence[LocalExplanation],
              ctx: JobContext | None = None) -> GlobalScore:
        ctx = ctx or null_context()
        g = global_explanation
        text = g if isinstance(g, str) else g.explanation
        global_key = None if isinstance(g, str) else g.result_key
        if not text:
            raise ConfigError("The global explanation is empty, so it cannot be scored.",
                              hint="Look at its error and raw reply, or re-run it with another MLLM.")
        tester, units = self.tester, UnitCache(self.store)
        clf = classifier_part(self.classifier)
        names = list(self.classifier.class_names)
        s = tester.settings
        key = unit_key(SCORE_KIND, explanation_sha256=sha_text(text), classifier=clf,
                       mllm=model_part(self.tester.mllm.info),
                       editor=None if tester.zero_shot else model_part(tester.editor.info),
                       prompts=tester.prompts.versions(), settings=asdict(s),
                       items=[[e.item_id, e.record_key] for e in explanations], version=VERSION)
        stored = stored_result(units, key, ctx, GlobalScore)
        if stored is not None:
            return stored
        notes: list[str] = []
        scores: list[SampleScore] = []
        artifacts: dict[str, Any] = {}
        transient = False
        other_classifier = {e.result.manifest.get("models", {}).get("classifier", {}).get("id")
                            for e in explanations} - {None, self.classifier.info.model_id}
        if other_classifier:
            notes.append(f"Some explanations were made for another classifier ({', '.join(sorted(other_classifier))});"
                         f" they are scored with {self.classifier.info.model_id}.")
        n = len(explanations)
        for i, e in enumerate(explanations):
            ctx.check_cancelled()
            ctx.progress("Scoring the global explanation", i, n)
            r = e.result
            row = SampleScore(e.item_id, r.sample.true_name, r.sample.pred_name, r.cei, None)
            scores.append(row)
            try:
                img = self._image(e)
            except (InputImageError, ConfigError, OSError) as exc:
                row.error = f"The image is not available: {getattr(exc, 'message', exc)}"
                continue
            image_sha = image_hash(img)
            y = r.sample.true_index
            if not 0 <= y < len(names) or names[y] != r.sample.true_name:
                row.error = f"The classifier has no class '{r.sample.true_name}' at index {y}."
                continue
            probs = tester.classify(units, img, image_sha, clf)
            sample = sample_info(probs, names, y, None, image_sha)
            cand = Candidate(hypothesis=text)
            sub = JobContext(cancel=ctx.cancel_token)
            edited, failed = tester.test(sub, units, img, image_sha, clf, sample, [cand], artifacts=artifacts,
                                         artifact_prefix=f"edited_{i}_")
            transient |= failed
            row.prob_true_before, row.prob_true_after = cand.prob_true_before, cand.prob_true_after
            row.cei_global, row.intervention, row.error = cand.cei, cand.intervention, cand.error
            row.edited_artifact = cand.edited_artifact
        ctx.progress("Scoring the global explanation", n, n)
        paired = [r for r in scores if r.cei_local is not None and r.cei_global is not None]
        if len(paired) < len(scores):
            notes.append(f"{len(scores) - len(paired)} of {len(scores)} samples lack a local or a global CEI and are "
                         "left out of the means.")
        out = GlobalScore(
            global_key=global_key, samples=scores, paired=len(paired),
            mean_local=float(np.mean([r.cei_local for r in paired])) if paired else None,
            mean_global=float(np.mean([r.cei_global for r in paired])) if paired else None, notes=notes,
            manifest={"version": VERSION, "app_version": __version__, "date": _now(), "complete": not transient,
                      "models": {"classifier": model_manifest(self.classifier.info),
                                 "mllm": model_manifest(tester.mllm.info),
                                 "editor": None if tester.zero_shot else model_manifest(tester.editor.info)},
                      "intervention": tester.kind, "prompts": tester.prompts.versions(), "settings": asdict(s),
                      "explanation": text, "units": {"computed": units.computed, "reused": units.reused}})
        if self.store is not None:
            out.result_key = key
            self.store.put(key, SCORE_KIND, out.to_dict(), artifacts)
        return out

    def _image(self, e: LocalExplanation) -> Image.Image:
        rec = self.store.get(e.record_key) if self.store is not None else None
        if rec is not None and "input" in rec.artifacts:
            return rec.load_image("input").convert("RGB")
        if not e.result.sample.image_path:
            raise ConfigError("the result kept neither the input image nor its path")
        return load_input(e.result.sample.image_path)[0]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- the analysis (registry entry) ----------------------------------------------------------------------------
@dataclass(frozen=True)
class GlobalAnalysisConfig:
    """Settings of `global-explanation`. Edit settings left None are taken from the explanations' manifests, so
    the global CEI is measured as the per-sample CEI was."""

    method: str | None = field(default=None, metadata={
        "label": "Method", "help": "aggregate the explanations of this method (needed when the run holds several)"})
    chunk_size: int = field(default=100, metadata={
        "label": "Explanations per call", "min": 2,
        "help": "explanations per MLLM call; larger runs are summarised in groups first"})
    max_new_tokens: int = field(default=512, metadata={"label": "Max new tokens", "min": 1,
                                                       "help": "cap on each MLLM reply"})
    score: bool = field(default=False, metadata={
        "label": "Score with CEI", "help": "score the global explanation with CEI on every sample (Table 6)"})
    seed: int | None = field(default=None, metadata={"label": "Edit seed", "help": "default: the explanations'"})
    edit_steps: int | None = field(default=None, metadata={"label": "Edit steps", "min": 1,
                                                           "help": "diffusion steps (default: the explanations')"})

    def __post_init__(self) -> None:
        if self.chunk_size < 2 or self.max_new_tokens < 1:
            raise ConfigError("The chunk size must be at least 2 and the token cap at least 1.")


@dataclass
class GlobalAnalysisResult:
    """The global explanation of a run and, when asked, its CEI score (kind 'dataset')."""

    explanation: GlobalExplanation
    score: GlobalScore | None = None

    kind = "dataset"
    analysis = ANALYSIS

    @property
    def key(self) -> str | None:
        """The summary's store key, joined with the score's when the explanation was scored (two records)."""
        if self.score is not None and self.score.result_key:
            return f"{self.explanation.result_key}+{self.score.result_key}"
        return self.explanation.result_key

    @property
    def manifest(self) -> dict[str, Any]:
        return self.explanation.manifest

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "analysis": self.analysis, "global": self.explanation.to_dict(),
                "score": self.score.to_dict() if self.score is not None else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GlobalAnalysisResult":
        return cls(GlobalExplanation.from_dict(d["global"]),
                   GlobalScore.from_dict(d["score"]) if d.get("score") else None)


def recorded_model(explanations: Sequence[LocalExplanation], role: str) -> str | None:
    """The model id (role: mllm, classifier, editor) most explanations of the run were made with."""
    ids = Counter((e.result.manifest.get("models", {}).get(role) or {}).get("id") for e in explanations)
    ids.pop(None, None)
    return ids.most_common(1)[0][0] if ids else None


def recorded_setting(explanations: Sequence[LocalExplanation], name: str) -> Any:
    import json

    values = Counter(json.dumps(e.result.manifest.get("config", {}).get(name)) for e in explanations)
    return json.loads(values.most_common(1)[0][0]) if values else None


class GlobalExplanationAnalysis:
    """`global-explanation`: one summary of a run's per-sample explanations, optionally scored with CEI."""

    def __init__(self, mllm: Any, classifier: Any = None, editor: Any = None, store: Any = None,
                 config: GlobalAnalysisConfig | None = None) -> None:
        self.mllm, self.classifier, self.editor, self.store = mllm, classifier, editor, store
        self.config = config or GlobalAnalysisConfig()

    def __call__(self, run_id: str, ctx: JobContext | None = None) -> GlobalAnalysisResult:
        ctx = ctx or null_context()
        cfg = self.config
        explanations = collect_explanations(self.store, run_id, cfg.method)
        summary_ctx = ctx.sub("Summarising", 0.0, 0.3 if cfg.score else 1.0)
        g = GlobalExplainer(self.mllm, self.store, GlobalConfig(cfg.chunk_size, cfg.max_new_tokens)).explain(
            explanations, run_id=run_id, ctx=summary_ctx)
        score = None
        if cfg.score:
            if self.classifier is None:
                raise ConfigError("Scoring the global explanation needs the classifier.",
                                  hint="Give one with --classifier (default: the explanations').")
            size = recorded_setting(explanations, "edit_size")
            settings = InterventionSettings(
                seed=cfg.seed if cfg.seed is not None else (recorded_setting(explanations, "seed") or 0),
                edit_steps=cfg.edit_steps if cfg.edit_steps is not None else
                recorded_setting(explanations, "edit_steps"),
                edit_guidance=recorded_setting(explanations, "edit_guidance"),
                edit_size=tuple(size) if size else None,
                # Results from before the setting existed were edited at the image's own size.
                edit_resolution=recorded_setting(explanations, "edit_resolution") or "native",
                max_new_tokens=recorded_setting(explanations, "intervention_max_new_tokens") or 256)
            score = GlobalScorer(self.classifier, self.mllm, self.editor, self.store, settings).score(
                g, explanations, ctx.sub("Scoring", 0.3, 1.0))
        return GlobalAnalysisResult(g, score)


# The module's registry entry, named by its entry point (pyproject.toml, nemo_desktop.analyses).
SPEC = AnalysisSpec(
    name=ANALYSIS, kind="dataset", version=VERSION, factory=GlobalExplanationAnalysis, config=GlobalAnalysisConfig,
    result=GlobalAnalysisResult, inputs=Inputs(classifier="optional", mllm="required", editor="optional", data="run"),
    description="One global explanation of a run's per-sample explanations (NEMO §4.2.7), optionally scored with "
                "CEI on every sample (Table 6).")
