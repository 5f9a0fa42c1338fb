"""SciTX (NEMO paper §3.2, Algorithm 1): explain one misclassified image with a tested hypothesis.

    pipe = SciTXPipeline(classifier, mllm, editor, store=store, reference=index, config=SciTXConfig(k=3, m=3))
    result = pipe(image_path_or_pil, true_label, ctx)      # -> ExplanationResult

Stages (the `stage` names reported through the JobContext; `done/total` count the units of each stage):
"Classifying", "Retrieving observations", "Captioning observations" (i/n), "Generating hypotheses" (i/M),
"Writing interventions" (i/M), "Editing image i/M" (done/total = diffusion steps; "Editing images i-j/M"
with edit_batch_size > 1), "Scoring" (i/M), "Reference control i/R of hypothesis j" (the evidence rule's control,
edit_control.py: only for candidates it reaches), "Semantic check of hypothesis j" (`edit_semantic_check` only,
edit_semantic.py: likewise).
Cancellation is checked before every unit of work and between diffusion steps. A re-run answered from
the stored result reports only "Loaded from the results store". Partial results (`ctx.partial`) are dicts:
{"kind": "sample", "sample": SampleInfo}, {"kind": "observations", "observations": [...]} and
{"kind": "candidate", "index": j, "candidate": Candidate} (once generated, again once scored).

1. Survey: classify the image, retrieve correctly classified references of the true class (Set A), of the
   predicted class (Set B) and random ones (Set C) from the reference index, caption each (appendix A of
   the paper does not print the caption prompt; ours is resources/prompts/scitx_caption.v1.txt).
2. Hypothesis: the image plus the A.1 prompt with the captions -> JSON {"cause_of_error": ...}.
3. Experiment: the MLLM, without the image or the captions (text only), gets the A.3 prompt filled with the
   hypothesis AND the true and predicted class names (A.3 names both, and tells the model not to imply the
   predicted one), and writes an edit instruction that the editor applies at its working resolution
   (ordinary classifiers; `edit_size`, see intervention.py), or a rewritten zero-shot prompt that replaces
   the TRUE class's prompt only (zero-shot classifiers; A.3 then also carries the original prompt).
   CEI = 100 × (P(y | s_e) − P(y | s_o)).
4. Conclusion: the candidate with the largest CEI among those whose edit tests its hypothesis (edit_check.py,
   the default "evidence" rule) is the explanation. The test of an edit: the reference control
   (edit_control.py; `edit_control_references` correct references of other classes get the same edit,
   lazily, from the largest CEI down, until one passes; read in points and in log-odds, `edit_control_rule`)
   and, where it does not run, the structure measure; with `edit_semantic_check` (off by default) the MLLM then
   looks at the original and the edited image of an edit those accept and can veto it (edit_semantic.py).

How many observations (the paper gives no numbers; each choice below is a setting, recorded in the cache
keys and the manifest)
------------------------------------------------------------------------------------------------------------
- `k` is PER SET: k references of the true class (Set A) plus k of the predicted class (Set B), so 2k
  class-relevant observations. `k_scope="pooled"` takes the other reading of Algorithm 1's
  `Retrieve(x, D_filtered, K)`: the K = k nearest references of the two classes together, each shown in the
  set of its own label (so Sets A and B may be uneven, one may be empty).
- Set C: Algorithm 1 retrieves from the true and predicted classes only (D_filtered), while the A.1 prompt
  has a "Set C (Random Examples)" heading. `k_random` is the number of random correctly classified
  references of other classes shown there; None (the default, today's behaviour) = k; 0 = Algorithm 1
  literally (the prompt's Set C then reads "(no examples available)", which its "If a set is missing" step
  covers).
- The Table 5 ablation (`class_relevance=False`) varies only the class filter: the same number of nearest
  neighbours (2k per set, k pooled) are taken from correct references of ANY class, and Set C is drawn as
  above. Neighbours of the true / predicted class go under Set A / Set B (their labels make that true); those
  of other classes go under their own heading "Set S (Similar Examples of Other Classes)", each with its
  label (resources/prompts/scitx_hypothesis_similarity.v1.txt: the A.1 text plus that one block), never
  under "Random Examples".

The draws of stage 2 and the counterfactual test of stage 3 are shared code (`validation.draw_hypotheses`,
`intervention.CounterfactualTester`): the validation-augmented baselines (Table 2) use exactly the same.

How the M distinct candidates are obtained
------------------------------------------
The A.1 prompt asks for ONE JSON object, and the paper decodes at temperature 0, which yields one
hypothesis. We keep the prompt verbatim and draw M times: draw 0 is greedy (temperature 0, exactly the
paper's decoding, so candidate 1 is the paper's hypothesis), and draw d >= 1 samples with seed
`seed * 1000 + d` and explicit sampling settings (`sampling_temperature` 0.7, `sampling_top_p` 0.95,
`sampling_top_k` 0 = off, `sampling_min_p` 0 = off: this project's values, the paper gives none). All four are
set on every sampled call, overriding the checkpoint's generation_config: Qwen2/2.5-VL-Instruct ship
top_k=1, top_p=0.001, which would make every "sampled" draw the greedy one. They are in each draw's cache key
and in the manifest ("sampling"), and the manifest's "candidate_counts" says how many distinct candidates
were scored (a note says why, when fewer than M). A draw whose hypothesis repeats an
earlier one (same words, ignoring case and punctuation) is replaced by the next draw, at most
`max_extra_draws` times per sample; a duplicate left after that is kept as a candidate with an error.
Why not one prompt asking for a list of M: it changes the paper's prompt and output format, the M items
share one context so a bad reply loses all of them, and a long list degrades small models' JSON. Seeded
draws keep each candidate independently parseable, retryable and cacheable, and stay reproducible.

Parsing: robust JSON extraction (`parsing.extract_field`). A reply cut short at the token limit is asked
again ONCE with twice the budget, and if cut again the candidate is "Reply cut off", not tested, and counted
in the manifest's "candidate_counts" and the notes (cut_off.py). If a reply cannot be read otherwise, ONE
follow-up turn with resources/prompts/json_repair.v1.txt (temperature 0), then the candidate
records the error and keeps the raw replies. Such parse outcomes are deterministic and cached; exceptions
raised by a model (out of memory, endpoint down) are recorded on the candidate but not cached, and the result
is then marked incomplete so that a re-run retries exactly those units.

Caching: every unit (classification, embedding, retrieval, caption, hypothesis draw, intervention, edit,
re-classification) is stored in the results store under a `result_key` of everything that determines it
(content hashes, model ids and revisions, rendered-prompt hash and prompt version, seed, parameters), and
reused. The final ExplanationResult is stored too (kind "explanation"); a re-run of a complete diagnosis
is answered from it without loading pixels into any model. Units are written atomically one by one, so a
cancelled run leaves only whole units behind and the next run resumes from them.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from PIL import Image

from ... import __version__
from ..base.errors import ConfigError, JobCancelled, NemoError
from ..base.job_context import JobContext, null_context
from ..models.protocols import ChatMessage
from ..models.sampling import DEFAULT_MIN_P, DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P, Sampling
from .edit_check import (DEFAULT_FLAG_THRESHOLD, DEFAULT_NOISE_FLOOR, DEFAULT_SELECTION, check_edit_check,
                         edit_check_record)
from .edit_semantic import OFF_RECORD as SEMANTIC_OFF, PROMPT_NAME as SEMANTIC_PROMPT, SemanticCheck
from .edit_control import CONTROL_RULES, DEFAULT_CONTROL_REFERENCES, DEFAULT_CONTROL_RULE, ReferenceControl, \
    check_control_rule
from .intervention import (CounterfactualTester, InterventionPrompts, InterventionSettings, UnitCache,
                           check_edit_resolution, classifier_part, error_text, image_hash, jsonable, load_input,
                           model_manifest, model_part, sha_text, unit_key)
from .labels import resolve_label
from .pipeline_steps import INCOMPLETE_NOTE, classify_query, run_record, select_by_cei, stored_result
from .prompts import PromptTemplate, load_prompt
from .reference import check_reference, embed_query, load_reference_image, reference_part
from ..registry import Inputs
from ..registry.methods import method_entry
from ..base.records import Candidate, ExplanationResult, Observation, SampleInfo
from .cut_off import CUT_OFF_RECORD
from .validation import SHARED_FIELD_INFO, candidate_counts, candidate_note, draw_hypotheses, sampling_of


VERSION = "2"  # bump when this method's results change for the same inputs (part of every key)
# 2: no selection within the noise floor; verdicts with their reason; photo structure readings (issue 45)
METHOD = "scitx"
EMPTY_SET = "  - (no examples available)"
K_SCOPES = ("per-set", "pooled")


@dataclass
class SciTXConfig:
    # Labels, help and ranges for the CLI options and the settings form (core/registry/params.py).
    FIELD_INFO: ClassVar[dict[str, dict]] = {
        "k": {"label": "Observations per set", "min": 0, "max": 50,
              "help": "correct reference images retrieved per set (k of the true class + k of the predicted class)"},
        "m": {"label": "Hypotheses (M)", "min": 1, "max": 20, "help": "candidate hypotheses tested by intervention"},
        "seed": {"label": "Seed", "help": "seed of candidate sampling, retrieval and edits"},
        "class_relevance": {"label": "Class relevance", "help": "retrieve within the true and predicted classes; "
                                                                "off = the paper's Table 5 ablation"},
        "edit_steps": {"label": "Edit steps", "min": 1, "max": 200, "help": "diffusion steps of the editor"},
        "edit_guidance": {"label": "Edit guidance", "min": 0.0, "max": 50.0, "help": "guidance scale of the editor"},
        "edit_size": {"label": "Edit size", "help": "edit at this size (width x height)"},
        "caption_max_new_tokens": {"label": "Caption tokens", "min": 1, "help": "cap on each caption reply"},
        "hypothesis_max_new_tokens": {"label": "Hypothesis tokens", "min": 1, "help": "cap on each hypothesis reply"},
        "intervention_max_new_tokens": {"label": "Intervention tokens", "min": 1,
                                        "help": "cap on each edit-instruction / prompt-rewrite reply"},
        "sampling_temperature": {"label": "Sampling temperature", "min": 0.0, "max": 2.0,
                                 "help": "temperature of hypothesis draws 2..M (draw 1 is greedy)"},
        "max_extra_draws": {"label": "Extra draws", "min": 0, "max": 20,
                            "help": "extra hypothesis draws allowed to replace duplicates"},
        "thumbnail_side": {"label": "Thumbnail side", "min": 8, "max": 1024,
                           "help": "pixels of the observation thumbnails kept with the result"},
        "caption_batch_size": {"label": "Caption batch", "min": 0, "max": 64,
                               "help": "observations captioned per MLLM call (0 = all of a sample's at once; "
                                       "1 = one call each, the old results; on a GPU batched replies may "
                                       "differ in the last digits)"},
        "edit_batch_size": {"label": "Edit batch", "min": 0, "max": 16,
                            "help": "edits run together in one editor call (0 = as many as free GPU memory "
                                    "allows; 1 = one call each, the old results)"},
        "edit_control_references": {"label": "Reference control", "min": 0, "max": 10,
                                    "help": "apply each selectable edit to this many correct references of "
                                            "other classes; an edit that raises the true class there as on "
                                            "the image does not test its hypothesis (0 = off: the structure "
                                            "test alone decides)"},
        "edit_control_rule": {"label": "Reference control rule", "choices": list(CONTROL_RULES),
                              "help": "how the control is read: points+reference-log-odds (default: the rise "
                                      "of P(true) in points, and no reference's log-odds beyond 3.5 nats; a "
                                      "drawing of the true class raises a confident reference's log-odds while "
                                      "barely moving its points), points+log-odds (the earlier default, relative "
                                      "to this image's rise) or points alone"},
        "edit_semantic_check": {"label": "Semantic check of edits",
                                "help": "with the evidence rule, the MLLM compares the original and the edited "
                                        "image of each edit the other tests accept, and vetoes one that paints the "
                                        "true class in, replaces the object, destroys the picture or leaves the "
                                        "hypothesis' cue unchanged (one MLLM call per checked hypothesis; needs an "
                                        "MLLM that sees images)"},
        "batch_requests": {"label": "Batch MLLM requests",
                           "help": "send a sample's M hypothesis draws, and its M interventions, to the MLLM "
                                   "at once (off = one call each, the old results)"},
        **SHARED_FIELD_INFO,
    }

    # K per set: k of the true class (Set A) + k of the predicted class (Set B); see "How many observations".
    k: int = 3
    m: int = 3  # hypothesis candidates
    seed: int = 0
    class_relevance: bool = True  # False = the Table 5 ablation (similarity + correctness only)
    k_random: int | None = None  # random Set C observations; None = k (the A.1 prompt's Set C), 0 = Algorithm 1
    k_scope: str = "per-set"  # "per-set" (k of each class) | "pooled" (the k nearest of both classes together)
    edit_steps: int | None = None  # None = the editor's default
    edit_guidance: float | None = None
    edit_size: tuple[int, int] | None = None  # (width, height); None = see edit_resolution
    edit_resolution: str = "preferred"  # "preferred": the editor's working resolution; "native": the image's size
    caption_max_new_tokens: int = 160
    hypothesis_max_new_tokens: int = 512
    intervention_max_new_tokens: int = 256
    # Hypothesis draws 2..M (draw 1 is greedy): every sampling field is explicit, so that a checkpoint's
    # generation_config (Qwen2.5-VL: top_k=1) cannot make them greedy. This project's values: models/sampling.py.
    sampling_temperature: float = DEFAULT_TEMPERATURE
    sampling_top_p: float = DEFAULT_TOP_P
    sampling_top_k: int = DEFAULT_TOP_K  # 0 = off
    sampling_min_p: float = DEFAULT_MIN_P  # 0 = off
    max_extra_draws: int = 3  # extra hypothesis draws allowed to replace duplicates
    thumbnail_side: int = 192  # observation thumbnails kept with the result
    # Counterfactuals that changed the whole image are flagged and, by default, not selected (edit_check.py).
    edit_flag_threshold: float = DEFAULT_FLAG_THRESHOLD
    selection: str = DEFAULT_SELECTION  # "evidence" | "prefer-unflagged" | "cei" (the paper's plain argmax)
    cei_noise_floor: float = DEFAULT_NOISE_FLOOR  # points; see edit_check.py
    # The same edit on this many references of other classes (edit_control.py); 0 = off (structure only).
    edit_control_references: int = DEFAULT_CONTROL_REFERENCES
    edit_control_rule: str = DEFAULT_CONTROL_RULE  # edit_control.CONTROL_RULES
    # The MLLM's look at each edit the other tests accept (edit_semantic.py); off = the keys results had before.
    edit_semantic_check: bool = False
    # Speed settings (scitx_stages.py counts the calls, gpu_figures.sh times them). Every stage sends its work at
    # once by default: all captions of a sample in one call (0), the M hypothesis draws and the M interventions
    # each in one call (batch_requests), the edits of one image as many per call as free memory allows (0).
    # Batched numerics on a GPU can differ in the last digits from one call each, so any value other than the
    # old one (1, 1, False) is part of the result's key; the old values leave the keys exactly as before.
    caption_batch_size: int = 0
    edit_batch_size: int = 0
    batch_requests: bool = True

    def __post_init__(self) -> None:
        if self.k < 0 or self.m < 1:
            raise ConfigError(f"SciTX needs k >= 0 and m >= 1 (got k={self.k}, m={self.m}).")
        _ = self.sampling  # validates the sampling settings
        if self.k_random is not None and self.k_random < 0:
            raise ConfigError(f"SciTX needs k_random >= 0 (got {self.k_random}).",
                              hint="0 shows no random observations (Algorithm 1); leave it unset for k.")
        if self.k_scope not in K_SCOPES:
            raise ConfigError(f"Unknown k_scope '{self.k_scope}'.", hint=f"Use one of: {', '.join(K_SCOPES)}.")
        if self.edit_size is not None:
            self.edit_size = (int(self.edit_size[0]), int(self.edit_size[1]))
        check_edit_resolution(self.edit_resolution)
        check_edit_check(self.edit_flag_threshold, self.selection, self.cei_noise_floor)
        if self.edit_control_references < 0:
            raise ConfigError(f"SciTX's reference control needs 0 or more references (got "
                              f"{self.edit_control_references}).", hint="0 turns the control off.")
        check_control_rule(self.edit_control_rule)
        if self.caption_batch_size < 0 or self.edit_batch_size < 0:
            raise ConfigError("SciTX's caption and edit batch sizes must be 0 (automatic) or more.",
                              hint="0 = all captions at once / as many edits as fit in memory; 1 = one at a time.")

    @property
    def random_count(self) -> int:
        """Set C's size: `k_random`, or k when it is unset (the A.1 prompt's reading, the default)."""
        return self.k if self.k_random is None else int(self.k_random)

    @property
    def sampling(self) -> Sampling:
        return sampling_of(self)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["edit_size"] = list(self.edit_size) if self.edit_size else None
        for speed, old in (("caption_batch_size", 1), ("edit_batch_size", 1), ("batch_requests", False),
                           ("edit_control_references", 0), ("edit_semantic_check", False)):
            if d[speed] == old:  # the old value: the keys results had before these settings existed
                del d[speed]
        if d["edit_control_rule"] == "points" or "edit_control_references" not in d:
            del d["edit_control_rule"]  # the rule results had before it existed, or no control to read
        if self.selection != "evidence":  # the control and the semantic check serve the evidence rule only
            for unused in ("edit_control_references", "edit_control_rule", "edit_semantic_check"):
                d.pop(unused, None)
        return d


@dataclass
class _Prompts:
    caption: PromptTemplate
    hypothesis: PromptTemplate
    edit: PromptTemplate
    rewrite: PromptTemplate
    repair: PromptTemplate
    hypothesis_similarity: PromptTemplate  # the Table 5 ablation's A.1 (see "How many observations")

    def versions(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name).version for f in fields(self)}


def load_scitx_prompts() -> _Prompts:
    return _Prompts(load_prompt("scitx_caption"), load_prompt("scitx_hypothesis"),
                    load_prompt("scitx_edit_instruction"), load_prompt("scitx_prompt_rewrite"),
                    load_prompt("json_repair"), load_prompt("scitx_hypothesis_similarity"))


@method_entry(METHOD, config=SciTXConfig, version=VERSION,
                 inputs=Inputs(mllm="required", editor="interventions", reference="optional"),
                 description="SciTX: retrieve observations, hypothesise, test each hypothesis by "
                             "counterfactual intervention, keep the one with the largest CEI.")
class SciTXPipeline:
    """SciTX with its components injected (diffusers style): one `__call__` explains one image."""

    def __init__(self, classifier: Any, mllm: Any, editor: Any = None, store: Any = None,
                 reference: Any = None, config: SciTXConfig | None = None,
                 prompts: _Prompts | None = None) -> None:
        self.classifier = classifier
        self.mllm = mllm
        self.editor = editor
        self.store = store
        self.reference = reference
        self.config = config or SciTXConfig()
        self.prompts = prompts or load_scitx_prompts()
        # Artifact name -> image of the last call (for callers without a store).
        self.last_artifacts: dict[str, Image.Image] = {}

    # ------------------------------------------------------------------------------------------- identity
    @property
    def zero_shot(self) -> bool:
        return bool(getattr(self.classifier, "zero_shot", False))

    def _tester(self) -> CounterfactualTester:
        """The counterfactual test (intervention.py), shared with the validation-augmented baselines."""
        p = self.prompts
        return CounterfactualTester(self.classifier, self.mllm, self.editor,
                                    prompts=InterventionPrompts(p.edit, p.rewrite, p.repair),
                                    settings=InterventionSettings.from_config(self.config))

    # ------------------------------------------------------------------------------------------- the call
    def __call__(self, image: str | os.PathLike | Image.Image, true_label: int | str,
                 ctx: JobContext | None = None) -> ExplanationResult:
        ctx = ctx or null_context()
        cfg = self.config
        if not self.zero_shot and self.editor is None:
            raise ConfigError("SciTX needs an image editor to test hypotheses for this classifier.",
                              hint="Choose an editor (e.g. --editor), or use a zero-shot classifier, whose "
                                   "hypotheses are tested by rewriting its prompt instead.")
        check_reference(self.reference, self.classifier)
        t_start = time.perf_counter()
        timings: dict[str, float] = {}
        notes: list[str] = []
        units = UnitCache(self.store)
        tester = self._tester()
        self.last_artifacts = {}
        transient = False  # a model raised: the result is incomplete, a re-run retries those units

        img, image_path, file_sha = load_input(image)
        image_sha = image_hash(img)
        y = resolve_label(true_label, list(self.classifier.class_names))
        clf = classifier_part(self.classifier)
        explanation_key = unit_key("explanation", method=METHOD, image_sha256=image_sha, true_index=y,
                                   classifier=clf, mllm=model_part(self.mllm.info),
                                   editor=None if self.zero_shot else model_part(self.editor.info),
                                   reference=reference_part(self.reference), config=cfg.as_dict(),
                                   prompts=self._prompt_versions(), version=VERSION)
        stored = stored_result(units, explanation_key, ctx)
        if stored is not None:
            return stored

        # -- 1. classify ----------------------------------------------------------------------------
        t = time.perf_counter()
        self.last_artifacts["input"] = img
        sample = classify_query(ctx, tester, units, img, image_sha, clf, y, image_path, "SciTX",
                                with_embedding=self.reference is not None)
        timings["classify"] = time.perf_counter() - t

        # -- 2. survey ------------------------------------------------------------------------------
        t = time.perf_counter()
        observations, retrieval_notes = self._retrieve(ctx, units, img, image_sha, file_sha, clf, y,
                                                       sample.pred_index)
        notes.extend(retrieval_notes)
        timings["retrieve"] = time.perf_counter() - t
        t = time.perf_counter()
        thumbs, caption_transient = self._caption_all(ctx, units, observations, notes)
        transient |= caption_transient
        self.last_artifacts.update(thumbs)
        ctx.partial({"kind": "observations", "observations": observations})
        timings["caption"] = time.perf_counter() - t

        # -- 3. hypotheses --------------------------------------------------------------------------
        t = time.perf_counter()
        candidates, hyp_transient = self._hypothesise(ctx, units, img, image_sha, sample, observations)
        transient |= hyp_transient
        timings["hypothesis"] = time.perf_counter() - t

        # -- 4. interventions, edits, scores (timings "intervention", "edit", "score") ---------------
        edited, test_transient = tester.test(ctx, units, img, image_sha, clf, sample, candidates, timings,
                                             self.last_artifacts)
        transient |= test_transient

        # -- 5. conclusion (with the reference control of the edits, edit_control.py) ------------------
        t = time.perf_counter()
        control = self._control(ctx, units, tester, clf, sample, file_sha)
        semantic = self._semantic(ctx, units, img, image_sha, edited, sample) if control is not None else None
        best = select_by_cei(candidates, notes, noun="hypothesis", selection=cfg.selection,
                             flag_threshold=cfg.edit_flag_threshold, noise_floor=cfg.cei_noise_floor,
                             control=control, semantic=semantic)
        if control is not None:
            notes.extend(control.notes)
            transient |= control.transient
            timings["control"] = time.perf_counter() - t
        if semantic is not None:
            notes.extend(semantic.notes)
            transient |= semantic.transient
        counts = candidate_counts(candidates)
        note = candidate_note(counts)
        if note:
            notes.append(note)
        if transient:
            notes.append(INCOMPLETE_NOTE)
        timings["total"] = time.perf_counter() - t_start
        check = edit_check_record(candidates, cfg.edit_flag_threshold, cfg.selection, cfg.cei_noise_floor, best,
                                  control.record() if control is not None else None)
        if control is not None:  # the semantic check applies where the control does (image edits, evidence rule)
            check["semantic"] = semantic.record(candidates) if semantic is not None else dict(SEMANTIC_OFF)
        result = ExplanationResult(
            method=METHOD, sample=sample,
            explanation=candidates[best].hypothesis if best is not None else None,
            selected_index=best, cei=candidates[best].cei if best is not None else None,
            candidates=candidates, observations=observations, timings=timings, notes=notes,
            manifest=self._manifest(cfg, image_path, file_sha, units, not transient, counts,
                                    tester.edit_record(img), check))
        self._store_result(units, explanation_key, result, img, edited)
        return result

    def _control(self, ctx: JobContext, units: UnitCache, tester: CounterfactualTester, clf: dict,
                 sample: SampleInfo, file_sha: str | None) -> ReferenceControl | None:
        """The reference control for the evidence rule (image edits only): `edit_control_references` random
        correct references of classes other than the true and predicted ones (a Set C of their own, drawn with
        the run's seed; edit_control.py says why not Set B)."""
        cfg = self.config
        if self.zero_shot or cfg.selection != "evidence":
            return None
        refs: list[Observation] = []
        why = None if self.reference is not None else "no reference index was given"
        if self.reference is not None and cfg.edit_control_references > 0:
            from ..data.retrieval import retrieve_observations

            query = embed_query(units, self.classifier, self.last_artifacts["input"], sample.image_sha256, clf)
            refs = list(retrieve_observations(self.reference, query, sample.true_index, sample.pred_index,
                                              k_true=0, k_pred=0, k_random=cfg.edit_control_references,
                                              seed=cfg.seed, query_sha256=file_sha or sample.image_sha256))
        return ReferenceControl(ctx, units, tester, clf, sample, refs, cfg.edit_control_references,
                                lambda obs: load_reference_image(self.reference, obs), cfg.cei_noise_floor,
                                why_off=why, rule=cfg.edit_control_rule)

    def _semantic(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str,
                  edited: dict[int, Image.Image], sample: SampleInfo) -> SemanticCheck | None:
        """The MLLM's semantic check of the edits (edit_semantic.py), when `edit_semantic_check` is on."""
        if not self.config.edit_semantic_check:
            return None
        return SemanticCheck(ctx, units, self.mllm, self.prompts.repair, img, image_sha, edited, sample)

    def _prompt_versions(self) -> dict[str, str]:
        """The prompts' versions (key, manifest); the semantic check's only when it is on, so keys stay as before."""
        versions = self.prompts.versions()
        if self.config.edit_semantic_check and not self.zero_shot:
            versions[SEMANTIC_PROMPT] = load_prompt(SEMANTIC_PROMPT).version
        return versions

    # --------------------------------------------------------------------------------------- stage 2
    def _retrieve(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str, file_sha: str | None,
                  clf: dict, y: int, pred: int) -> tuple[list[Observation], list[str]]:
        cfg = self.config
        k_random = cfg.random_count
        if self.reference is None or (cfg.k == 0 and k_random == 0):
            why = "no reference index was given" if self.reference is None else "k = 0 and k_random = 0"
            return [], [f"No observations were retrieved ({why}); hypotheses rest on the image alone."]
        ctx.check_cancelled()
        ctx.progress("Retrieving observations", 0, 1)
        pooled = cfg.k_scope == "pooled"
        # Per set: k of y + k of ŷ. Pooled: the k nearest of y and ŷ together (retrieval takes k_true + k_pred).
        k_true, k_pred = (cfg.k, 0) if pooled else (cfg.k, cfg.k)
        key = unit_key("retrieval", image_sha256=image_sha, exclude_sha256=file_sha, classifier=clf,
                       reference=reference_part(self.reference), true_index=y, pred_index=pred, k=cfg.k,
                       k_random=k_random, k_scope=cfg.k_scope, seed=cfg.seed, class_relevance=cfg.class_relevance)
        hit = units.get(key)
        if hit is not None:
            obs = [Observation(**o) for o in hit.payload["observations"]]
            notes = list(hit.payload["notes"])
        else:
            from ..data.retrieval import retrieve_observations

            query = embed_query(units, self.classifier, img, image_sha, clf)
            ctx.check_cancelled()
            # The index hashes files, so the query is excluded by its file's hash; a PIL input has no file,
            # and its pixel hash still seeds the random set per query.
            found = retrieve_observations(self.reference, query, y, pred, k_true=k_true, k_pred=k_pred,
                                          k_random=k_random, pooled=pooled, seed=cfg.seed,
                                          class_relevance=cfg.class_relevance,
                                          query_sha256=file_sha or image_sha)
            obs = list(found.observations)
            notes = [f"Retrieval: {n}." for n in found.notes]
            units.put(key, "retrieval", {"observations": [asdict(o) for o in obs], "notes": notes,
                                         "params": jsonable(getattr(found, "params", {}))})
        ctx.progress("Retrieving observations", 1, 1)
        return obs, notes

    def _caption_all(self, ctx: JobContext, units: UnitCache, observations: list[Observation],
                     notes: list[str]) -> tuple[dict[str, Image.Image], bool]:
        """Caption every observation (cached per image). Uncached ones go to the MLLM one conversation per call,
        `caption_batch_size` conversations per `chat_batch` call, or (0) all in one call."""
        cfg, tpl = self.config, self.prompts.caption
        thumbs: dict[str, Image.Image] = {}
        transient = False
        n = len(observations)
        done = 0
        ctx.progress("Captioning observations", 0, n)
        pending: list[tuple[Observation, Image.Image, str]] = []  # (observation, image, caption unit key)
        for i, obs in enumerate(observations):
            ctx.check_cancelled()
            try:
                ref_img = load_reference_image(self.reference, obs)
            except NemoError as exc:
                ref_img, unreadable = None, exc.message
            if ref_img is not None:
                thumb = ref_img.copy()
                thumb.thumbnail((cfg.thumbnail_side, cfg.thumbnail_side))
                obs.thumbnail_artifact = f"obs_{i}"
                thumbs[obs.thumbnail_artifact] = thumb
            sha = obs.image_sha256 or (image_hash(ref_img) if ref_img is not None else None)
            key = unit_key("caption", image_sha256=sha, mllm=model_part(self.mllm.info),
                           prompt_version=tpl.version, max_new_tokens=cfg.caption_max_new_tokens)
            hit = units.get(key) if sha else None
            if hit is not None:  # a stored caption is used even if the file has gone since
                obs.caption = hit.payload["caption"]
            elif ref_img is None:
                notes.append(f"Observation {obs.image_path} could not be read and was left out: {unreadable}")
            else:
                pending.append((obs, ref_img, key))
                continue
            done += 1
            ctx.progress("Captioning observations", done, n)
        size = max(1, int(cfg.caption_batch_size) or len(pending))
        for start in range(0, len(pending), size):
            ctx.check_cancelled()
            group = pending[start:start + size]
            conversations = [[ChatMessage.user(img, tpl.render())] for _, img, _ in group]
            try:
                if size == 1:
                    replies = [self.mllm.chat(conversations[0], max_new_tokens=cfg.caption_max_new_tokens,
                                              temperature=0.0)]
                else:
                    replies = self.mllm.chat_batch(conversations, max_new_tokens=cfg.caption_max_new_tokens,
                                                   temperature=0.0)
            except JobCancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - recorded; the other observations go on
                transient = True
                for obs, _, _ in group:
                    notes.append(f"Captioning {Path(obs.image_path).name} failed: {error_text(exc)}")
                done += len(group)
                ctx.progress("Captioning observations", done, n)
                continue
            for (obs, _, key), reply in zip(group, replies):
                obs.caption = _clean_caption(reply)
                units.put(key, "caption", {"image_sha256": obs.image_sha256, "caption": obs.caption,
                                           "raw_reply": reply, "prompt_version": tpl.version,
                                           "mllm": model_part(self.mllm.info)})
            done += len(group)
            ctx.progress("Captioning observations", done, n)
        return thumbs, transient

    # --------------------------------------------------------------------------------------- stage 3
    def _hypothesis_template(self) -> PromptTemplate:
        """A.1 with class relevance; without it (Table 5 ablation) A.1 plus a "Set S" block for the nearest
        neighbours of other classes, so they are never shown as random examples."""
        return self.prompts.hypothesis if self.config.class_relevance else self.prompts.hypothesis_similarity

    def _hypothesis_prompt(self, sample: SampleInfo, observations: list[Observation]) -> str:
        def block(set_name: str) -> str:
            lines = []
            for o in observations:
                if not o.caption or _prompt_set(o, sample) != set_name:
                    continue
                label = f"[{o.label_name}] " if set_name == "S" else ""  # other classes: say which
                lines.append(f"  - {label}{o.caption}")
            return "\n".join(lines) if lines else EMPTY_SET

        return self._hypothesis_template().render(
            true_label_1=sample.true_name, prediction=sample.pred_name, set_a_captions=block("A"),
            set_b_captions=block("B"), set_s_captions=block("S"), set_c_captions=block("C"))

    def _hypothesise(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str,
                     sample: SampleInfo, observations: list[Observation]) -> tuple[list[Candidate], bool]:
        """M draws of the A.1 prompt (see "How the M distinct candidates are obtained"), cached per draw."""
        cfg = self.config
        prompt = self._hypothesis_prompt(sample, observations)
        candidates, _, transient = draw_hypotheses(
            ctx, units, self.mllm, [ChatMessage.user(img, prompt)], m=cfg.m,
            key_parts={"image_sha256": image_sha, "prompt_sha256": sha_text(prompt)},
            prompt=self._hypothesis_template(), repair=self.prompts.repair, seed=cfg.seed,
            sampling=cfg.sampling, max_extra_draws=cfg.max_extra_draws,
            max_new_tokens=cfg.hypothesis_max_new_tokens, batch=cfg.batch_requests)
        return candidates, transient

    # --------------------------------------------------------------------------------------- records
    def _manifest(self, cfg: SciTXConfig, image_path: Path | None, file_sha: str | None, units: UnitCache,
                  complete: bool, counts: dict[str, int], edit: dict[str, Any] | None = None,
                  edit_check: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "method": METHOD,
            "version": VERSION,
            "app_version": __version__,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "complete": complete,
            "models": {"classifier": model_manifest(self.classifier.info),
                       "mllm": model_manifest(self.mllm.info),
                       "editor": None if self.zero_shot else model_manifest(self.editor.info)},
            "zero_shot": self.zero_shot,
            "intervention": "prompt" if self.zero_shot else "image",
            "edit": edit,  # working size of the edits (None for prompt interventions)
            "prompts": self._prompt_versions(),
            "config": cfg.as_dict(),
            # Resolved observation counts (see "How many observations"): what the A.1 prompt was given.
            "observations": {"k_scope": cfg.k_scope, "k": cfg.k, "k_random": cfg.random_count,
                             "class_relevance": cfg.class_relevance,
                             "class_relevant_total": cfg.k if cfg.k_scope == "pooled" else 2 * cfg.k},
            "seeds": {"hypothesis_draws": f"draw 0 greedy; draw d>=1 seed {cfg.seed}*1000+d", "edit": cfg.seed,
                      "retrieval": cfg.seed},
            "sampling": {"draw_0": "greedy", "draws_1_on": cfg.sampling.as_dict()},
            "candidate_counts": counts,
            "cut_off_replies": CUT_OFF_RECORD,
            "edit_check": edit_check,
            "reference": reference_part(self.reference),
            **run_record(image_path, file_sha, units),
        }

    def _store_result(self, units: UnitCache, key: str, result: ExplanationResult, img: Image.Image,
                      edited: dict[int, Image.Image]) -> None:
        if units.store is None:
            return
        artifacts: dict[str, Any] = {"input": img}
        for j, out in edited.items():
            artifacts[f"edited_{j}"] = out
        for name, im in self.last_artifacts.items():
            if name.startswith("obs_"):
                artifacts[name] = im
        result.result_key = key
        units.store.put(key, "explanation", result.to_dict(), artifacts)


def _prompt_set(obs: Observation, sample: SampleInfo) -> str:
    """The prompt's set for an observation. Retrieval without class relevance (Table 5 ablation) returns
    one set "S" of nearest neighbours of any class: those of the true / predicted class are shown under
    Set A / Set B (their labels make that true), the others under Set S with their label."""
    if obs.set_name != "S":
        return obs.set_name
    if obs.label_index == sample.true_index:
        return "A"
    if obs.label_index == sample.pred_index:
        return "B"
    return "S"


def _clean_caption(reply: str | None) -> str:
    text = " ".join((reply or "").split())
    return text or "(empty caption)"


# The module's registry entries, named by its entry point (pyproject.toml, nemo_desktop.analyses).
ANALYSES = (SciTXPipeline.ENTRY,)
