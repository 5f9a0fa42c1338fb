"""The counterfactual test of candidate explanations (NEMO paper §3.3), shared by SciTX, the
validation-augmented baselines (Table 2) and the global explanation's CEI (Table 6).

For each candidate: (i) derivation — text only (the MLLM sees neither the image nor the observations'
captions), the A.3 prompt filled with the hypothesis and the true and predicted class names (plus, for a
zero-shot classifier, the true class's current prompt) makes the MLLM write an edit instruction (A.3, image
intervention) or a rewritten zero-shot prompt for the true class (A.3, prompt intervention); (ii)
intervention — the editor applies the instruction to the image at its working resolution (see
`InterventionSettings.edit_size`), or the new prompt replaces the true class's prompt only; (iii)
estimation — the classifier runs again and CEI = 100 × (P(y | s_e) − P(y | s_o)).

`CounterfactualTester` does the three steps for a list of `Candidate`s in place. Every unit (classification,
intervention text, edited image) is cached in the results store through `UnitCache` under a key of
everything that determines it, so methods that test the same hypothesis on the same image share the work.
Model exceptions are recorded on the candidate and reported as `transient` (not cached) so that a re-run
retries them; unreadable replies are deterministic and cached.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from PIL import Image

from ..base.errors import JobCancelled, OutOfMemoryError
from ..base.job_context import JobContext, describe_exception
from ..metrics.cei import cei, top_k
from ..models.outputs import predict_with_embeddings
from ..models.protocols import ChatMessage, ModelInfo
from .cut_off import accepted_a_cut_reply
from .edit_many import at_input_size, edit_many
from .json_ask import JsonAsk, ask_json, ask_json_batch  # noqa: F401 - ask_json re-exported (callers import it here)
from .prompts import PromptTemplate, load_prompt
from ..base.records import Candidate, SampleInfo

log = logging.getLogger(__name__)


# -- small shared helpers -----------------------------------------------------------------------------------
class UnitCache:
    """The results store seen as a cache of units; works (without caching) when there is no store."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.reused = 0
        self.computed = 0

    def get(self, key: str) -> Any:
        if self.store is None:
            return None
        hit = self.store.get(key)
        if hit is not None:
            self.reused += 1
        return hit

    def put(self, key: str, kind: str, payload: dict, artifacts: Mapping[str, Any] | None = None) -> Any:
        self.computed += 1
        if self.store is None:
            return None
        return self.store.put(key, kind, payload, artifacts)


def unit_key(kind: str, **parts: Any) -> str:
    from ..store import result_key  # light; imported here to keep this module's import order simple

    return result_key(kind, **parts)


def sha_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, sort_keys=True, default=str))


def image_hash(img: Image.Image) -> str:
    from ..store import content_hash

    return content_hash(img)


def model_part(info: ModelInfo | None) -> dict[str, Any] | None:
    """What identifies a model in cache keys (extra is for manifests: it may hold device or dtype)."""
    if info is None:
        return None
    return {"id": info.model_id, "family": info.family, "revision": info.revision}


def model_manifest(info: ModelInfo | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {**model_part(info), "extra": jsonable(dict(info.extra or {}))}


def error_text(exc: BaseException) -> str:
    d = describe_exception(exc)
    return d["message"] + (f" {d['hint']}" if d.get("hint") else "")


def load_input(image: str | os.PathLike | Image.Image) -> tuple[Image.Image, Path | None, str | None]:
    """(RGB image, its path or None, the file's sha256 or None)."""
    from ..base.images import load_image, to_rgb

    if isinstance(image, Image.Image):
        return to_rgb(image), None, None
    from ..store import content_hash

    path = Path(image)
    return load_image(path), path, content_hash(path)


def classifier_part(classifier: Any) -> dict[str, Any]:
    """The classifier in cache keys: weights, class list, and (zero-shot) the current class prompts."""
    names = list(classifier.class_names)
    part = {**model_part(classifier.info), "classes_sha256": sha_text("\n".join(names))}
    if getattr(classifier, "zero_shot", False) and hasattr(classifier, "class_prompt"):
        prompts = [classifier.class_prompt(i) for i in range(len(names))]
        part["prompts_sha256"] = sha_text("\n".join(prompts))
    return part


def raw_replies(unit: Mapping[str, Any]) -> str | None:
    """The model's reply, and the reply to the repair request when there was one, after the first reply
    when it was cut short and asked again (for auditing)."""
    raw, repair, cut = unit.get("raw_reply"), unit.get("repair_reply"), unit.get("cut_off_reply")
    if cut is not None:
        raw = f"{cut}\n--- cut off; asked again with {unit.get('retry_max_new_tokens')} tokens ---\n{raw}"
    if repair is None:
        return raw
    return f"{raw}\n--- reply to the repair request ---\n{repair}"


# -- the tester --------------------------------------------------------------------------------------------
@dataclass
class InterventionPrompts:
    edit: PromptTemplate
    rewrite: PromptTemplate
    repair: PromptTemplate

    @classmethod
    def load(cls) -> "InterventionPrompts":
        return cls(load_prompt("scitx_edit_instruction"), load_prompt("scitx_prompt_rewrite"),
                   load_prompt("json_repair"))

    def versions(self) -> dict[str, str]:
        return {"edit": self.edit.version, "rewrite": self.rewrite.version, "repair": self.repair.version}


EDIT_RESOLUTIONS = ("preferred", "native")


def check_edit_resolution(value: str) -> str:
    if value not in EDIT_RESOLUTIONS:
        from ..base.errors import ConfigError

        raise ConfigError(f"Unknown edit resolution '{value}'.",
                          hint="Use 'preferred' (the editor's working resolution) or 'native' (the image's own "
                               "size), or give an explicit edit size.")
    return value


@dataclass
class InterventionSettings:
    """How interventions are applied. The working size of an edit: `edit_size` when given; otherwise
    `edit_resolution="preferred"` (default) = the editor's preferred working resolution for the image's shape
    (`editor.preferred_size`: about 1 MP for FLUX.1 Kontext and Qwen-Image-Edit, 512 x 512 for
    InstructPix2Pix, aspect ratio kept), or "native" = the image's own size. The edited image is always
    resized back to the input image's size, so the classifier preprocesses it exactly as it did the input."""

    seed: int = 0
    edit_steps: int | None = None  # None = the editor's default
    edit_guidance: float | None = None
    edit_size: tuple[int, int] | None = None  # (width, height); None = see edit_resolution
    max_new_tokens: int = 256
    edit_resolution: str = "preferred"  # "preferred" | "native"
    edit_batch_size: int = 1  # >1: uncached edits of one image run together (editor.edit_batch), and so do one
    # instruction's edits of several images (edit_many: editor.edit_images), same seeds; 0: as many as the
    # editor says fit in free memory (editor.edit_batch_capacity), else one at a time
    batch_requests: bool = False  # True: the uncached interventions go to the MLLM at once (requests.py)

    def __post_init__(self) -> None:
        check_edit_resolution(self.edit_resolution)

    @classmethod
    def from_config(cls, config: Any) -> "InterventionSettings":
        """From a method's config (SciTXConfig, BaselineConfig: the same field names)."""
        return cls(seed=config.seed, edit_steps=config.edit_steps, edit_guidance=config.edit_guidance,
                   edit_size=config.edit_size, max_new_tokens=config.intervention_max_new_tokens,
                   edit_resolution=getattr(config, "edit_resolution", "preferred"),
                   edit_batch_size=int(getattr(config, "edit_batch_size", 1)),
                   batch_requests=bool(getattr(config, "batch_requests", False)))


class CounterfactualTester:
    """Derivation, intervention and estimation for candidates (see the module docstring)."""

    def __init__(self, classifier: Any, mllm: Any, editor: Any = None, *, prompts: InterventionPrompts | None = None,
                 settings: InterventionSettings | None = None) -> None:
        self.classifier = classifier
        self.mllm = mllm
        self.editor = editor
        self.prompts = prompts or InterventionPrompts.load()
        self.settings = settings or InterventionSettings()

    @property
    def zero_shot(self) -> bool:
        return bool(getattr(self.classifier, "zero_shot", False))

    @property
    def kind(self) -> str:
        return "prompt" if self.zero_shot else "image"

    @property
    def can_test(self) -> bool:
        """An MLLM to derive interventions, and an editor unless the classifier is zero-shot."""
        return self.mllm is not None and (self.zero_shot or self.editor is not None)

    def why_not(self) -> str | None:
        if self.mllm is None:
            return "no MLLM was given to derive interventions"
        if not self.zero_shot and self.editor is None:
            return "no image editor was given (the classifier is not zero-shot)"
        return None

    def working_size(self, size: tuple[int, int]) -> tuple[tuple[int, int], str]:
        """(width, height) the editor runs at for an input of `size`, and where that size comes from."""
        s = self.settings
        if s.edit_size:
            return (int(s.edit_size[0]), int(s.edit_size[1])), "edit_size"
        preferred = getattr(self.editor, "preferred_size", None)
        if s.edit_resolution == "preferred" and callable(preferred):
            w, h = preferred(int(size[0]), int(size[1]))
            return (int(w), int(h)), "editor's preferred working resolution"
        if s.edit_resolution == "preferred":
            return tuple(size), "native (the editor declares no preferred working resolution)"
        return tuple(size), "native"

    def edit_record(self, img: Image.Image) -> dict[str, Any] | None:
        """The edit resolution of one image, for manifests (None without an image editor)."""
        if self.zero_shot or self.editor is None:
            return None
        size, source = self.working_size(img.size)
        return {"resolution": self.settings.edit_resolution, "working_size": list(size), "working_size_from": source,
                "input_size": list(img.size), "output_resized_to": list(img.size)}

    # -- classification ------------------------------------------------------------------------------------
    def classify(self, units: UnitCache, img: Image.Image, image_sha: str, clf: dict,
                 class_prompts: Mapping[int, str] | None = None, *, with_embedding: bool = False) -> np.ndarray:
        """The image's class probabilities (cached). `with_embedding` (the query of a method that retrieves):
        the same forward pass also yields its embedding, stored as the "embedding" unit `embed_query` reads."""
        prompts_part = {str(k): v for k, v in class_prompts.items()} if class_prompts else None
        key = unit_key("classification", image_sha256=image_sha, classifier=clf, class_prompts=prompts_part)
        hit = units.get(key)
        if hit is not None:
            return np.asarray(hit.payload["probs"], dtype=np.float64)
        if class_prompts:
            probs = self.classifier.predict_proba([img], class_prompts=dict(class_prompts))
        elif with_embedding:
            from .reference import store_query_embedding

            probs, emb = predict_with_embeddings(self.classifier, [img])
            store_query_embedding(units, emb[0], image_sha, clf)
        else:
            probs = self.classifier.predict_proba([img])
        probs = np.asarray(probs, dtype=np.float64).reshape(1, -1)[0]
        units.put(key, "classification", {"image_sha256": image_sha, "classifier": clf,
                                          "class_prompts": prompts_part, "probs": [float(p) for p in probs]})
        return probs

    def original_prompt(self, index: int, name: str) -> str:
        fn = getattr(self.classifier, "class_prompt", None)
        return fn(index) if callable(fn) else f"a photo of a {name}."

    # -- the three steps -----------------------------------------------------------------------------------
    def test(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str, clf: dict,
             sample: SampleInfo, candidates: list[Candidate], timings: dict[str, float] | None = None,
             artifacts: dict[str, Image.Image] | None = None, artifact_prefix: str = "edited_") \
            -> tuple[dict[int, Image.Image], bool]:
        """Write, apply and score the interventions of `candidates` (in place). Returns (edited images by
        candidate index, transient): transient is True when a model raised, so the caller marks the result
        incomplete and a re-run retries."""
        import time

        timings = timings if timings is not None else {}
        t = time.perf_counter()
        transient = self.write_interventions(ctx, units, sample, candidates)
        timings["intervention"] = timings.get("intervention", 0.0) + time.perf_counter() - t
        t = time.perf_counter()
        edited: dict[int, Image.Image] = {}
        if not self.zero_shot:
            edited, edit_transient = self.edit_all(ctx, units, img, image_sha, candidates, artifacts,
                                                   artifact_prefix)
            transient |= edit_transient
            measure_edits(img, edited, candidates)
        timings["edit"] = timings.get("edit", 0.0) + time.perf_counter() - t
        t = time.perf_counter()
        self.score_all(ctx, units, img, image_sha, clf, sample, candidates, edited)
        timings["score"] = timings.get("score", 0.0) + time.perf_counter() - t
        return edited, transient

    def write_interventions(self, ctx: JobContext, units: UnitCache, sample: SampleInfo,
                            candidates: list[Candidate]) -> bool:
        """The intervention of every candidate (cached per prompt). Uncached ones go to the MLLM one request
        per call, or all at once with `batch_requests` (the same requests and parsing either way)."""
        kind = self.kind
        tpl = self.prompts.rewrite if self.zero_shot else self.prompts.edit
        max_new = self.settings.max_new_tokens
        transient = False
        m = len(candidates)
        ctx.progress("Writing interventions", 0, m)
        done = 0
        pending: list[tuple[int, str, str]] = []  # (candidate index, unit key, prompt)
        for j, cand in enumerate(candidates):
            ctx.check_cancelled()
            cand.intervention_kind = kind
            if cand.error is None:
                values = dict(true_label_1=sample.true_name, prediction=sample.pred_name, hypothesis=cand.hypothesis)
                if self.zero_shot:
                    values["original_prompt"] = self.original_prompt(sample.true_index, sample.true_name)
                prompt = tpl.render(**values)
                key = unit_key("intervention", intervention_kind=kind, mllm=model_part(self.mllm.info),
                               prompt_version=tpl.version, repair_version=self.prompts.repair.version,
                               prompt_sha256=sha_text(prompt), max_new_tokens=max_new)
                hit = units.get(key)
                payload = hit.payload if hit is not None else None
                if payload is not None and accepted_a_cut_reply(payload, "intervention", "solution"):
                    payload = None  # cached before cut replies were refused: its instruction is a fragment
                if payload is None:
                    pending.append((j, key, prompt))
                    continue
                self._take_intervention(cand, payload)
            done += 1
            ctx.progress("Writing interventions", done, m)
        size = len(pending) if self.settings.batch_requests else 1
        for start in range(0, len(pending), max(1, size)):
            ctx.check_cancelled()
            group = pending[start:start + max(1, size)]
            outcomes = ask_json_batch(self.mllm, self.prompts.repair,
                                      [JsonAsk([ChatMessage.user(prompt)]) for _, _, prompt in group], "solution",
                                      max_new)
            for (j, key, _), outcome in zip(group, outcomes):
                if isinstance(outcome, BaseException):  # recorded on this candidate, not cached
                    transient = True
                    candidates[j].error = f"The MLLM failed while writing the intervention: {error_text(outcome)}"
                else:
                    payload = {"intervention": outcome.pop("value"), "kind": kind, "prompt_version": tpl.version,
                               **outcome}
                    units.put(key, "intervention", payload)
                    self._take_intervention(candidates[j], payload)
                done += 1
                ctx.progress("Writing interventions", done, m)
        return transient

    @staticmethod
    def _take_intervention(cand: Candidate, payload: dict) -> None:
        cand.intervention = payload["intervention"]
        if payload.get("error"):
            cand.error = f"Intervention: {payload['error']}"
            cand.raw_reply = raw_replies(payload)

    def edit_all(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str,
                 candidates: list[Candidate], artifacts: dict[str, Image.Image] | None = None,
                 artifact_prefix: str = "edited_") -> tuple[dict[int, Image.Image], bool]:
        """Edit the image once per candidate (cached per edit). With `edit_batch_size` > 1 (or 0: chosen from
        free memory) and an editor that has `edit_batch`, the uncached edits run that many per editor call, each
        with the same seed."""
        s = self.settings
        size, _ = self.working_size(img.size)
        edited: dict[int, Image.Image] = {}
        transient = False
        m = len(candidates)
        todo: list[tuple[int, str]] = []  # (candidate index, edit unit key) still to compute
        for j, cand in enumerate(candidates):
            ctx.check_cancelled()
            if cand.error is not None or not cand.intervention:
                continue
            key = self._edit_key(img, image_sha, cand.intervention, size)
            hit = units.get(key)
            if hit is not None:
                edited[j] = hit.load_image("image").convert("RGB")
                ctx.progress(f"Editing image {j + 1}/{m}", 1, 1)
            else:
                todo.append((j, key))
        start, one_by_one = 0, False
        while start < len(todo):
            group = todo[start:start + (1 if one_by_one else self.edits_per_call(size))]
            start += len(group)
            ctx.check_cancelled()
            first = group[0][0] + 1
            stage = (f"Editing image {first}/{m}" if len(group) == 1 else
                     f"Editing images {first}-{group[-1][0] + 1}/{m}")
            ctx.progress(stage, 0, s.edit_steps)

            def on_step(step: int, total: int, _stage: str = stage) -> bool:
                ctx.progress(_stage, step, total)
                return not ctx.cancelled

            instructions = [candidates[j].intervention for j, _ in group]
            try:
                if len(group) == 1:
                    outs = [self.editor.edit(img, instructions[0], seed=s.seed, steps=s.edit_steps,
                                             guidance=s.edit_guidance, size=tuple(size), on_step=on_step)]
                else:
                    outs = list(self.editor.edit_batch(img, instructions, seed=s.seed, steps=s.edit_steps,
                                                       guidance=s.edit_guidance, size=tuple(size), on_step=on_step))
                ctx.check_cancelled()
                if len(outs) != len(group) or not all(isinstance(o, Image.Image) for o in outs):
                    raise TypeError(f"the editor returned {len(outs)} results of types "
                                    f"{sorted({type(o).__name__ for o in outs})}, not {len(group)} PIL images")
                outs = [at_input_size(o, img) for o in outs]
            except JobCancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - these candidates fail, the others are still scored
                if isinstance(exc, OutOfMemoryError) and len(group) > 1:
                    # the batch did not fit after all: these edits, and the rest, one at a time
                    one_by_one, start = True, start - len(group)
                    log.warning("a batch of %d edits ran out of memory; editing one at a time", len(group))
                    continue
                transient = True
                for j, _ in group:
                    candidates[j].error = f"Editing failed: {error_text(exc)}"
                log.warning("edit failed for candidate(s) %s", [j for j, _ in group], exc_info=True)
                continue
            for (j, key), out in zip(group, outs):
                self._put_edit(units, key, image_sha, candidates[j].intervention, size, img, out)
                edited[j] = out
            ctx.progress(stage, 1, 1)
        edited = dict(sorted(edited.items()))  # candidate order, cached or not
        for j, out in edited.items():
            candidates[j].edited_artifact = f"{artifact_prefix}{j}"
            if artifacts is not None:
                artifacts[candidates[j].edited_artifact] = out
        return edited, transient

    def _edit_key(self, img: Image.Image, image_sha: str, instruction: str, size) -> str:
        s = self.settings
        return unit_key("edit", image_sha256=image_sha, editor=model_part(self.editor.info), instruction=instruction,
                        seed=s.seed, steps=s.edit_steps, guidance=s.edit_guidance, size=list(size),
                        output_size=list(img.size))

    def _put_edit(self, units: UnitCache, key: str, image_sha: str, instruction: str, size, img: Image.Image,
                  out: Image.Image) -> None:
        s = self.settings
        units.put(key, "edit", {"source_sha256": image_sha, "instruction": instruction,
                                "editor": model_part(self.editor.info), "seed": s.seed, "steps": s.edit_steps,
                                "guidance": s.edit_guidance, "size": list(size), "output_size": list(img.size),
                                "image_sha256": image_hash(out)}, {"image": out})

    def edit_one(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str, instruction: str,
                 stage: str) -> Image.Image:
        """One instruction on one image with the settings of every edit (same seed, steps, working size), cached
        under the same unit key as `edit_all`'s; the output at the input's size. Raises what the editor raises.
        `edit_many` with one item."""
        return self.edit_many(ctx, units, [(img, image_sha)], instruction, stage)[0]

    def edit_many(self, ctx: JobContext, units: UnitCache, items: Sequence[tuple[Image.Image, str]],
                  instruction: str, stage: str) -> list[Image.Image]:
        """`edit_one` for each (image, sha256) of `items`, in order, with the same unit keys; the uncached
        images grouped by working size and sent `edits_per_call(size, images=True)` per editor call
        (`editor.edit_images`; one `edit` each for an editor without it). See edit_many.py."""
        return edit_many(self, ctx, units, items, instruction, stage)

    def edits_per_call(self, size: tuple[int, int], *, images: bool = False) -> int:
        """Edits per editor call at working size `size`: several instructions on one image (`edit_batch`) or,
        with `images`, one instruction on several images (`edit_images`). 1 when the editor lacks that method;
        else `edit_batch_size`, or with 0 what the editor says fits in free memory now (asked again before
        every batch, so the first edit of a size runs alone and is measured)."""
        if not callable(getattr(self.editor, "edit_images" if images else "edit_batch", None)):
            return 1
        wanted = int(self.settings.edit_batch_size)
        if wanted > 0:
            return wanted
        capacity = getattr(self.editor, "edit_batch_capacity", None)
        return max(1, int(capacity(tuple(size)))) if callable(capacity) else 1

    def score_all(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str, clf: dict,
                  sample: SampleInfo, candidates: list[Candidate], edited: Mapping[int, Image.Image]) -> None:
        names = list(self.classifier.class_names)
        y = sample.true_index
        m = len(candidates)
        ctx.progress("Scoring", 0, m)
        for j, cand in enumerate(candidates):
            ctx.check_cancelled()
            cand.prob_true_before = sample.prob_true
            cand.top5_before = list(sample.top5)
            if cand.error is None and cand.intervention:
                if self.zero_shot:
                    after = self.classify(units, img, image_sha, clf, class_prompts={y: cand.intervention})
                elif j in edited:
                    out = edited[j]
                    after = self.classify(units, out, image_hash(out), clf)
                else:
                    after = None
                if after is not None:
                    cand.prob_true_after = float(after[y])
                    cand.cei = cei(cand.prob_true_after, cand.prob_true_before)
                    cand.top5_after = top_k(after, names, 5)
            ctx.partial({"kind": "candidate", "index": j, "candidate": cand})
            ctx.progress("Scoring", j + 1, m)


def measure_edits(img: Image.Image, edited: Mapping[int, Image.Image], candidates: list[Candidate]) -> None:
    """Each counterfactual's distance from the original (metrics/edit_distance.py) and the share of its structure
    the original had (metrics/edit_structure.py), on its candidate."""
    from ..metrics.edit_distance import edit_distance
    from ..metrics.edit_structure import structure_reading

    for j, out in edited.items():
        candidates[j].edit_distance, candidates[j].edit_distance_metric = edit_distance(img, out)
        candidates[j].edit_structure, candidates[j].edit_structure_reading = structure_reading(img, out)


def sample_info(probs: np.ndarray, class_names: Sequence[str], y: int, image_path: Path | None,
                image_sha: str) -> SampleInfo:
    """The misclassified image and what the classifier said about it."""
    pred = int(np.argmax(probs))
    return SampleInfo(image_path=str(image_path or ""), image_sha256=image_sha, true_index=y,
                      true_name=class_names[y], pred_index=pred, pred_name=class_names[pred],
                      prob_true=float(probs[y]), prob_pred=float(probs[pred]), top5=top_k(probs, class_names, 5),
                      image_artifact="input")
