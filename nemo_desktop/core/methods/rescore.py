"""Re-score a fixed explanation with another image editor (NEMO paper §4.2.3, Table 3, the "re-evaluate"
reading).

Table 3 reports each method's CEI with two editors. Two readings of "we re-evaluate ... with FLUX.1-Kontext-dev
and Qwen Image Edit":
  * "reselect" (the benchmark's default, `editor_protocol = "reselect"`): each editor runs the whole method,
    so SciTX (and any validated baseline) picks its hypothesis by CEI under that editor;
  * "rescore" (this module): the explanations are chosen once, with the first editor, and the second editor
    only tests them again: the same explanation text, a fresh intervention (the same MLLM, the A.3 prompt, as
    for any candidate: usually a cache hit) applied by this editor, and CEI.

    rescorer = RescoredExplanation(classifier, mllm, editor, store=store, settings=settings,
                                   source=lambda path: first_editor_result_or_None)
    result = rescorer(image_path, true_label, ctx)     # ExplanationResult of the source's method

The source's explanation is fixed: a sample whose source has no explanation fails (NemoError) rather than
being explained anew, so the two columns of Table 3 compare the same texts.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from PIL import Image

from ... import __version__
from ..base.errors import NemoError
from ..base.job_context import JobContext, null_context
from .intervention import (CounterfactualTester, InterventionPrompts, InterventionSettings, UnitCache,
                           classifier_part, image_hash, load_input, model_manifest, model_part, unit_key)
from .labels import resolve_label
from .pipeline_steps import INCOMPLETE_NOTE, classify_query, run_record, stored_result
from ..base.records import Candidate, ExplanationResult

KIND = "rescored"
Source = Callable[[Path | None], "ExplanationResult | None"]


class RescoredExplanation:
    """CEI, under this editor, of the explanation another run chose (see the module docstring)."""

    def __init__(self, classifier: Any, mllm: Any, editor: Any, *, store: Any = None,
                 settings: InterventionSettings | None = None, source: Source,
                 source_label: str = "the first editor's run", prompts: InterventionPrompts | None = None) -> None:
        self.classifier = classifier
        self.mllm = mllm
        self.editor = editor
        self.store = store
        self.settings = settings or InterventionSettings()
        self.source = source
        self.source_label = source_label
        self.prompts = prompts or InterventionPrompts.load()
        self.last_artifacts: dict[str, Image.Image] = {}

    def __call__(self, image: str | os.PathLike | Image.Image, true_label: int | str,
                 ctx: JobContext | None = None) -> ExplanationResult:
        ctx = ctx or null_context()
        t_start = time.perf_counter()
        img, image_path, file_sha = load_input(image)
        fixed = self.source(image_path)
        if fixed is None or not fixed.explanation:
            raise NemoError(f"There is no explanation to re-score for this image in {self.source_label}.",
                            hint="Re-scoring tests the explanations chosen with the first editor: let those "
                                 "finish (or retry their failures) first.")
        units = UnitCache(self.store)
        tester = CounterfactualTester(self.classifier, self.mllm, self.editor, prompts=self.prompts,
                                      settings=self.settings)
        image_sha = image_hash(img)
        y = resolve_label(true_label, list(self.classifier.class_names))
        clf = classifier_part(self.classifier)
        key = unit_key("explanation", method=f"{fixed.method}+{KIND}", image_sha256=image_sha, true_index=y,
                       classifier=clf, explanation=fixed.explanation, source_key=fixed.result_key,
                       mllm=model_part(self.mllm.info), editor=model_part(self.editor.info),
                       settings=asdict(self.settings), prompts=self.prompts.versions(), app_version=__version__)
        stored = stored_result(units, key, ctx)
        if stored is not None:
            return stored
        self.last_artifacts = {"input": img}
        timings: dict[str, float] = {}
        t = time.perf_counter()
        sample = classify_query(ctx, tester, units, img, image_sha, clf, y, image_path, "Re-scoring")
        timings["classify"] = time.perf_counter() - t
        candidates = [Candidate(hypothesis=fixed.explanation)]
        _, transient = tester.test(ctx, units, img, image_sha, clf, sample, candidates, timings, self.last_artifacts)
        notes = [f"Re-scored: the explanation chosen in {self.source_label} "
                 f"(CEI {_fmt(fixed.cei)} there), tested again with this editor."]
        if candidates[0].error:
            notes.append(f"The re-scoring test failed: {candidates[0].error}")
        if transient:
            notes.append(INCOMPLETE_NOTE)
        timings["total"] = time.perf_counter() - t_start
        source_editor = ((fixed.manifest or {}).get("models") or {}).get("editor")
        result = ExplanationResult(
            method=fixed.method, sample=sample, explanation=fixed.explanation, selected_index=0,
            cei=candidates[0].cei, candidates=candidates, observations=list(fixed.observations or []),
            timings=timings, notes=notes,
            manifest={"method": fixed.method, "rescored": True, "app_version": __version__,
                      "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "complete": not transient,
                      "source": {"result_key": fixed.result_key, "label": self.source_label, "editor": source_editor,
                                 "cei": fixed.cei, "config": (fixed.manifest or {}).get("config")},
                      "models": {"classifier": model_manifest(self.classifier.info),
                                 "mllm": model_manifest(self.mllm.info), "editor": model_manifest(self.editor.info)},
                      "intervention": tester.kind, "edit": tester.edit_record(img),
                      "prompts": self.prompts.versions(), "settings": asdict(self.settings),
                      **run_record(image_path, file_sha, units)})
        if units.store is not None:
            result.result_key = key
            units.store.put(key, "explanation", result.to_dict(), dict(self.last_artifacts))
        return result


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"
