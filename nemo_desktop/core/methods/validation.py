"""Validation-augmented baselines (NEMO paper §4.2.2, Table 2) and what every baseline shares.

A baseline proposes candidate explanations its own way (`BaselinePipeline._propose`); this module does the
rest, identically for all of them:
  * classify the image (cached), refuse a correctly classified one;
  * without validation (Table 1): ONE candidate (the greedy reply, or the top-ranked sentence), which is
    still scored with CEI when the classifier can be tested (zero-shot, or an editor was given), so that the
    baselines' CEI can be reported next to SciTX's;
  * with validation (Table 2, registry names `<method>-validated`): M candidates, each tested with the same
    `CounterfactualTester` as SciTX (same A.3 prompts, editor call, classifier re-run and cache keys), and
    the one with the largest CEI is the explanation (`best_candidate`, first on ties);
  * store every unit and the final ExplanationResult; a re-run of a complete result makes no model call.

Progress stages: "Classifying", the method's own ("Grad-CAM", "Finding the reference image", "Retrieving
error sentences", "Generating hypotheses" i/M), then SciTX's "Writing interventions", "Editing image i/M",
"Scoring". Partial results (`ctx.partial`), as SciTX's: {"kind": "sample"}, {"kind": "candidate", "index",
"candidate"}, {"kind": "observations"} (ChangeMLLM's reference), and {"kind": "evidence", "evidence":
{label: artifact name}, "images": {artifact name: PIL image}} (CamMLLM's overlay, ChangeMLLM's reference).

"The same multi-candidate generation ... used by SciTX" (§4.2.2): generative baselines draw M replies to
their own (verbatim) prompt exactly as SciTX draws hypotheses — draw 0 greedy, draw d >= 1 sampled at
the config's sampling settings (`sampling_temperature`, `sampling_top_p`, `sampling_top_k`, `sampling_min_p`,
see models/sampling.py) with seed `seed * 1000 + d`, duplicates replaced by extra draws (`draw_hypotheses`).
The non-generative ErrorRetrieval takes its M best-ranked sentences. `candidate_counts` records in every
manifest how many distinct candidates were drawn and scored, and why the others were not.
"""
from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from PIL import Image

from ... import __version__
from ..base.errors import ConfigError, JobCancelled
from ..base.job_context import JobContext, null_context
from ..models.protocols import ChatMessage
from ..models.sampling import DEFAULT_MIN_P, DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P, Sampling
from .cut_off import CUT_OFF, CUT_OFF_RECORD, accepted_a_cut_reply
from .edit_check import (DEFAULT_FLAG_THRESHOLD, DEFAULT_NOISE_FLOOR, DEFAULT_SELECTION, EDIT_CHECK_FIELD_INFO,
                         check_edit_check, edit_check_record, select)
from .intervention import (CounterfactualTester, InterventionPrompts, InterventionSettings, JsonAsk, UnitCache,
                           ask_json_batch,
                           check_edit_resolution, classifier_part, error_text, image_hash, jsonable, load_input,
                           model_manifest, model_part, raw_replies, unit_key)
from .labels import resolve_label
from .pipeline_steps import INCOMPLETE_NOTE, classify_query, run_record, select_by_cei, stored_result
from .prompts import PromptTemplate, load_prompt
from .reference import check_reference, reference_part
from ..base.records import Candidate, ExplanationResult, Observation

VALIDATED_SUFFIX = "-validated"


# Settings SciTX and the baselines share (labels, help and ranges for the CLI and the settings form).
SHARED_FIELD_INFO: dict[str, dict] = {
    "sampling_top_p": {"label": "Sampling top-p", "min": 0.0, "max": 1.0,
                       "help": "nucleus sampling of draws 2..M (1 = off)"},
    "sampling_top_k": {"label": "Sampling top-k", "min": 0,
                       "help": "top-k of draws 2..M (0 = off; the checkpoint's own value is never used)"},
    "sampling_min_p": {"label": "Sampling min-p", "min": 0.0, "max": 1.0, "help": "min-p of draws 2..M (0 = off)"},
    "edit_resolution": {"label": "Edit resolution", "choices": ("preferred", "native"),
                        "help": "preferred: the editor's working resolution; native: the image's own size"},
    "k_random": {"label": "Random observations (Set C)", "min": 0,
                 "help": "random observations of other classes (default: k; 0 = Algorithm 1 literally)"},
    "k_scope": {"label": "K scope", "choices": ("per-set", "pooled"),
                "help": "per-set: k of each class; pooled: the k nearest of both classes together"},
    **EDIT_CHECK_FIELD_INFO,
}


@dataclass
class BaselineConfig:
    # Labels, help and ranges for the CLI options and the settings form (core/registry/params.py).
    FIELD_INFO: ClassVar[dict[str, dict]] = {
        "m": {"label": "Candidates (M)", "min": 1, "max": 20,
              "help": "candidates tested when validating (Table 2); without validation one candidate"},
        "validate": {"label": "Validate", "help": "draw M candidates and keep the one with the largest CEI"},
        "score": {"label": "Score with CEI", "help": "CEI of the explanation when the classifier can be tested"},
        "seed": {"label": "Seed", "help": "seed of candidate sampling and edits"},
        "sampling_temperature": {"label": "Sampling temperature", "min": 0.0, "max": 2.0,
                                 "help": "temperature of draws 2..M (draw 1 is greedy)"},
        "max_extra_draws": {"label": "Extra draws", "min": 0, "max": 20,
                            "help": "extra draws allowed to replace duplicate candidates"},
        "edit_steps": {"label": "Edit steps", "min": 1, "max": 200, "help": "diffusion steps of the editor"},
        "edit_guidance": {"label": "Edit guidance", "min": 0.0, "max": 50.0, "help": "guidance scale of the editor"},
        "edit_size": {"label": "Edit size", "help": "edit at this size (width x height)"},
        "intervention_max_new_tokens": {"label": "Intervention tokens", "min": 1,
                                        "help": "cap on each edit-instruction / prompt-rewrite reply"},
        "hypothesis_max_new_tokens": {"label": "Hypothesis tokens", "min": 1, "help": "cap on each hypothesis reply"},
        "gradcam_layer": {"label": "Grad-CAM layer", "help": "dotted module name; default: chosen per architecture"},
        "overlay_alpha": {"label": "Overlay opacity", "min": 0.0, "max": 1.0, "help": "heat-map opacity"},
        "overlay_min_side": {"label": "Overlay size", "min": 8, "max": 2048,
                             "help": "enlarge small inputs so the MLLM can read the overlay"},
        "show_original": {"label": "Show original", "help": "also show the MLLM the original image"},
        "reference_max_side": {"label": "Reference size", "min": 8, "max": 4096,
                               "help": "longest side of the stored reference copy"},
        "contrast": {"label": "Ranking", "choices": ("similarity", "tops", "pdiff", "fpdiff"),
                     "help": "similarity: the paper's plain image-sentence similarity; pdiff/fpdiff: contrast with "
                             "the class caption (this project's)"},
        "corpus": {"label": "Error corpus", "choices": ("failure-statements", "class-captions"),
                   "help": "failure-statements: paper-style, class-agnostic; class-captions: not comparable with "
                           "the paper's numbers"},
        "filter_k": {"label": "FPDiff filter", "min": 1, "help": "fpdiff: sentences most similar to the image"},
        "reference_caption": {"label": "Reference caption", "help": "default: the corpus's ('a photo of a {class}.')"},
        "retrieval_model": {"label": "Retrieval model",
                            "help": "joint image-text model (catalog id or family:source); default: the classifier "
                                    "if zero-shot, else clip-vit-b32"},
        "show_top": {"label": "Ranked sentences kept", "min": 1, "help": "ranked sentences kept in the manifest"},
        **SHARED_FIELD_INFO,
    }

    m: int = 3  # candidates tested when validating (Table 2); without validation one candidate
    validate: bool = False
    score: bool = True  # CEI of the explanation when the classifier can be tested (Table 1's CEI)
    seed: int = 0
    # Draws 2..M of generative baselines (draw 1 is greedy); this project's values, see models/sampling.py.
    sampling_temperature: float = DEFAULT_TEMPERATURE
    sampling_top_p: float = DEFAULT_TOP_P
    sampling_top_k: int = DEFAULT_TOP_K  # 0 = off
    sampling_min_p: float = DEFAULT_MIN_P  # 0 = off
    max_extra_draws: int = 3  # extra draws allowed to replace duplicate candidates
    edit_steps: int | None = None
    edit_guidance: float | None = None
    edit_size: tuple[int, int] | None = None  # None = see edit_resolution (InterventionSettings)
    intervention_max_new_tokens: int = 256
    edit_resolution: str = "preferred"  # "preferred": the editor's working resolution; "native": the image's size
    # Counterfactuals that changed the whole image are flagged and, by default, not selected (edit_check.py).
    edit_flag_threshold: float = DEFAULT_FLAG_THRESHOLD
    selection: str = DEFAULT_SELECTION  # "evidence" | "prefer-unflagged" | "cei" (the paper's plain argmax)
    cei_noise_floor: float = DEFAULT_NOISE_FLOOR  # points; see edit_check.py

    def __post_init__(self) -> None:
        check_edit_check(self.edit_flag_threshold, self.selection, self.cei_noise_floor)
        if self.m < 1:
            raise ConfigError(f"The number of candidates m must be at least 1 (got {self.m}).")
        _ = self.sampling  # validates the sampling settings
        check_edit_resolution(self.edit_resolution)
        if self.edit_size is not None:
            self.edit_size = (int(self.edit_size[0]), int(self.edit_size[1]))

    @property
    def sampling(self) -> Sampling:
        return sampling_of(self)

    @property
    def n_candidates(self) -> int:
        return self.m if self.validate else 1

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["edit_size"] = list(self.edit_size) if self.edit_size else None
        for f in fields(self):
            if isinstance(d[f.name], tuple):
                d[f.name] = list(d[f.name])
        return d


def normalise_hypothesis(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def sampling_of(config: Any) -> Sampling:
    """The Sampling of a method config with the `sampling_*` fields (SciTXConfig, BaselineConfig)."""
    return Sampling(config.sampling_temperature, config.sampling_top_p, config.sampling_top_k,
                    config.sampling_min_p)


def candidate_counts(candidates: list[Candidate]) -> dict[str, int]:
    """How many candidates were drawn, how many distinct hypotheses got a CEI, and why the others did not
    (recorded in every manifest; the benchmark tables average `distinct_scored` and `cut_off`). `cut_off`:
    candidates whose reply was cut short at the token limit, also after the retry (cut_off.py)."""
    scored = {normalise_hypothesis(c.hypothesis) for c in candidates if c.cei is not None and c.hypothesis}
    duplicates = sum(1 for c in candidates if (c.error or "").startswith("Duplicate of candidate"))
    no_hypothesis = [c for c in candidates if c.cei is None and not c.hypothesis]
    cut_off = sum(1 for c in no_hypothesis if (c.error or "").startswith(CUT_OFF))
    return {"candidates": len(candidates), "distinct_scored": len(scored), "duplicates": duplicates,
            "no_hypothesis": len(no_hypothesis) - cut_off, "cut_off": cut_off,
            "not_tested": sum(1 for c in candidates if c.cei is None and c.hypothesis) - duplicates}


def candidate_note(counts: dict[str, int]) -> str | None:
    """A note when fewer distinct candidates than were asked for could be compared by CEI."""
    if counts["distinct_scored"] >= counts["candidates"]:
        return None
    why = [f"{counts[k]} {label}" for k, label in (("duplicates", "repeated an earlier candidate"),
                                                    ("no_hypothesis", "gave no readable candidate"),
                                                    ("cut_off", "had their reply cut off at the token limit"),
                                                    ("not_tested", "could not be tested")) if counts.get(k)]
    return (f"Only {counts['distinct_scored']} of {counts['candidates']} candidates were distinct and scored"
            + (f" ({'; '.join(why)})" if why else "") + ".")


# -- multi-candidate generation --------------------------------------------------------------------------------
def draw_hypotheses(ctx: JobContext, units: UnitCache, mllm: Any, messages: list[ChatMessage], *, m: int,
                    key_parts: dict[str, Any], prompt: PromptTemplate, repair: PromptTemplate, seed: int,
                    sampling: Sampling, max_extra_draws: int, max_new_tokens: int,
                    field_name: str = "cause_of_error", stage: str = "Generating hypotheses",
                    batch: bool = False) -> tuple[list[Candidate], list[dict], bool]:
    """M candidates from M draws of one conversation (see the module docstring). Returns (candidates, the
    cached outcome of each candidate's draw, transient). `batch`: the draws that will surely be needed go to
    the MLLM at once (each with its own seed, so every draw is the one it would be alone); the candidates,
    draw numbers and duplicate replacements are exactly those of one draw at a time."""
    candidates: list[Candidate] = []
    outcomes: list[dict] = []
    seen: dict[str, int] = {}
    transient = False
    draw, extra_left = 0, max_extra_draws
    ready: dict[int, tuple[dict, bool]] = {}  # draw number -> (unit, failed), drawn ahead in a batch
    ctx.progress(stage, 0, m)
    for j in range(m):
        while True:
            ctx.check_cancelled()
            if draw not in ready:
                # every candidate still to come needs at least one more draw: ask for those at once
                ahead = (m - j) if batch else 1
                ready.update(_draws(units, mllm, messages, key_parts, prompt, repair, range(draw, draw + ahead),
                                    seed, sampling, max_new_tokens, field_name))
            unit, failed = ready.pop(draw)
            draw += 1
            transient |= failed
            text = unit.get("hypothesis")
            dup = seen.get(normalise_hypothesis(text)) if text else None
            if dup is not None and extra_left > 0:
                extra_left -= 1
                continue
            break
        cand = Candidate(hypothesis=text or "", raw_reply=raw_replies(unit), error=unit.get("error"))
        if dup is not None:
            cand.error = f"Duplicate of candidate {dup + 1} (no new hypothesis in the extra draws)."
        elif text:
            seen[normalise_hypothesis(text)] = j
        candidates.append(cand)
        outcomes.append(unit)
        ctx.partial({"kind": "candidate", "index": j, "candidate": cand})
        ctx.progress(stage, j + 1, m)
    return candidates, outcomes, transient


def _draws(units: UnitCache, mllm: Any, messages: list[ChatMessage], key_parts: dict, prompt: PromptTemplate,
           repair: PromptTemplate, draws: Any, seed: int, sampling: Sampling, max_new_tokens: int,
           field_name: str) -> dict[int, tuple[dict, bool]]:
    """Draws by number (cached per draw): draw 0 greedy, draw d >= 1 sampled with seed `seed * 1000 + d` and
    every sampling field explicit (they are in the key, so a draw made under other settings is never reused).
    The uncached ones are asked together (ask_json_batch). Returns {draw: (unit, failed)}."""
    found: dict[int, tuple[dict, bool]] = {}
    todo: list[tuple[int, str, Sampling | None, int | None]] = []
    for draw in draws:
        draw_sampling = None if draw == 0 else sampling
        draw_seed = None if draw == 0 else seed * 1000 + draw
        temperature = draw_sampling.temperature if draw_sampling is not None else 0.0
        settings = {"sampling": draw_sampling.as_dict()} if draw_sampling is not None else {}  # greedy keys as before
        key = unit_key("hypothesis", **key_parts, mllm=model_part(mllm.info), prompt_version=prompt.version,
                       repair_version=repair.version, draw=draw, temperature=temperature, seed=draw_seed,
                       max_new_tokens=max_new_tokens, **settings)
        hit = units.get(key)
        if hit is not None and not accepted_a_cut_reply(hit.payload, "hypothesis", field_name):
            found[draw] = (hit.payload, False)
        else:
            todo.append((draw, key, draw_sampling, draw_seed))
    # a cut reply is asked again with a larger budget, then recorded as cut off (cut_off.py)
    asked = ask_json_batch(mllm, repair, [JsonAsk(messages, s_seed, s) for _, _, s, s_seed in todo], field_name,
                           max_new_tokens)
    for (draw, key, draw_sampling, draw_seed), outcome in zip(todo, asked):
        if isinstance(outcome, BaseException):  # recorded on this candidate, not cached
            found[draw] = ({"hypothesis": None, "error": f"The MLLM failed: {error_text(outcome)}",
                            "raw_reply": None}, True)
            continue
        temperature = draw_sampling.temperature if draw_sampling is not None else 0.0
        settings = {"sampling": draw_sampling.as_dict()} if draw_sampling is not None else {}
        payload = {"hypothesis": outcome.pop("value"), "draw": draw, "temperature": temperature, "seed": draw_seed,
                   **settings, "prompt_version": prompt.version, **outcome}
        units.put(key, "hypothesis", payload)
        found[draw] = (payload, False)
    return found


def with_validation(config: BaselineConfig | None, cls: type, validated_name: bool) -> BaselineConfig:
    """`<method>-validated` always validates; `<method>` validates only if its config says so (so that
    `{"validate": true}` in a benchmark's method options works too)."""
    from dataclasses import replace

    if config is not None and not isinstance(config, cls):
        raise ConfigError(f"Expected a {cls.__name__}, got a {type(config).__name__}.")
    config = config or cls()
    return replace(config, validate=True) if validated_name and not config.validate else config


# -- the shared pipeline ---------------------------------------------------------------------------------------
@dataclass
class Proposal:
    """What a baseline's own stage produced."""

    candidates: list[Candidate]
    transient: bool = False  # a model raised: the result is incomplete and a re-run retries
    observations: list[Observation] | None = None
    evidence: dict[str, str] | None = None  # label -> artifact name
    artifacts: dict[str, Any] | None = None  # artifact name -> PIL image / numpy array (stored with the result)
    details: dict[str, Any] | None = None  # method-specific record for the manifest (ranking, Grad-CAM, ...)
    notes: list[str] | None = None


class BaselinePipeline:
    """One baseline with its components injected; `__call__(image, true_label, ctx)` -> ExplanationResult.

    Subclasses set METHOD and implement `_propose` (and `_identity` / `_prompt_versions` for cache keys); one that
    asks the MLLM for its hypotheses names its prompt in PROMPT (loaded as `self.prompt`, with the JSON repair
    prompt as `self.repair`, both versions part of the key). The
    classes are the registry's factories: `<method>` is the class, `<method>-validated` a subclass with
    VALIDATED = True.
    """

    METHOD = ""
    CONFIG: type[BaselineConfig] = BaselineConfig  # the method's settings class
    VALIDATED = False  # the `<method>-validated` registry entry is a subclass with True
    PROMPT = ""  # the hypothesis prompt's name (prompts.load_prompt), for methods that ask the MLLM

    def __init__(self, classifier: Any, mllm: Any = None, editor: Any = None, store: Any = None,
                 reference: Any = None, config: BaselineConfig | None = None,
                 intervention_prompts: InterventionPrompts | None = None) -> None:
        self.classifier = classifier
        self.mllm = mllm
        self.editor = editor
        self.store = store
        self.reference = reference
        self.config = with_validation(config, self.CONFIG, self.VALIDATED)
        self.intervention_prompts = intervention_prompts or InterventionPrompts.load()
        if self.PROMPT:
            self.prompt = load_prompt(self.PROMPT)
            self.repair = self.intervention_prompts.repair
        self.last_artifacts: dict[str, Any] = {}

    # -- subclass hooks ------------------------------------------------------------------------------------
    def _propose(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str, file_sha: str | None,
                 clf: dict, sample: Any, n: int) -> Proposal:
        raise NotImplementedError

    def uses_query_embedding(self) -> bool:
        """True when the method retrieves with the query's embedding (its classification then stores it)."""
        return False

    def _identity(self) -> dict[str, Any]:
        """Extra parts of the explanation's cache key (embedder, corpus, reference index...)."""
        return {}

    def _prompt_versions(self) -> dict[str, str]:
        return {self.PROMPT: self.prompt.version, "repair": self.repair.version} if self.PROMPT else {}

    def _models_manifest(self) -> dict[str, Any]:
        return {}

    # -- identity ------------------------------------------------------------------------------------------
    @property
    def spec(self):
        """This method's registry entry (its declared inputs and version)."""
        from ..registry.methods import get_method

        return get_method(self.method_name)

    @property
    def method_name(self) -> str:
        return self.METHOD + (VALIDATED_SUFFIX if self.config.validate else "")

    def _tester(self) -> CounterfactualTester:
        return CounterfactualTester(self.classifier, self.mllm, self.editor, prompts=self.intervention_prompts,
                                    settings=InterventionSettings.from_config(self.config))

    # -- the call ------------------------------------------------------------------------------------------
    def __call__(self, image: Any, true_label: int | str, ctx: JobContext | None = None) -> ExplanationResult:
        ctx = ctx or null_context()
        cfg = self.config
        tester = self._tester()
        testing = cfg.validate or (cfg.score and tester.can_test)
        if cfg.validate and not tester.can_test:
            raise ConfigError(f"{self.method_name} tests its candidates by counterfactual intervention, but "
                              f"{tester.why_not()}.",
                              hint="Give an MLLM and an image editor (--mllm, --editor), or use a zero-shot "
                                   "classifier, whose candidates are tested by rewriting its prompt.")
        spec = self.spec  # inputs are declared once, in the registry entry
        if spec.inputs.mllm == "required" and self.mllm is None:
            raise ConfigError(f"{self.METHOD} needs a multimodal LLM.", hint="Give one with --mllm.")
        if spec.inputs.reference == "required":
            check_reference(self.reference, self.classifier)
        t_start = time.perf_counter()
        timings: dict[str, float] = {}
        notes: list[str] = []
        units = UnitCache(self.store)
        self.last_artifacts = {}

        img, image_path, file_sha = load_input(image)
        image_sha = image_hash(img)
        y = resolve_label(true_label, list(self.classifier.class_names))
        clf = classifier_part(self.classifier)
        key = unit_key("explanation", method=self.method_name, image_sha256=image_sha, true_index=y,
                       classifier=clf, mllm=model_part(getattr(self.mllm, "info", None)),
                       editor=model_part(self.editor.info) if testing and not tester.zero_shot else None,
                       testing=testing, config=cfg.as_dict(),
                       prompts={**self._prompt_versions(),
                                **(self.intervention_prompts.versions() if testing else {})},
                       version=spec.version, **self._identity())
        stored = stored_result(units, key, ctx)
        if stored is not None:
            return stored

        t = time.perf_counter()
        self.last_artifacts["input"] = img
        sample = classify_query(ctx, tester, units, img, image_sha, clf, y, image_path, self.METHOD,
                                with_embedding=self.uses_query_embedding())
        timings["classify"] = time.perf_counter() - t

        t = time.perf_counter()
        proposal = self._propose(ctx, units, img, image_sha, file_sha, clf, sample, cfg.n_candidates)
        timings["propose"] = time.perf_counter() - t
        candidates = proposal.candidates
        transient = proposal.transient
        notes.extend(proposal.notes or [])
        self.last_artifacts.update(proposal.artifacts or {})
        if proposal.observations:
            ctx.partial({"kind": "observations", "observations": proposal.observations})
        if proposal.evidence:
            images = {n: a for n, a in (proposal.artifacts or {}).items() if isinstance(a, Image.Image)}
            ctx.partial({"kind": "evidence", "evidence": dict(proposal.evidence), "images": images})

        proposed = [c.error is None and bool(c.hypothesis) for c in candidates]  # before the test adds errors
        if testing:
            _, test_transient = tester.test(ctx, units, img, image_sha, clf, sample, candidates, timings,
                                                 self.last_artifacts)
            transient |= test_transient
        elif cfg.score:
            notes.append(f"The explanation was not scored with CEI: {tester.why_not()}.")

        if cfg.validate:
            best = select_by_cei(candidates, notes, selection=cfg.selection, flag_threshold=cfg.edit_flag_threshold,
                                 noise_floor=cfg.cei_noise_floor)
            note = candidate_note(candidate_counts(candidates))
            if note:
                notes.append(note)
        else:  # the explanation is the method's own answer, whether or not the test of it worked
            best = 0 if proposed and proposed[0] else None
            if best is None:
                notes.append("The method produced no usable explanation; see the candidate's error.")
            elif testing and candidates[0].cei is None:
                notes.append(f"The explanation could not be scored with CEI: {candidates[0].error}")
            elif testing:  # flag (never replace) the method's own answer
                select([candidates[0]], "cei", cfg.edit_flag_threshold, notes, "explanation")
        if transient:
            notes.append(INCOMPLETE_NOTE)
        timings["total"] = time.perf_counter() - t_start
        chosen = candidates[best] if best is not None else None
        result = ExplanationResult(
            method=self.method_name, sample=sample, explanation=chosen.hypothesis if chosen else None,
            selected_index=best, cei=chosen.cei if chosen else None, candidates=candidates,
            observations=proposal.observations or [], evidence=dict(proposal.evidence or {}), timings=timings,
            notes=notes, manifest=self._manifest(candidates, image_path, file_sha, units, not transient, testing,
                                                 tester, proposal.details,
                                                 tester.edit_record(img) if testing else None, best))
        if units.store is not None:
            result.result_key = key
            units.store.put(key, "explanation", result.to_dict(), dict(self.last_artifacts))
        return result

    def _manifest(self, candidates: list[Candidate], image_path: Path | None, file_sha: str | None,
                  units: UnitCache, complete: bool,
                  testing: bool, tester: CounterfactualTester, details: dict | None,
                  edit: dict[str, Any] | None = None, best: int | None = None) -> dict[str, Any]:
        cfg = self.config
        return {
            "method": self.method_name,
            "base_method": self.METHOD,
            "validated": cfg.validate,
            "version": self.spec.version,
            "app_version": __version__,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "complete": complete,
            "models": {"classifier": model_manifest(self.classifier.info),
                       "mllm": model_manifest(getattr(self.mllm, "info", None)),
                       "editor": model_manifest(self.editor.info) if self.editor is not None else None,
                       **self._models_manifest()},
            "zero_shot": tester.zero_shot,
            "intervention": tester.kind if testing else None,
            "edit": edit,  # working size of the edits (None when no image was edited)
            "prompts": {**self._prompt_versions(), **(self.intervention_prompts.versions() if testing else {})},
            "config": cfg.as_dict(),
            "seeds": {"candidate_draws": f"draw 0 greedy; draw d>=1 seed {cfg.seed}*1000+d", "edit": cfg.seed},
            "sampling": {"draw_0": "greedy", "draws_1_on": cfg.sampling.as_dict()},
            "candidate_counts": candidate_counts(candidates),
            "cut_off_replies": CUT_OFF_RECORD,
            "edit_check": edit_check_record(candidates, cfg.edit_flag_threshold, cfg.selection,
                                            cfg.cei_noise_floor, best),
            "reference": reference_part(self.reference),
            **run_record(image_path, file_sha, units),
            "details": jsonable(details or {}),
        }
