"""Running any registered dataset / model / fit analysis from the app, and showing its result (Qt-free: jobs).

Everything comes from the registry entry: the components it declares (`Inputs`), what it runs on
(`core/registry/data_inputs.py`), its settings (the config's fields) and its report section. So a new analysis
appears on the Analyses page with nothing written for the GUI.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from nemo_desktop.core.base.job_context import JobContext

PAGE_KINDS = ("dataset", "model", "fit")
# Per-sample analyses that are explanation methods (ExplanationResult) have the Explanation workbench; the other
# per-sample analyses (competency-cf: an image plus a fitted estimator) get this page, with an image as data.
SESSION_KINDS = ("classifier", "mllm", "editor")  # roles the session keeps a current model for
NONE = ""  # a component left out (optional roles) or "the current / default model" (session roles)


@dataclass
class PageData:
    """What the page offers for one analysis: the analysis, the stored choices of its data, and per
    component role the catalog ids the user may pick from; with what `run_problem` needs to tell, without
    touching the disk, whether a run can start (which models are loaded, needed, and on disk)."""

    spec: Any
    data_choices: list  # DataChoice
    model_choices: dict[str, list[str]]
    fitted_choices: list[tuple[str, str]]  # (result key, label) of the fit analysis it uses
    current: dict[str, str]  # session kind -> ref in memory or the default
    loaded: dict[str, str] = field(default_factory=dict)  # role -> ref of the model the session holds for it
    loaded_zero_shot: bool = False  # whether the session's classifier classifies by text prompts
    zero_shot_refs: frozenset = frozenset()  # catalog classifier ids that do
    # The models the analysis loads by default when a role is left empty (its spec's default_components), for a
    # classifier that is zero-shot (True) or not (False): role -> ref. Such a role is required, not optional.
    implied: dict[bool, dict[str, str]] = field(default_factory=dict)
    weights: dict[str, str] = field(default_factory=dict)  # catalog ref -> entry_status (downloaded, ...)
    # role -> {catalog ref of the role's kind that lacks the capability the role needs: why}
    unfit: dict[str, dict[str, str]] = field(default_factory=dict)


def classifier_zero_shot(page: PageData, chosen: dict[str, str]) -> bool:
    ref = resolved_ref(page, "classifier", chosen)
    if ref is None:
        return False
    if ref == page.loaded.get("classifier"):
        return page.loaded_zero_shot
    return ref in page.zero_shot_refs


def _implied(page: PageData, chosen: dict[str, str]) -> dict[str, str]:
    wanted = page.implied.get(classifier_zero_shot(page, chosen), {})
    return {role: ref for role, ref in wanted.items() if not page.loaded.get(role)}


def effective_need(page: PageData, role: str, chosen: dict[str, str]) -> str:
    """'required' or 'optional' as the page must say it: a role the analysis fills with a default model when it is
    left empty (e.g. failure-modes' joint-space embedder for a classifier that is not one) is required; an
    editor needed for image interventions is required unless the classifier is zero-shot."""
    need = page.spec.inputs.need(role)
    if need == "interventions":
        return "optional" if classifier_zero_shot(page, chosen) else "required"
    if need == "optional" and role in _implied(page, chosen):
        return "required"
    return need


def resolved_ref(page: PageData, role: str, chosen: dict[str, str]) -> str | None:
    """The model a run would use for `role` with these choices (None: none)."""
    ref = chosen.get(role) or NONE
    if ref:
        return ref
    need = page.spec.inputs.need(role)
    if role in SESSION_KINDS:
        if need == "required" or need == "interventions":
            return page.current.get(role) or None
        return None
    if page.loaded.get(role):
        return page.loaded[role]
    if role == "classifier":
        return None
    wanted = page.implied.get(classifier_zero_shot(page, chosen), {})
    return wanted.get(role)


_NOT_ON_DISK = ("not downloaded", "partial", "missing")


def run_problem(page: PageData | None, chosen: dict[str, str], data: str | None) -> str | None:
    """Why Run cannot start with these inputs (one sentence with what to do), or None. Pure: reads no file, so
    the page calls it on every change of an input (the folder's existence is checked by the run itself)."""
    from nemo_desktop.core.registry.data_inputs import data_prompt
    from nemo_desktop.core.registry.spec import ROLE_LABELS, in_sentence

    if page is None:
        return "Choose an analysis in the list."
    spec = page.spec
    from nemo_desktop.core.base.extras import available
    from nemo_desktop.core.models.family_extras import extra_for_ref

    for extra in spec.extras:
        if not available(extra):
            return f"This analysis needs the '{extra}' extra: pip install 'nemo-desktop[{extra}]', then restart."
    label, how = data_prompt(spec)
    if how == "store" and not data:
        what = in_sentence(label)
        todo = "build one with `nemo index FOLDER`" if spec.inputs.data == "index" else "run a benchmark first"
        return f"There is no {what} in the results store yet: {todo}."
    if how in ("folder", "file") and not (data or "").strip():
        return f"Choose the {in_sentence(label)} to run on."
    for role in spec.inputs.used():
        name = in_sentence(ROLE_LABELS.get(role, role))
        if role == "fitted":
            if not chosen.get("fitted"):
                return f"Fit '{spec.inputs.fitted}' first: no stored fit to use yet."
            continue
        if role == "reference":
            continue
        need = effective_need(page, role, chosen)
        ref = resolved_ref(page, role, chosen)
        if ref is None:
            if need == "required":
                return f"Choose the {name}."
            continue
        if ref in page.unfit.get(role, {}):
            return f"The {name} {ref} {page.unfit[role][ref]}: choose one from the list."
        if ref == page.loaded.get(role):
            continue  # in memory
        extra = extra_for_ref(ref, role) if role in ("editor", "generator") else None
        if extra:
            return (f"The {name} {ref} needs the '{extra}' extra: pip install 'nemo-desktop[{extra}]', then "
                    "restart, or choose another.")
        status = page.weights.get(ref)
        if status in _NOT_ON_DISK:
            where = "missing on disk" if status == "missing" else f"{status}"
            return (f"The {name} {ref} is {where}: download it with `nemo models download {ref}` (or Download in the "
                    f"Model manager), or choose another.")
    return None


def on_page(spec: Any) -> bool:
    """Dataset, model and fit analyses, and per-sample analyses that are not workbench explanation methods."""
    from nemo_desktop.core.base.records import ExplanationResult

    return spec.kind in PAGE_KINDS or (spec.kind == "sample" and spec.result is not ExplanationResult)


def list_page_analyses() -> list[Any]:
    from nemo_desktop.core.registry import get_analysis, list_analyses

    return [get_analysis(n) for n in list_analyses() if on_page(get_analysis(n))]


def image_analyses() -> list[tuple[str, str]]:
    """(name, description) of the page's analyses that run on one image: what an image can be sent to."""
    return [(s.name, s.description) for s in list_page_analyses() if s.inputs.data == "image"]


def generator_choices(spec: Any) -> list[str]:
    """What the `generator` picker offers: a condition source (the built-in ones, or a catalog text-to-image
    model), or only the text-to-image models for an analysis whose generator renders text (a fix's sentence)."""
    from nemo_desktop.core.models.catalog import list_catalog

    text_to_image = [f"t2i:{e.id}" for e in list_catalog("generator")]
    return text_to_image if spec.generator_renders_text else ["digits", "digits-ink"] + text_to_image


def page_data(session, name: str, ctx: JobContext) -> PageData:
    from nemo_desktop.core.registry import get_analysis
    from nemo_desktop.core.registry.data_inputs import ROLE_CATALOG_KIND, data_choices, role_catalog_choices

    spec = get_analysis(name)
    store = session.store()
    models: dict[str, list[str]] = {}
    unfit: dict[str, dict[str, str]] = {}
    for role in spec.inputs.used():
        if role in ROLE_CATALOG_KIND:
            models[role], unfit[role] = role_catalog_choices(role)
    if "generator" in spec.inputs.used():
        models["generator"] = generator_choices(spec)
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
    wanted = session.wanted_refs()  # a model the model process is loading again counts as current, not the default
    current = {k: loaded.get(k) or wanted.get(k) or session.default_ref(k) or "" for k in SESSION_KINDS}
    # Other roles (a second classifier, an embedder) held by the session are what a run falls back to: say so.
    current.update({role: loaded[role] for role in spec.inputs.used() if role not in current and loaded.get(role)})
    page = PageData(spec, data_choices(spec, store), models, fitted, current, loaded=dict(loaded), unfit=unfit)
    _model_facts(session, page)
    return page


def _model_facts(session, page: PageData) -> None:
    """Fill in what run_problem needs: zero-shot classifiers, implied default models, weights on disk."""
    from types import SimpleNamespace

    from nemo_desktop.core.models.catalog import get_entry, list_catalog
    from nemo_desktop.core.models.downloads import entry_status
    from nemo_desktop.core.app.session import ENDPOINT_PREFIX, ZERO_SHOT_FAMILIES

    spec = page.spec
    page.loaded_zero_shot = bool((session.facts("classifier") or {}).get("zero_shot"))  # the worker's, there
    page.zero_shot_refs = frozenset(e.id for e in list_catalog("classifier") if e.family in ZERO_SHOT_FAMILIES)
    if spec.default_components is not None:
        from nemo_desktop.core.registry import make_config

        try:
            config = make_config(spec, {}) if spec.config else None
        except Exception:  # noqa: BLE001 - a config that needs values: the hook gets None, as for scripts
            config = None
        for zero_shot in (False, True):
            wanted = spec.default_components(config, SimpleNamespace(zero_shot=zero_shot))
            page.implied[zero_shot] = {role: ref for role, (ref, _kind) in wanted.items()
                                       if role in spec.inputs.used()}
    refs = {r for choices in page.model_choices.values() for r in choices}
    refs |= {r for wanted in page.implied.values() for r in wanted.values()}
    refs |= {page.current[k] for k in SESSION_KINDS if page.current.get(k) and not page.loaded.get(k)}
    for ref in sorted(refs):
        if not ref or ref.startswith(ENDPOINT_PREFIX):
            continue
        entry_id = ref[len("t2i:"):].split("@")[0] if ref.startswith("t2i:") else ref  # a catalog generator
        try:
            page.weights[ref] = entry_status(get_entry(entry_id)).status
        except Exception:  # noqa: BLE001 - not a catalog id (a path, family:source): its loader checks it
            continue


def _condition_source(session, ref: str, ctx: JobContext) -> Any:
    """The `generator` role is a condition source (model differences): 'digits', 'dataset:CSV' or 't2i:ID[@FILE]',
    the last loaded from the catalog's generators with the session's device settings."""
    from nemo_desktop.core.analyses.model_diff.sources import open_condition_source

    return open_condition_source(ref, lambda model: session.load("generator", model, ctx,
                                                                 catalog_kind="generator").model)


def run_page_analysis(session, name: str, values: dict, chosen: dict[str, str], data: str | None,
                      ctx: JobContext) -> Any:
    """Build `name` from the session's models and the page's choices, and run it on `data`. Its errors name the
    page's fields and pickers, not the command line's flags (registry/page_words.py)."""
    from nemo_desktop.core.base.errors import NemoError
    from nemo_desktop.core.registry import get_analysis
    from nemo_desktop.core.registry.page_words import in_page_words

    try:
        return _run_page_analysis(session, name, values, chosen, data, ctx)
    except NemoError as exc:
        spec = get_analysis(name)
        exc.message, exc.hint = in_page_words(exc.message, spec), in_page_words(exc.hint, spec)
        exc.args = (exc.message, *exc.args[1:])
        raise


def _run_page_analysis(session, name: str, values: dict, chosen: dict[str, str], data: str | None,
                       ctx: JobContext) -> Any:
    from nemo_desktop.core.registry import Components, build_analysis, config_params, get_analysis, make_config
    from nemo_desktop.core.registry.build import wanted_components
    from nemo_desktop.core.registry.data_inputs import ROLE_CATALOG_KIND, call_args

    spec = get_analysis(name)
    from nemo_desktop.core.base.extras import require_for_spec

    require_for_spec(spec)  # a missing extra is named before anything loads
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


def stored_page_result(store, name: str, key: str, ctx: JobContext) -> Any:
    """Analysis `name`'s result stored under `key`, as its result class reads it back (the page shows its last
    result again after a restart); None when it is no longer stored or cannot be read."""
    from nemo_desktop.core.registry import get_analysis

    ctx.progress("Reading the last result", 0, None)
    spec = get_analysis(name)
    stored = store.get(key)
    if stored is None or spec.result is None or not hasattr(spec.result, "from_dict"):
        return None
    try:
        result = spec.result.from_dict(stored.payload)
    except Exception:  # noqa: BLE001 - written by another version: the page starts without it
        return None
    for attr in ("result_key", "key"):
        try:
            if getattr(result, attr, None) is None:
                setattr(result, attr, key)
        except AttributeError:  # a read-only property
            continue
    return result


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
