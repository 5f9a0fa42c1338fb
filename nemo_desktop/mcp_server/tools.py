"""The tools: their list (from the catalog and the analysis registry) and what each runs through `api`."""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .listing import MAX_PAGE, list_images
from .replies import RESULT_URI, ToolOutput
from .roots import _looks_like_path
from .schemas import _DEVICE, _IMAGES_FLAG, _ROLE_HELP, ToolDef, _coerce_settings, _obj, settings_schema

if TYPE_CHECKING:
    from .server import NemoMCP

_MODEL_ROLES = ("classifier", "classifier_b", "mllm", "editor", "embedder", "judge", "generator")


def all_tools() -> list[ToolDef]:
    """Every tool: the fixed ones, then one per registered analysis that is not an explanation method."""
    from ..core.registry.methods import get_method, list_methods
    from ..core.registry import get_analysis, list_analyses

    methods = list_methods()
    method_lines = "; ".join(f"{m}: {get_method(m).description.split('. ')[0].rstrip('.')}" for m in methods)
    tools = [
        ToolDef("list_models", "The models this server can load by id: the catalog (shipped and the user's "
                "entries) with each model's on-disk status, size and VRAM, the model families a "
                "'<family>:<source>' reference may name (plugins' too), and any plugin that was skipped.",
                _obj({"kind": {"type": "string", "enum": ["classifier", "mllm", "editor", "generator"],
                               "description": "only this kind of model"}}), _list_models, long=False,
                read_only=True),
        ToolDef("list_analyses", "Every registered analysis (explanation methods, dataset and model analyses, "
                "plugins' too) with the components it needs, what it runs on and its settings.",
                _obj({"kind": {"type": "string", "enum": ["sample", "dataset", "model", "fit"]}}),
                _list_analyses, long=False, read_only=True),
        ToolDef("predict", "A classifier's top-k classes for image files (paths inside the server's roots). "
                "Cost: loads the classifier once (seconds); then milliseconds per image on a GPU.",
                _obj({"images": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                 "description": "image file paths"},
                      "classifier": {"type": "string", "description": _ROLE_HELP["classifier"]},
                      "top_k": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 5},
                      "device": _DEVICE}, ["images", "classifier"]), _predict),
        ToolDef("explain", "Explain why a classifier got an image wrong with an explanation method and test "
                "each hypothesis by a counterfactual (CEI: how many points P(true) rose). Returns the "
                "explanation, its CEI, every candidate, the evidence image paths and the result key "
                f"(also the resource nemo://result/<key>). Methods: {method_lines}. Cost on one GPU: SciTX "
                "with a 7B MLLM and an image editor about 1-3 minutes per image (models load once); a "
                "re-run of the same image answers from the store.",
                _obj({"image": {"type": "string", "description": "the misclassified image file"},
                      "true_label": {"type": ["string", "integer"],
                                     "description": "its true class: a class name or index"},
                      "classifier": {"type": "string", "description": _ROLE_HELP["classifier"]},
                      "mllm": {"type": "string", "description": _ROLE_HELP["mllm"] +
                               " (required, except for error-retrieval without CEI)"},
                      "editor": {"type": "string", "description": _ROLE_HELP["editor"] +
                                 " (default: the catalog's paper default where the method edits images)"},
                      "reference": {"type": "string", "description": _ROLE_HELP["reference"]},
                      "method": {"type": "string", "enum": methods, "default": "scitx"},
                      "validate": {"type": "boolean", "default": False,
                                   "description": "a baseline's validated variant (M candidates, largest "
                                                  "CEI); SciTX always validates"},
                      "settings": settings_schema([get_method(m).config for m in methods]),
                      "include_images": _IMAGES_FLAG, "device": _DEVICE},
                     ["image", "true_label", "classifier"]), _explain),
        ToolDef("index_dataset", "Index a dataset (a folder of class sub-folders, or a CSV manifest, inside "
                "the server's roots) with a classifier: each image's prediction and embedding, stored. Returns "
                "the index id that explain's 'reference' and the index-based analyses (analysis_failure_modes) "
                "take. Incremental: a re-run indexes only new images. Cost: one classifier pass per image "
                "(milliseconds each on a GPU) plus decoding.",
                _obj({"dataset": {"type": "string", "description": "dataset folder, CSV manifest or fiftyone:NAME "
                                                                   "(its images inside the roots)"},
                      "classifier": {"type": "string", "description": _ROLE_HELP["classifier"]},
                      "device": _DEVICE}, ["dataset", "classifier"]), _index_dataset),
        ToolDef("list_images", "The image files in a folder inside the server's roots (default: every root), "
                "sorted by path, a page at a time (offset, limit): the paths predict, explain and the analyses "
                "take. A file that leads outside the roots (a link) is not listed; 'refused' counts and names "
                "them. Milliseconds for thousands of files.",
                _obj({"folder": {"type": "string", "description": "a folder inside the roots (default: each root)"},
                      "recursive": {"type": "boolean", "default": True, "description": "also list sub-folders"},
                      "offset": {"type": "integer", "minimum": 0, "default": 0,
                                 "description": "how many images to skip (the previous page's next_offset)"},
                      "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 100,
                                "description": "images in this page"}}), _list_images, long=False,
                read_only=True),
        ToolDef("list_indexes", "The reference indexes in the results store (id, dataset, classifier, "
                "entries, correctly classified), newest first.", _obj({}), _list_indexes, long=False,
                read_only=True),
        ToolDef("get_result", "A stored result by its key (or a unique prefix of at least 4 characters): "
                "its full data and the paths of its stored images.",
                _obj({"key": {"type": "string"}, "include_images": _IMAGES_FLAG}, ["key"]), _get_result,
                long=False, read_only=True),
        ToolDef("export_report", "Write the self-contained HTML or PDF report of a stored result (or a whole "
                "run) to a file inside the server's roots. Seconds for a result; a run's report may take "
                "minutes.",
                _obj({"key": {"type": "string", "description": "result key, key prefix or run id"},
                      "path": {"type": "string", "description": "the file to write (.html or .pdf)"},
                      "format": {"type": "string", "enum": ["html", "pdf"],
                                 "description": "default: from the file's suffix, else html"}},
                     ["key", "path"]), _export_report),
        ToolDef("export_table", "Write the per-image table of an indexed dataset for a classifier to a file inside "
                "the server's roots (.parquet, .csv or .jsonl): one row per image with every fact the store holds "
                "(prediction, top-k, competency and its low part, failure modes and their sentences, the newest "
                "explanation with its CEI and edit verdict, a fix's gained/lost images); columns are documented "
                "in docs/per-image-table.md and in the Parquet file. Seconds per 10^5 images; no model is loaded.",
                _obj({"dataset": {"type": "string", "description": "the indexed dataset (folder, CSV manifest or "
                                                                   "fiftyone:NAME) or a reference index id"},
                      "classifier": {"type": "string", "description": "the classifier id it was indexed with "
                                                                      "(needed when several were)"},
                      "path": {"type": "string", "description": "the file to write (.parquet, .csv or .jsonl)"},
                      "competency": {"type": "string", "description": "competency-score result key (default: "
                                                                      "the newest)"},
                      "failure_modes": {"type": "string", "description": "failure-modes result key (default: "
                                                                         "the newest on this index)"},
                      "fix": {"type": "string", "description": "fix result key (default: the newest)"}},
                     ["dataset", "path"]), _export_table),
    ]
    for name in list_analyses():
        spec = get_analysis(name)
        if name in methods:
            continue
        tools.append(_analysis_tool(spec))
    return tools


def _list_models(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api

    keep = ("id", "kind", "family", "status", "disk_size_bytes", "vram_bf16_gb", "recommended_gpu", "license",
            "gated", "paper_default", "description", "origin")
    models = [{k: m.get(k) for k in keep} for m in api.list_models(args.get("kind"))]
    return ToolOutput({"models": models, "families": api.list_families(args.get("kind")),
                       "skipped_plugins": [p for p in api.list_plugins() if not p["ok"]]})


def _list_analyses(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api

    return ToolOutput({"analyses": api.analyses(args.get("kind"))})


def _predict(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api
    from .replies import ToolError

    images, refused = [], []
    for p in args["images"]:  # per image: one outside the roots is refused with the reason, the others go on
        try:
            images.append(str(server.roots.check(p, "image")))
        except ToolError as exc:
            refused.append({"image": p, "error": {"message": exc.message, "hint": exc.hint}})
    if not images:
        first = refused[0]["error"]
        raise ToolError(first["message"] if len(refused) == 1 else
                        f"None of the {len(refused)} images may be read: {first['message']}", hint=first["hint"])
    classifier = server.model(args["classifier"], "classifier")
    preds = server.run_job(lambda: api.predict(images, classifier, top_k=int(args.get("top_k") or 5),
                                               device=args.get("device") or server.device, dtype=server.dtype,
                                               ctx=ctx), ctx)
    out = preds.to_dict()
    if refused:
        out["results"] = list(out.get("results", [])) + refused
    return ToolOutput(out)


def _list_images(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    folders = [server.roots.check(args["folder"], "folder")] if args.get("folder") else server.user_roots()
    return ToolOutput(list_images(folders, server.roots, recursive=args.get("recursive", True) is not False,
                                  offset=int(args.get("offset") or 0), limit=int(args.get("limit") or 100)))


def _index_dataset(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api

    dataset = server.roots.check_dataset(args["dataset"], "dataset")
    classifier = server.model(args["classifier"], "classifier")
    return ToolOutput(server.run_job(lambda: api.index_dataset(
        dataset, classifier, device=args.get("device") or server.device, dtype=server.dtype, ctx=ctx), ctx))


def _list_indexes(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api

    return ToolOutput({"indexes": api.list_indexes()})


def _result_summary(result: Any, store_images: dict[str, Path]) -> dict[str, Any]:
    data = result.to_dict()
    out: dict[str, Any] = {"result_key": result.key or None, "resource": f"{RESULT_URI}{result.key}" if result.key else None}
    if "sample" in data and "candidates" in data:  # an explanation
        s = data["sample"]
        out.update({"method": data.get("method"), "explanation": data.get("explanation"), "cei": data.get("cei"),
                    "selected_index": data.get("selected_index"),
                    "prediction": {"predicted": s.get("pred_name"), "p_predicted": s.get("prob_pred"),
                                   "true": s.get("true_name"), "p_true": s.get("prob_true")},
                    "candidates": [{k: c.get(k) for k in ("hypothesis", "intervention_kind", "intervention", "cei",
                                                          "prob_true_before", "prob_true_after", "edit_verdict",
                                                          "error")} for c in data["candidates"]],
                    "notes": data.get("notes", []),
                    "evidence": {label: str(store_images[name]) for label, name in (data.get("evidence") or {}).items()
                                 if name in store_images}})
    else:
        out["data"] = data
    out["images"] = {name: str(p) for name, p in store_images.items()}
    return out


def _images_of(result: Any, data: dict[str, Any], images: dict[str, Path], wanted: bool) -> list[tuple[str, Path]]:
    if not wanted:
        return []
    evidence = (data.get("evidence") or {}) if isinstance(data, dict) else {}
    named = [(label, images[n]) for label, n in evidence.items() if n in images]
    return named or [(n, p) for n, p in images.items() if p.suffix.lower() in (".png", ".jpg", ".jpeg")][:8]


def _explain(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api
    from ..core.registry.methods import get_method, list_methods

    image = server.roots.check(args["image"], "image")
    classifier = server.model(args["classifier"], "classifier")
    mllm = server.model(args["mllm"], "mllm") if args.get("mllm") else None
    editor = server.model(args["editor"], "editor") if args.get("editor") else None
    reference = args.get("reference")
    if isinstance(reference, str) and reference.lower() != "none" and _looks_like_path(reference):
        reference = str(server.roots.check(reference, "reference dataset"))
    settings = _coerce_settings([get_method(m).config for m in list_methods()], args.get("settings"), server.roots)
    label = args["true_label"]
    from ..core.app.jobs.models import STAGE_WEIGHTS

    # The method's stages fill their own slices of the call (progress notifications grow across the whole call).
    staged = ctx.stages("", 0.0, 1.0, STAGE_WEIGHTS)
    result = server.run_job(lambda: api.explain(
        image, label, classifier=classifier, mllm=mllm, editor=editor, reference=reference,
        method=args.get("method") or "scitx", validate=bool(args.get("validate")), settings=settings,
        device=args.get("device") or server.device, dtype=server.dtype, ctx=staged), ctx)
    images = result.images() if result.key else {}
    return ToolOutput(_result_summary(result, images),
                      _images_of(result, result.to_dict(), images, bool(args.get("include_images"))))


def _get_result(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api

    result = api.get_result(str(args["key"]))
    images = result.images()
    out = {"result_key": result.key, "kind": result.kind, "resource": f"{RESULT_URI}{result.key}",
           "data": result.to_dict(), "images": {n: str(p) for n, p in images.items()}}
    return ToolOutput(out, _images_of(result, result.to_dict(), images, bool(args.get("include_images"))))


def _export_report(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api

    out = Path(str(args["path"])).expanduser()
    server.roots.check(out.parent if out.parent != Path("") else Path.cwd(), "report folder")
    server.roots.check(out, "report file")  # the file itself: an existing link there may lead outside
    written = server.run_job(lambda: api.export_report(str(args["key"]), out, args.get("format"), ctx=ctx), ctx)
    return ToolOutput({"path": str(written), "bytes": written.stat().st_size,
                       "format": written.suffix.lstrip(".")})


def _export_table(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api
    from ..core.data.sources import is_fiftyone_ref

    dataset = str(args["dataset"])
    if is_fiftyone_ref(dataset) or _looks_like_path(dataset):
        dataset = server.roots.check_dataset(dataset, "dataset")
    out = Path(str(args["path"])).expanduser()
    server.roots.check(out.parent if out.parent != Path("") else Path.cwd(), "table folder")
    done = server.run_job(lambda: api.export_table(dataset, out, args.get("classifier"),
                                                   competency=args.get("competency"),
                                                   failure_modes=args.get("failure_modes"), fix=args.get("fix"),
                                                   ctx=ctx), ctx)
    return ToolOutput({k: done[k] for k in ("path", "format", "rows", "columns", "metadata", "notes")})


def _analysis_tool(spec: Any) -> ToolDef:
    """One tool per registered analysis that is not an explanation method: its components, data and settings."""
    from ..core.registry.data_inputs import data_prompt

    props: dict[str, Any] = {}
    required: list[str] = []
    label, how = data_prompt(spec)
    if how != "none":
        props["data"] = {"type": "string", "description": {
            "store": f"{label}: its id in the results store",
            "folder": f"{label}: a folder inside the server's roots (or fiftyone:NAME, its images inside them)",
            "file": f"{label}: a file inside the server's roots"}.get(how, label)}
        required.append("data")
    for role in spec.inputs.used():
        if role == "reference":
            props[role] = {"type": "string", "description": _ROLE_HELP[role]}
        elif role == "fitted":
            props[role] = {"type": "string", "description": _ROLE_HELP[role] + f" (a '{spec.inputs.fitted}' result)"}
        else:
            props[role] = {"type": "string", "description": _ROLE_HELP.get(role, role)}
        if spec.inputs.need(role) == "required":
            required.append(role)
    props["settings"] = settings_schema([spec.config])
    props["include_images"] = _IMAGES_FLAG
    props["device"] = _DEVICE
    kind = {"dataset": "Dataset analysis", "model": "Model analysis", "fit": "Fits an artefact",
            "sample": "Per-image analysis"}[spec.kind]
    description = f"{kind} '{spec.name}': {spec.description}".strip()
    return ToolDef("analysis_" + re.sub(r"[^A-Za-z0-9_]", "_", spec.name), description, _obj(props, required),
                   lambda server, args, ctx, name=spec.name: _run_analysis(server, name, args, ctx))


def _run_analysis(server: NemoMCP, name: str, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api
    from ..core.registry import get_analysis
    from ..core.registry.data_inputs import data_prompt

    spec = get_analysis(name)
    data = args.get("data")
    how = data_prompt(spec)[1]
    if data is not None and how in ("folder", "file"):
        data = server.roots.check_dataset(data, "data path")
    models = {role: server.model(args[role], role) for role in _MODEL_ROLES if args.get(role) and role != "generator"}
    if args.get("generator"):
        models["generator"] = server.condition_source(str(args["generator"]))
    reference = args.get("reference")
    if isinstance(reference, str) and reference.lower() != "none" and _looks_like_path(reference):
        reference = str(server.roots.check(reference, "reference dataset"))
    fitted = args.get("fitted")
    if isinstance(fitted, str) and _looks_like_path(fitted):  # a saved estimator's folder, not a store key
        fitted = str(server.roots.check(fitted, "fitted estimator folder"))
    settings = _coerce_settings([spec.config], args.get("settings"), server.roots)
    result = server.run_job(lambda: api.run_analysis(
        name, data, **models, reference=reference, fitted=fitted, settings=settings,
        device=args.get("device") or server.device, dtype=server.dtype, ctx=ctx), ctx)
    images = result.images() if result.key else {}
    return ToolOutput(_result_summary(result, images),
                      _images_of(result, result.to_dict(), images, bool(args.get("include_images"))))

