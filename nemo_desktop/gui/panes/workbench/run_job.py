"""Running an explanation method on samples, and reading results back (Qt-free: jobs).

`explain_samples` runs on the GPU lane with the session's current models (loading the defaults when none
is in memory). Each finished sample is passed on at once as a partial result, so the workbench shows it
while the next one runs; a failed sample is recorded and the others go on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_desktop.core.errors import ConfigError, JobCancelled, NemoError
from nemo_desktop.core.jobs import JobContext, describe_exception

from ...samples import Sample

AUTO = "auto"  # reference index: the most recent one built with the current classifier


# Relative cost of the stages of the per-image methods (SciTX and the baselines, core/methods), so the bar of a
# batch run moves forward through an image's stages. Estimates, not measurements: diffusion edits dominate.
STAGE_WEIGHTS = {"Classifying": 1, "Retrieving observations": 1, "Captioning observations": 3, "Grad-CAM": 1,
                 "Finding the reference image": 1, "Retrieving error sentences": 1, "Generating hypotheses": 3,
                 "Writing interventions": 1, "Editing image": 8, "Scoring": 1}


@dataclass
class SampleOutcome:
    sample: Sample
    result: Any = None  # ExplanationResult
    error: dict | None = None


def default_reference(store, classifier) -> str | None:
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    model_id = classifier.info.model_id
    return next((r["index_id"] for r in ReferenceIndex.list(store) if r["classifier_id"] == model_id
                 and r["entries"]), None)


def list_references(store) -> list[dict]:
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    return ReferenceIndex.list(store)


def explain_samples(session, method_name: str, config_values: dict, samples: list[Sample], reference: str | None,
                    ctx: JobContext) -> list[SampleOutcome]:
    """Explain each sample with `method_name`; raises when the only sample (or every sample) fails."""
    from nemo_desktop.core.methods.registry import get_method
    from nemo_desktop.core.registry import Components, build_analysis, config_params, make_config
    from nemo_desktop.core.registry.build import wanted_components

    if not samples:
        raise ConfigError("No sample to explain.", hint="Select images in the Dataset browser, or drop images on "
                                                        "the window.")
    spec = get_method(method_name)
    # The form offers every field of the method's config; values it does not know are the form's own state.
    known = {p.name for p in config_params(spec.config)}
    config = make_config(spec, {k: v for k, v in config_values.items() if k in known})
    needed = ["classifier"]
    if spec.needs_editor and not session.classifier_is_zero_shot():
        needed.append("editor")
    if spec.inputs.mllm != "none":
        needed.append("mllm")
    session.preflight(needed)  # every missing model named at once, before any is loaded
    models = ctx.sub("Models", 0.0, 0.05)
    components = Components(classifier=session.ensure("classifier", models), store=session.store())
    if spec.needs_editor and not components.zero_shot:
        components.editor = session.ensure("editor", models)
    if spec.inputs.mllm != "none":
        components.mllm = session.ensure("mllm", models)
    for role, (ref, kind) in wanted_components(spec, config, components).items():
        setattr(components, role, session.load(role, ref, models, catalog_kind=kind).model)
    if spec.inputs.reference != "none":
        index_id = default_reference(components.store, components.classifier) if reference == AUTO else reference
        ctx.progress("Loading the reference index", 0, None)
        components.reference = session.reference_index(index_id, components.classifier)
    method = build_analysis(spec, components, config)

    outcomes: list[SampleOutcome] = []
    n = len(samples)
    # A batch (several images) is kept as a run of the results store: the Report exporter lists it and the
    # browser's "CEI of a run" tab draws it, like a `nemo bench` run.
    run_id = _start_batch_run(components.store, method_name, components.classifier, n) if n > 1 else None
    try:
        _explain_each(method, samples, outcomes, run_id, components.store, ctx)
    except JobCancelled:
        _end_batch_run(components.store, run_id, "cancelled")
        raise
    _end_batch_run(components.store, run_id, "done")
    if all(o.error for o in outcomes):
        first = outcomes[0].error
        raise NemoError(f"None of the {n} images could be explained. First: {first['message']}",
                        hint=first.get("hint"), detail="\n\n".join(f"{o.sample.name}: {o.error['message']}"
                                                                   for o in outcomes))
    return outcomes


BATCH_RUN_KIND = "batch"


def _start_batch_run(store, method_name: str, classifier, n: int) -> str | None:
    try:
        return store.create_run(BATCH_RUN_KIND, {"method": method_name, "images": n,
                                                 "classifier": {"id": classifier.info.model_id}})
    except NemoError:  # the run record is a convenience: the diagnosis goes on without it
        return None


def _end_batch_run(store, run_id: str | None, status: str) -> None:
    if run_id is not None:
        try:
            store.set_run_status(run_id, status)
        except NemoError:
            pass


def _record_item(store, run_id: str | None, i: int, outcome: "SampleOutcome") -> None:
    if run_id is None:
        return
    item_id = f"{i + 1:04d} {Path(outcome.sample.path).name}"
    try:
        if outcome.error:
            store.add_run_item(run_id, item_id, None, "failed", outcome.error)
        else:
            status = outcome.result.outcome()[0] if hasattr(outcome.result, "outcome") else "done"
            store.add_run_item(run_id, item_id, outcome.result.result_key, status)
    except NemoError:
        pass


def _explain_each(method, samples: list[Sample], outcomes: list, run_id: str | None, store,
                  ctx: JobContext) -> None:
    n = len(samples)
    for i, sample in enumerate(samples):
        ctx.check_cancelled()
        # Each image covers its share of the job's progress bar (after the 5 % of model loading).
        sub = ctx.stages(f"Image {i + 1} of {n}" if n > 1 else Path(sample.path).name, 0.05 + 0.95 * i / n,
                         0.05 + 0.95 * (i + 1) / n, STAGE_WEIGHTS)
        try:
            result = method(sample.path, sample.true_label, sub)
        except JobCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - this sample failed; the others go on
            if n == 1:
                raise
            outcome = SampleOutcome(sample, error=describe_exception(exc))
        else:
            outcome = SampleOutcome(sample, result=result)
        outcomes.append(outcome)
        _record_item(store, run_id, i, outcome)
        ctx.partial({"kind": "outcome", "index": i, "outcome": outcome})


@dataclass
class StoredSummary:
    key: str
    created_at: float
    method: str
    image: str
    image_sha256: str
    true_name: str
    pred_name: str
    cei: float | None
    explanation: str | None
    models: dict[str, str] = field(default_factory=dict)  # role (classifier, mllm, editor) -> model id


def list_results(store, limit: int = 500) -> list[StoredSummary]:
    out = []
    for r in store.find(kind="explanation", limit=limit):
        p, s = r.payload, r.payload.get("sample", {})
        models = {role: m["id"] for role, m in ((p.get("manifest") or {}).get("models") or {}).items()
                  if isinstance(m, dict) and m.get("id")}
        out.append(StoredSummary(r.key, r.created_at, p.get("method", "?"), Path(s.get("image_path") or "").name
                                 or "(image)", s.get("image_sha256", ""), s.get("true_name", "?"),
                                 s.get("pred_name", "?"), p.get("cei"), p.get("explanation"), models))
    return out


def results_for_sample(store, key: str) -> list:
    """The stored result `key` first, then the latest result of every other method on the same image."""
    first = store.get(key)
    if first is None:
        raise ConfigError("That result is no longer in the results store.",
                          hint="It may have been cleared (nemo cache clear); run the explanation again.")
    sha = first.payload.get("sample", {}).get("image_sha256")
    seen = {first.payload.get("method")}
    out = [first]
    if sha:
        for r in store.find(kind="explanation"):
            method = r.payload.get("method")
            if method not in seen and r.payload.get("sample", {}).get("image_sha256") == sha:
                seen.add(method)
                out.append(r)
    return out
