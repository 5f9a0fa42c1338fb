"""Validate a failure-mode sentence with CEI: the sentence is the hypothesis of the existing counterfactual test
(methods/intervention.py, the same derivation, edit or prompt rewrite, and estimation as SciTX) on each
misclassified image of a hard cluster, and its CEI is averaged over them. A sentence that names the real cause
should, when its condition is removed, raise the true class's probability; one that merely co-occurs should not.

    v = SentenceValidator(classifier, mllm, editor, store).validate(index, cluster, "a photo taken at night")
    v.mean_cei, v.n                  # over the images that could be tested; v.samples says why others could not

An image edit counts when it tests the sentence: SciTX's reference control (methods/edit_control.py) decides
where it ran (the same edit on `control_references` references of other classes from the index must not raise
the true class as it did on the image), the structure verdict otherwise; `SampleCei.verdict_reason` says which.

Every model step is cached per unit in the store (UnitCache), and the whole validation under a key of the
sentence, the images' contents, the models, the prompts and the settings, so a re-run calls no model.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from .... import __version__
from ...base.errors import ConfigError, InputImageError
from ...base.job_context import JobContext, null_context
from ...methods.intervention import (CounterfactualTester, InterventionPrompts, InterventionSettings, UnitCache,
                                     classifier_part, image_hash, load_input, model_manifest, model_part,
                                     sample_info, sha_text, unit_key)
from ...methods.edit_check import (DEFAULT_FLAG_THRESHOLD, DEFAULT_NOISE_FLOOR, beyond_floor, control_valid,
                                   describe_edit, judge_edits, with_control)
from ...methods.edit_control import (DEFAULT_CONTROL_REFERENCES, DEFAULT_CONTROL_RULE, ReferenceControl,
                                     check_control_rule, describe_control)
from ...methods.pipeline_steps import stored_result
from ...base.records import Candidate
from .result import HardCluster

KIND = "failure-modes-cei"
VERSION = "5"  # 2: edits that destroy the picture or change nothing are not counted (issue 27)
# 3: structure readings for photographs (restoration, pixel noise, edge floor) and verdict reasons (issue 45)
# 4: the reference control (methods/edit_control.py) decides whether an image edit counts (issue 45)
# 5: the control's defaults: six references, read by the reference log-odds rule (issue 45, stop 48)


@dataclass
class SampleCei:
    path: str
    true_name: str
    pred_name: str | None = None
    prob_true_before: float | None = None
    prob_true_after: float | None = None
    cei: float | None = None
    intervention: str | None = None
    error: str | None = None
    # which test decided whether the edit counts, in words (structure / distance / reference control), and the
    # reference control's figures where it ran (methods/edit_control.py)
    verdict_reason: str | None = None
    control: dict[str, Any] | None = None


@dataclass
class SentenceValidation:
    sentence: str
    samples: list[SampleCei]
    mean_cei: float | None  # over the samples with a CEI
    n: int  # samples with a CEI
    manifest: dict[str, Any] = field(default_factory=dict)
    result_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SentenceValidation":
        return cls(d["sentence"], [SampleCei(**s) for s in d["samples"]], d["mean_cei"], d["n"],
                   d.get("manifest", {}), d.get("result_key"))


def cluster_errors(index: Any, cluster: HardCluster) -> list[int]:
    """Index rows of the cluster's misclassified images (the images to validate on, or to open in the workbench)."""
    e = index.entries
    return [r for r in cluster.rows if r < len(e) and not bool(e.correct[r])]


class SentenceValidator:
    def __init__(self, classifier: Any, mllm: Any, editor: Any = None, store: Any = None,
                 settings: InterventionSettings | None = None, prompts: InterventionPrompts | None = None,
                 control_references: int = DEFAULT_CONTROL_REFERENCES,
                 control_rule: str = DEFAULT_CONTROL_RULE) -> None:
        # the reference control of each image edit (SciTX's, methods/edit_control.py): R references of other
        # classes from the index get the same edit; 0 = off (the structure verdict alone decides)
        if control_references < 0:
            raise ConfigError(f"The reference control needs 0 or more references (got {control_references}).")
        self.control_references = int(control_references)
        check_control_rule(control_rule)
        self.control_rule = control_rule
        self.tester = CounterfactualTester(classifier, mllm, editor, prompts=prompts, settings=settings)
        if not self.tester.can_test:
            raise ConfigError(f"The sentence cannot be validated with CEI: {self.tester.why_not()}.",
                              hint="Give an MLLM and an image editor, or use a zero-shot classifier.")
        self.classifier, self.store = classifier, store

    def validate(self, index: Any, cluster: HardCluster, sentence: str, *, max_images: int = 8,
                 ctx: JobContext | None = None) -> SentenceValidation:
        ctx = ctx or null_context()
        if not sentence.strip():
            raise ConfigError("The sentence to validate is empty.")
        if max_images < 1:
            raise ConfigError("max_images must be at least 1.")
        info = self.classifier.info
        if (info.model_id, info.revision) != (index.classifier_id, index.classifier_revision):
            raise ConfigError(f"The index was built with {index.classifier_id}, not {info.model_id}.",
                              hint="Validate with the classifier whose failures the cluster shows.")
        rows = cluster_errors(index, cluster)[:max_images]
        if not rows:
            raise ConfigError("The cluster has no misclassified image to validate the sentence on.")
        tester, units = self.tester, UnitCache(self.store)
        clf, names = classifier_part(self.classifier), list(self.classifier.class_names)
        paths = [str(index.entries.paths[r]) for r in rows]
        key = unit_key(KIND, sentence_sha256=sha_text(sentence), images=[index.entries.sha256[r] for r in rows],
                       classifier=clf, mllm=model_part(tester.mllm.info),
                       editor=None if tester.zero_shot else model_part(tester.editor.info),
                       prompts=tester.prompts.versions(), settings=asdict(tester.settings), version=VERSION,
                       control_references=self.control_references, control_rule=self.control_rule)
        stored = stored_result(units, key, ctx, SentenceValidation)
        if stored is not None:
            return stored
        samples, artifacts, transient, t0 = [], {}, False, time.perf_counter()
        control_notes: list[str] = []
        for i, (row, path) in enumerate(zip(rows, paths)):
            ctx.check_cancelled()
            ctx.progress("Validating the sentence with CEI", i, len(rows))
            y = int(index.entries.labels[row])
            s = SampleCei(path, names[y] if 0 <= y < len(names) else str(y))
            samples.append(s)
            try:
                img = load_input(path)[0]
            except (InputImageError, ConfigError, OSError) as exc:
                s.error = f"The image is not available: {getattr(exc, 'message', exc)}"
                continue
            sha = image_hash(img)
            probs = tester.classify(units, img, sha, clf)
            sample = sample_info(probs, names, y, None, sha)
            s.pred_name = sample.pred_name
            cand = Candidate(hypothesis=sentence)
            _, failed = tester.test(JobContext(cancel=ctx.cancel_token), units, img, sha, clf, sample, [cand],
                                    artifacts=artifacts, artifact_prefix=f"edited_{i}_")
            transient |= failed
            s.prob_true_before, s.prob_true_after, s.cei = cand.prob_true_before, cand.prob_true_after, cand.cei
            s.intervention, s.error = cand.intervention, cand.error
            # SciTX's edit judgement (methods/edit_check.py): a destroyed picture or an edit that changed nothing
            # does not test the sentence, so its CEI is shown but not counted in the mean
            judge_edits([cand], DEFAULT_FLAG_THRESHOLD)
            control = self._control(ctx, units, index, row, sample, clf, cand)
            if control is not None:
                # the control decides where it ran, the structure where it did not (as in SciTX's evidence rule)
                reading = control(0, cand)
                transient |= control.transient
                control_notes.extend(control.notes)
                cand.edit_control = reading.as_dict()
                cand.edit_verdict_reason = with_control(cand, describe_control(reading, DEFAULT_NOISE_FLOOR))
            s.control, s.verdict_reason = cand.edit_control, cand.edit_verdict_reason
            if s.error is None and not control_valid(cand):
                ran = (cand.edit_control or {}).get("ran")
                s.error = ("Not counted: the edit does not test the sentence "
                           f"({cand.edit_verdict_reason if ran else describe_edit(cand)}).")
        ctx.progress("Validating the sentence with CEI", len(rows), len(rows))
        ceis = [s.cei for s in samples if s.cei is not None and s.error is None]
        out = SentenceValidation(
            sentence, samples, float(np.mean(ceis)) if ceis else None, len(ceis),
            manifest={"version": VERSION, "app_version": __version__, "complete": not transient,
                      "index_id": index.index_id, "cluster_id": cluster.id,
                      "models": {"classifier": model_manifest(info), "mllm": model_manifest(tester.mllm.info),
                                 "editor": None if tester.zero_shot else model_manifest(tester.editor.info)},
                      "intervention": tester.kind, "prompts": tester.prompts.versions(),
                      "settings": asdict(tester.settings),
                      "control_references": self.control_references,
                      "control_rule": self.control_rule,
                      # references the control left out (unreadable, or not classified as labelled)
                      "control_notes": list(dict.fromkeys(control_notes)), "seconds": time.perf_counter() - t0,
                      "units": {"computed": units.computed, "reused": units.reused}})
        if self.store is not None:
            out.result_key = key
            self.store.put(key, KIND, out.to_dict(), artifacts)
        return out


    def _control(self, ctx: JobContext, units: UnitCache, index: Any, row: int, sample: Any, clf: dict,
                 cand: Candidate) -> ReferenceControl | None:
        """The reference control of an image edit that raised P(true) beyond the noise floor and changed
        something; None where it does not apply (off, prompt interventions, no CEI)."""
        if (self.control_references == 0 or self.tester.zero_shot or cand.error is not None or cand.cei is None
                or not beyond_floor(cand.cei, DEFAULT_NOISE_FLOOR) or cand.edit_verdict == "no change"):
            return None
        from ...data.retrieval import retrieve_observations
        from ...methods.reference import load_reference_image

        refs = retrieve_observations(index, np.asarray(index.features[row], dtype=np.float32), sample.true_index,
                                     sample.pred_index, k_true=0, k_pred=0, k_random=self.control_references,
                                     seed=self.tester.settings.seed, query_sha256=str(index.entries.sha256[row]))
        return ReferenceControl(JobContext(cancel=ctx.cancel_token), units, self.tester, clf, sample, list(refs),
                                self.control_references, lambda obs: load_reference_image(index, obs),
                                DEFAULT_NOISE_FLOOR, rule=self.control_rule)


def compare(validations: Sequence[SentenceValidation]) -> list[SentenceValidation]:
    """Sentences best first by mean CEI (untestable ones last)."""
    return sorted(validations, key=lambda v: (v.mean_cei is None, -(v.mean_cei or 0.0)))


# Points: removing the condition must raise P(true class) on average by more than this. Not 0: edits that name
# nothing relevant moved it by up to ~5 points either way in the digits ink world (measured: -4.7, -0.6, +1.8).
CEI_HOLDS_ABOVE = 5.0
TYPED = "typed"  # ModeValidation.method of a sentence the user typed (none of the result's methods chose it)


@dataclass
class ModeValidation:
    """One sentence of one failure mode checked with CEI, with the verdict in words (for the CLI and the report)."""

    group: str
    cluster: int  # the report's number of the mode within its group
    method: str
    sentence: str
    n: int  # misclassified images with a CEI
    tested: int  # misclassified images tried
    mean_cei: float | None
    held_up: bool | None  # None: no image could be tested
    verdict: str
    result_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict(v: SentenceValidation, threshold: float = CEI_HOLDS_ABOVE) -> tuple[bool | None, str]:
    quoted = f"\u201c{v.sentence}\u201d"
    if v.mean_cei is None:
        why = next((s.error for s in v.samples if s.error), "no image could be edited and classified again")
        return None, f"{quoted} could not be checked with CEI ({len(v.samples)} images tried): {why}."
    where = f"{v.n} misclassified image{'s' if v.n != 1 else ''} of the mode"
    if v.mean_cei > threshold:
        return True, (f"{quoted} held up under CEI: removing it from {where} raised the true class's probability "
                      f"by {v.mean_cei:+.1f} points on average.")
    return False, (f"{quoted} did not hold up under CEI: removing it from {where} changed the true class's "
                   f"probability by {v.mean_cei:+.1f} points on average (it must rise by more than {threshold:g}); "
                   "the sentence describes the images but is not shown to cause the errors.")


def validate_modes(result: Any, index: Any, validator: SentenceValidator, *, method: str | None = None,
                   sentences: int | None = None, max_images: int = 8, threshold: float = CEI_HOLDS_ABOVE,
                   ctx: JobContext | None = None) -> tuple[list[ModeValidation], list[str]]:
    """Validate the sentences `method` (default: the headline method) chose for every hard cluster that holds up as
    a failure mode (at most `sentences` per cluster, best first). Returns the validations and notes saying what was
    not validated and why."""
    from .describe import METHOD_LABELS, headline_method, holds_up

    ctx = ctx or null_context()
    method = method or headline_method(result.methods)
    if method not in result.methods:
        raise ConfigError(f"The result has no '{method}' sentences.", hint=f"Use one of: {', '.join(result.methods)}.")
    jobs, notes = [], []
    for g in result.groups:
        where = "" if g.class_index is None else f" of class \u201c{g.name}\u201d"
        for number, c in enumerate(g.hard_clusters, 1):
            ok, why = holds_up(c, g)
            if not ok:
                notes.append(f"Hard cluster {number}{where} was not validated: it did not hold up as a failure mode "
                             f"({why}).")
            elif not cluster_errors(index, c):
                notes.append(f"Failure mode {number}{where} was not validated: it has no misclassified image.")
            else:
                picks = c.sentences.get(method, [])[:sentences]
                jobs += [(g, number, c, p["text"]) for p in picks]
    out = []
    for i, (g, number, c, text) in enumerate(jobs):
        ctx.check_cancelled()
        v = validator.validate(index, c, text, max_images=max_images,
                               ctx=ctx.sub(f"CEI {i + 1}/{len(jobs)} ({METHOD_LABELS.get(method, method)})",
                                           i / len(jobs), (i + 1) / len(jobs)))
        held, said = verdict(v, threshold)
        out.append(ModeValidation(g.name, number, method, text, v.n, len(v.samples), v.mean_cei, held, said,
                                  v.result_key))
    return out, notes


def validate_sentence(result: Any, index: Any, validator: SentenceValidator, group: int, cluster: int,
                      sentence: str, *, max_images: int = 8, threshold: float = CEI_HOLDS_ABOVE,
                      ctx: JobContext | None = None) -> ModeValidation:
    """One sentence (one of the cluster's, or the user's own) checked with CEI on one hard cluster's errors, and
    recorded in `result.cei_validation` as validate_modes' are (the check itself is stored under its own key)."""
    g = result.groups[group]
    c = g.hard_clusters[cluster]
    v = validator.validate(index, c, sentence, max_images=max_images, ctx=ctx)
    held, said = verdict(v, threshold)
    method = next((m for m in result.methods if any(p["text"] == sentence for p in c.sentences.get(m, []))),
                  TYPED)
    out = ModeValidation(g.name, cluster + 1, method, sentence, v.n, len(v.samples), v.mean_cei, held, said,
                         v.result_key)
    record_validation(result, out, max_images=max_images, threshold=threshold)
    return out


def record_validation(result: Any, out: ModeValidation, *, max_images: int = 8,
                      threshold: float = CEI_HOLDS_ABOVE) -> None:
    """Put `out` into `result.cei_validation` (replacing an earlier check of the same sentence on the same cluster).
    The app calls it on its own copy of the result: in worker mode the check ran on the model process's copy."""
    cv = result.cei_validation or {"settings": {"max_images": max_images, "threshold": threshold},
                                   "validations": [], "notes": []}
    new = out.to_dict()
    cv["validations"] = [d for d in cv["validations"]
                         if (d["group"], d["cluster"], d["sentence"]) != (new["group"], new["cluster"], new["sentence"])]
    cv["validations"].append(new)
    result.cei_validation = cv
