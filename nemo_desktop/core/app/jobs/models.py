"""Job functions that run models, shared by the GUI and the model worker process (Qt-free).

Each takes the `ModelSession` that holds the models first and a `JobContext` last, and its other arguments
and its return value are picklable: the GUI names them in a `JobSpec` (`core/app/worker/protocol.py`), which runs
either in the app's process or in the supervised model worker process (`core/app/worker`).

`explain_samples` runs with the session's current models (loading the defaults when none is in memory). Each
finished sample is passed on at once as a partial result, so the workbench shows it while the next one runs;
a failed sample is recorded and the others go on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_desktop.core.base.errors import ConfigError, JobCancelled, NemoError
from nemo_desktop.core.base.job_context import JobContext, describe_exception
from nemo_desktop.core.app.samples import Sample

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


def method_models(session, spec) -> list[str]:
    """The session's model kinds an explanation method runs with: the classifier, the MLLM it asks, and the image
    editor its interventions need (none for a zero-shot classifier, whose interventions rewrite prompts)."""
    needed = ["classifier"]
    if spec.needs_editor and not session.classifier_is_zero_shot():
        needed.append("editor")
    if spec.inputs.mllm != "none":
        needed.append("mllm")
    return needed


def method_run_problem(session, method_name: str, ctx: JobContext | None = None) -> str | None:
    """Why `method_name` cannot start with the session's models (a kind with none chosen, weights not on disk), in
    one sentence with what to do; None when it can. From the cache alone (the workbench and the drop dialog ask it
    before Run is offered, on the I/O lane)."""
    from nemo_desktop.core.registry.methods import get_method

    try:
        session.preflight(method_models(session, get_method(method_name)))
    except NemoError as exc:
        return f"{exc.message} {exc.hint or ''}".strip()
    return None


def explain_samples(session, method_name: str, config_values: dict, samples: list[Sample], reference: str | None,
                    ctx: JobContext) -> list[SampleOutcome]:
    """Explain each sample with `method_name`; raises when the only sample (or every sample) fails."""
    from nemo_desktop.core.registry.methods import get_method
    from nemo_desktop.core.registry import Components, build_analysis, config_params, make_config
    from nemo_desktop.core.registry.build import wanted_components

    if not samples:
        raise ConfigError("No sample to explain.", hint="Select images in the Dataset browser, or drop images on "
                                                        "the window.")
    spec = get_method(method_name)
    # The form offers every field of the method's config; values it does not know are the form's own state.
    known = {p.name for p in config_params(spec.config)}
    config = make_config(spec, {k: v for k, v in config_values.items() if k in known})
    session.preflight(method_models(session, spec))  # every missing model named at once, before any is loaded
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
    # browser's "Run CEI" tab draws it, like a `nemo bench` run.
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


def _record_item(store, run_id: str | None, i: int, outcome: SampleOutcome) -> None:
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


def diagnose_samples(session, method_name: str, samples: list[Sample], reference: str | None,
                     ctx: JobContext) -> list[SampleOutcome]:
    """The diagnosis dialog's run: `method_name` with the SciTX k / m of the settings (read where it runs)."""
    s = session.settings()
    return explain_samples(session, method_name, {"k": s.scitx.k, "m": s.scitx.m}, samples, reference, ctx)


@dataclass
class ImagePrediction:
    path: str
    top5: list = field(default_factory=list)  # ClassScore, most probable first
    error: str | None = None


@dataclass
class PredictionReport:
    classifier_id: str
    class_names: list[str]
    images: list[ImagePrediction]


def predict_images(session, paths: list[str], ctx: JobContext) -> PredictionReport:
    """Top-5 of each image with the current classifier (loading the default one if needed)."""
    from nemo_desktop.core.base.images import load_image
    from nemo_desktop.core.metrics.cei import top_k

    classifier = session.ensure("classifier", ctx)
    names = list(classifier.class_names)
    out = []
    for p in ctx.track(paths, stage="Classifying"):
        try:
            probs = classifier.predict_proba([load_image(p)])[0]
            out.append(ImagePrediction(p, top_k(probs, names, 5)))
        except NemoError as exc:
            out.append(ImagePrediction(p, error=exc.message))
    return PredictionReport(classifier.info.model_id, names, out)


def load_model(session, kind: str, ref: str, ctx: JobContext) -> str:
    """Load `ref` as the current model of `kind` (the Model manager's Load); returns the ref."""
    return session.load(kind, ref, ctx).ref


def unload_model(session, kind: str, ctx: JobContext) -> bool:
    """Release the current model of `kind` (the Model manager's Unload); False when none was loaded."""
    return session.unload(kind)


def restore_loaded(session, records: dict[str, dict], ctx: JobContext) -> dict[str, list]:
    """A new model process loads exactly the models its predecessor held (the supervisor's remembered
    `ModelSession.wanted()`), before the next job runs; see `ModelSession.restore`."""
    return session.restore(records, ctx)


REMEMBERED_KINDS = ("classifier", "mllm", "editor")


def why_not_restorable(session, kind: str, ref: str) -> str | None:
    """None when `ref` can be loaded from the disk alone, else a short reason (Qt-free; no network)."""
    from nemo_desktop.core.models.catalog import get_entry
    from nemo_desktop.core.models.downloads import entry_status

    from nemo_desktop.core.app.session import ENDPOINT_PREFIX

    if ref.startswith(ENDPOINT_PREFIX):
        name = ref[len(ENDPOINT_PREFIX):]
        return None if session.settings().endpoint(name) is not None else f"the endpoint '{name}' is not configured"
    try:
        entry = get_entry(ref)
    except Exception:  # noqa: BLE001 - a <family>:<source> ref: restorable when its source is a path on disk
        source = ref.partition(":")[2]
        for prefix in ("local-dir:", "checkpoint:"):
            if source.startswith(prefix):
                source = source[len(prefix):].rpartition(":")[2] if prefix == "checkpoint:" else source[len(prefix):]
        return None if source and Path(source).expanduser().exists() else "its weights are not on disk"
    status = entry_status(entry).status
    if status in ("downloaded", "local"):
        return None
    return {"not downloaded": "its weights are not downloaded", "partial": "its download is incomplete",
            "missing": "its weights are no longer on disk"}.get(status, f"its weights are {status}")


def restore_models(session, wanted: dict[str, str], ctx) -> dict[str, list]:
    """Load each remembered model whose weights are on disk (never downloading); the others are skipped with a
    reason. Runs on the GPU lane. {"restored": [(kind, ref)], "skipped": [(kind, ref, reason)]}."""
    from nemo_desktop.core.base.errors import JobCancelled

    out: dict[str, list] = {"restored": [], "skipped": []}
    for kind in REMEMBERED_KINDS:
        ref = wanted.get(kind)
        if not ref:
            continue
        reason = why_not_restorable(session, kind, ref)
        if reason is None:
            try:
                session.load(kind, ref, ctx, local_only=True)
                out["restored"].append((kind, ref))
                continue
            except JobCancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - a start-up restore never fails loudly: it says why, quietly
                reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        out["skipped"].append((kind, ref, reason))
    return out


def prepare_and_load_demo(session, paths, ctx):
    """Build (or reuse) the demo, then load its classifier through the ordinary loader."""
    from nemo_desktop.core.demo import CLASSIFIER_ID, prepare_demo

    # One bar for the whole job: each stage fills its share, so it neither refills nor sits at 100 % while the
    # held-out digits are measured and the classifier is loaded.
    setup = prepare_demo(paths, ctx.stages("", 0.0, 0.98, DEMO_STAGE_WEIGHTS))
    session.load("classifier", CLASSIFIER_ID, ctx.sub("Loading the classifier", 0.98, 1.0), local_only=True)
    ctx.progress("Demo ready", 1, 1)
    return setup


# Relative cost of the demo's stages, measured by benchmarks/progress_truth.py (seconds on 2 busy CPU cores: writing
# 4.5, rendering 1.6, training 11.7, measuring 0.7, loading the classifier 0.2): the time left the bar derives from
# them is then right from the first stage on (with writing at 1 of 24, it said six times the real time).
DEMO_STAGE_WEIGHTS = {"Writing the demo images": 4.5, "Rendering the training digits": 1.6,
                      "Training the demo classifier": 11.7, "Measuring on held-out digits": 0.7}


def memory_profile_advice(session, name: str | None, ctx: JobContext) -> dict:
    """The profile that fits this machine's GPU, and whether `name` holds the models (`ModelSession.profile_advice`);
    run in the model process, which holds torch and sees the GPU."""
    return session.profile_advice(name)


def use_local_server(session, url: str, ctx: JobContext | None = None):
    """Check the OpenAI-compatible server at `url` and make it the default MLLM: the endpoint LOCAL_SERVER in the
    settings (its model: the one it already named when still served, else the first the server lists; its key
    reference kept). Returns (ServerCheck, settings). Nothing is saved when the check fails."""
    from nemo_desktop.core.models.local_server import LOCAL_SERVER, check_server
    from nemo_desktop.core.app.session import ENDPOINT_PREFIX
    from nemo_desktop.core.store.settings import Endpoint

    before = session.settings().endpoint(LOCAL_SERVER)
    check = check_server(url, before.api_key_ref if before else None)
    model = before.model if before is not None and before.model in check.models else check.models[0]

    def change(s):
        endpoint = Endpoint(name=LOCAL_SERVER, base_url=check.base_url, model=model,
                            api_key_env=before.api_key_env if before else None)
        s.endpoints = [e for e in s.endpoints if e.name != LOCAL_SERVER] + [endpoint]
        s.models.mllm = ENDPOINT_PREFIX + LOCAL_SERVER

    return check, session.update_settings(change)
