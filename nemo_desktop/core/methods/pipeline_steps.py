"""The steps every explanation pipeline (SciTX and the baselines) takes around its own work: answer from a
complete stored result (the global explanation and its score too), classify the query and refuse a correct
prediction, select the candidate with the largest CEI and note when that selection says little."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from PIL import Image

from ..base.errors import NemoError
from ..base.job_context import JobContext
from ..metrics.cei import best_candidate
from .edit_check import DEFAULT_NOISE_FLOOR, select
from .intervention import CounterfactualTester, UnitCache, sample_info
from ..base.records import Candidate, ExplanationResult, SampleInfo

INCOMPLETE_NOTE = ("Some steps failed with an error (see the candidates); the result is marked incomplete and a "
                   "re-run retries those steps.")


def stored_result(units: UnitCache, key: str, ctx: JobContext, result_type: type = ExplanationResult) -> Any:
    """The record stored under `key` as a `result_type` (with `from_dict` and `result_key`) if its manifest
    says it is complete, so that a re-run makes no model call; else None."""
    done = units.get(key)
    if done is None or not done.payload.get("manifest", {}).get("complete"):
        return None
    ctx.progress("Loaded from the results store", 1, 1)
    result = result_type.from_dict(done.payload)
    result.result_key = key
    return result


def classify_query(ctx: JobContext, tester: CounterfactualTester, units: UnitCache, img: Image.Image,
                   image_sha: str, clf: dict, y: int, image_path: Path | None, method: str, *,
                   with_embedding: bool = False) -> SampleInfo:
    """Classify the image (cached) and report it as the "sample" partial; a correct prediction leaves
    nothing to explain. `with_embedding`: the method retrieves, so the same forward pass stores the query's
    embedding too."""
    ctx.check_cancelled()
    ctx.progress("Classifying", 0, 1)
    probs = tester.classify(units, img, image_sha, clf, with_embedding=with_embedding)
    names = list(tester.classifier.class_names)
    sample = sample_info(probs, names, y, image_path, image_sha)
    ctx.progress("Classifying", 1, 1)
    ctx.partial({"kind": "sample", "sample": sample})
    if sample.pred_index == y:
        raise NemoError(f"The classifier predicts the true class '{names[y]}' for this image "
                        f"(p = {probs[y]:.3f}); there is no error to explain.",
                        hint=f"{method} explains misclassifications: pick an image the classifier gets wrong, "
                             "or check the true label.")
    return sample


def select_by_cei(candidates: Sequence[Candidate], notes: list[str] | None = None,
                  noun: str = "candidate", *, selection: str = "cei",
                  flag_threshold: float | None = None, noise_floor: float = DEFAULT_NOISE_FLOOR,
                  control: Any = None, semantic: Any = None) -> int | None:
    """CEI argmax, first on ties (the validation module of SciTX, Algorithm 1 stage 4). With `flag_threshold`,
    whole-image edits are flagged first and `selection` applies (methods/edit_check.py), with the reference
    `control` (methods/edit_control.py) and the MLLM's `semantic` check (methods/edit_semantic.py) when given.
    With `notes`, adds a
    note when no candidate could be tested or when even the best intervention did not help."""
    if flag_threshold is not None:
        best = select(candidates, selection, flag_threshold, notes, noun, noise_floor, control, semantic)
    else:
        best = best_candidate(candidates)
    if notes is None:
        return best
    if best is None:
        if not any(c.cei is not None and c.error is None for c in candidates):
            notes.append(f"No {noun} could be tested, so none was selected; see each candidate's error.")
    elif candidates[best].cei is not None and candidates[best].cei <= 0:
        notes.append(f"No intervention raised the true-class probability (best CEI {candidates[best].cei:+.2f}); "
                     f"the selected {noun} is the least harmful one and may not name the cause.")
    return best


def run_record(image_path: Path | None, file_sha: str | None, units: UnitCache) -> dict[str, Any]:
    """The manifest entries on the input and on the work done (computed vs reused units)."""
    return {"input_file": str(image_path) if image_path else None, "input_file_sha256": file_sha,
            "units": {"computed": units.computed, "reused": units.reused}}
