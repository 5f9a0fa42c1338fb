"""Running any registered dataset / model / fit analysis from the app, and showing its result (Qt-free: jobs).

Everything comes from the registry entry: the components it declares (`Inputs`), what it runs on
(`core/registry/data_inputs.py`), its settings (the config's fields) and its report section. So a new analysis
appears on the Analyses page with nothing written for the GUI.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from nemo_desktop.core.jobs import JobContext

PAGE_KINDS = ("dataset", "model", "fit")
# Per-sample analyses that are explanation methods (ExplanationResult) have the Explanation workbench; the other
# per-sample analyses (competency-cf: an image plus a fitted estimator) get this page, with an image as data.
SESSION_KINDS = ("classifier", "mllm", "editor")  # roles the session keeps a current model for
NONE = ""  # a component left out (optional roles) or "the current / default model" (session roles)


@dataclass
class PageData:
    """What the page offers for one analysis: the analysis, the stored choices of its data, and per
    component role the catalog ids the user may pick from."""

    spec: Any
    data_choices: list  # DataChoice
    model_choices: dict[str, list[str]]
    fitted_choices: list[tuple[str, str]]  # (result key, label) of the fit analysis it uses
    current: dict[str, str]  # session kind -> ref in memory or the default


def on_page(spec: Any) -> bool:
    """Dataset, model and fit analyses, and per-sample analyses that are not workbench explanation methods."""
    from nemo_desktop.core.methods.result import ExplanationResult

    return spec.kind in PAGE_KINDS or (spec.kind == "sample" and spec.result is not ExplanationResult)


def list_page_analyses() -> list[Any]:
    from nemo_desktop.core.registry import get_analysis, list_analyses

    return [get_analysis(n) for n in list_analyses() if on_page(get_analysis(n))]


def image_analyses() -> list[tuple[str, str]]:
    """(name, description) of the page's analyses that run on one image: what an image can be sent to."""
    return [(s.name, s.description) for s in list_page_analyses() if s.inputs.data == "image"]


def page_data(session, name: str, ctx: JobContext) -> PageData:
    from nemo_desktop.core.models.catalog import list_catalog
    from nemo_desktop.core.registry import get_analysis
    from nemo_desktop.core.registry.data_inputs import ROLE_CATALOG_KIND, data_choices

    spec = get_analysis(name)
    store = session.store()
    models: dict[str, list[str]] = {}
    for role in spec.inputs.used():
        kind = ROLE_CATALOG_KIND.get(role)
        if kind is not None:
            models[role] = [e.id for e in list_catalog(kind)]
    if "generator" in spec.inputs.used():  # a condition source: the built-in ones, or a catalog text-to-image model
        models["generator"] = ["digits", "digits-ink"] + [f"t2i:{e.id}" for e in list_catalog("generator")]
    fitted: list[tuple[str, str]] = []
    if spec.inputs.fitted:  # the fit analysis' stored results (kept under its name as the store kind)
        seen = set()
        for r in store.find(kind=spec.inputs.fitted, limit=200) + store.find(analysis=spec.inputs.fitted, limit=200):
            if r.key not in seen:
                seen.add(r.key)
                model = ((r.payload.get("manifest") or {}).get("classifier") or {}).get("id")
                fitted.append((r.key, f"{r.key[:12]} ({datetime.fromtimestamp(r.created_at):%Y-%m-%d %H:%M}"
                                      + (f", for {model})" if model else ")")))
    loaded = session.loaded()
    current = {k: loaded.get(k) or session.default_ref(k) or "" for k in SESSION_KINDS}
    # Other roles (a second classifier, an embedder) held by the session are what a run falls back to: say so.
    current.update({role: loaded[role] for role in spec.inputs.used() if role not in current and loaded.get(role)})
    return PageData(spec, data_choices(spec, store), models, fitted, current)


def _condition_source(session, ref: str, ctx: JobContext) -> Any:
    """The `generator` role is a condition source (model differences): 'digits', 'dataset:CSV' or 't2i:ID[@FILE]',
    the last loaded from the catalog's generators with the session's device settings."""
    from nemo_desktop.core.analyses.model_diff.sources import open_condition_source

    return open_condition_source(ref, lambda model: session.load("generator", model, ctx,
                                                                 catalog_kind="generator").model)


def run_page_analysis(session, name: str, values: dict, chosen: dict[str, str], data: str | None,
                      ctx: JobContext) -> Any:
    """Build `name` from the session's models and the page's choices, and run it on `data`."""
    from nemo_desktop.core.registry import Components, build_analysis, config_params, get_analysis, make_config
    from nemo_desktop.core.registry.build import wanted_components
    from nemo_desktop.core.registry.data_inputs import ROLE_CATALOG_KIND, call_args

    spec = get_analysis(name)
    args = call_args(spec, data)  # a missing folder fails before any model is loaded
    known = {p.name for p in config_params(spec.config)} if spec.config else set()
    config = make_config(spec, {k: v for k, v in values.items() if k in known})
    store = session.store()
    models = ctx.sub("Models", 0.0, 0.1)
    components = Components(store=store)
    for role in spec.inputs.used():
        ref, need = chosen.get(role) or NONE, spec.inputs.need(role)
        if role in ("reference", "fitted"):
            continue
        if role in SESSION_KINDS:
            if ref:
                setattr(components, role, session.load(role, ref, models).model)
            elif need == "required" or (need == "interventions" and not components.zero_shot):
                setattr(components, role, session.ensure(role, models))
        elif role == "generator" and ref:
            components.generator = _condition_source(session, ref, models)
        elif ref:
            setattr(components, role, session.load(role, ref, models, catalog_kind=ROLE_CATALOG_KIND[role]).model)
        elif session.get(role) is not None:  # loaded for this role before (or put there by a script)
            setattr(components, role, session.get(role))
    for role, (ref, kind) in wanted_components(spec, config, components).items():
        setattr(components, role, session.load(role, ref, models, catalog_kind=kind).model)
    if spec.inputs.need("reference") != "none" and chosen.get("reference"):
        components.reference = session.reference_index(chosen["reference"], components.classifier)
    if spec.inputs.fitted and chosen.get("fitted"):
        components.fitted = chosen["fitted"]  # the stored key: the analysis loads its fit for its classifier
    analysis = build_analysis(spec, components, config)
    return analysis(*args, ctx.sub(spec.name, 0.1, 1.0))


def result_html(result: Any, store, ctx: JobContext) -> str:
    """The result as its report section renders it (model text escaped there)."""
    from nemo_desktop.core.reports import render_html
    from nemo_desktop.core.reports.sections import build_result_report

    return render_html(build_result_report(result, store, ctx=ctx))


def export_result(result: Any, store, path: Path, ctx: JobContext) -> Path:
    """The result's report as HTML or PDF (by the file's suffix), written atomically."""
    from nemo_desktop.core.reports import export_report

    fmt = "pdf" if Path(path).suffix.lower() == ".pdf" else "html"
    return export_report(result, store, fmt, path, ctx=ctx)
