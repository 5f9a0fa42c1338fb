"""The MCP server behind `nemo mcp` (the official SDK's low-level `Server`, stdio or streamable HTTP).

Tools (schemas derived from the catalog and the analysis registry, so a new config field or a plugin's analysis
appears without touching this file):

    list_models      catalog entries (shipped + user) with on-disk status, the model families, skipped plugins
    index_dataset    index a dataset with a classifier (the reference of explain, the data of failure modes)
    list_indexes     the reference indexes in the store
    list_analyses    every registered analysis with its components and settings
    predict          top-k classes of images
    explain          any explanation method (enum from the registry) on one image; settings from their configs
    analysis_<name>  one tool per other registered analysis (competency, failure modes, model differences,
                     global explanation, plugins' analyses), its components, data and settings from its spec
    get_result       a stored result by key (or prefix), optionally with its images as image content
    export_report    a stored result's or run's HTML/PDF report, written inside an allowed root

Long tools run in a worker thread: their JobContext progress becomes MCP progress notifications, and the
client's cancellation sets the job's cancel token (the job stops at its next check; completed steps stay
stored). Jobs run one at a time. Results are also resources, `nemo://result/<key>`.

Safety: every path a tool reads or writes (images, dataset folders, local model folders in `<family>:<source>`
references, report files) must lie inside a root given on the command line (`--root`, repeatable) or the
results store; nothing else is readable through a tool. Bad arguments come back as tool errors with the CLI's
messages (`error: ...` / `hint: ...`), never tracebacks, and every text is passed through the secret redactor.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("nemo_desktop.mcp")

RESULT_URI = "nemo://result/"
MAX_TEXT = 200_000  # characters of JSON in one tool result (a run-sized result is truncated, see get_result)
_MODEL_ROLES = ("classifier", "classifier_b", "mllm", "editor", "embedder", "judge", "generator")
_ROLE_KIND = {"classifier": "classifier", "classifier_b": "classifier", "embedder": "classifier", "mllm": "mllm",
              "judge": "mllm", "editor": "editor", "generator": "generator"}
_ROLE_HELP = {"classifier": "the classifier: a catalog id (list_models) or <family>:<source>",
              "classifier_b": "the second classifier (catalog id or <family>:<source>)",
              "mllm": "multimodal LLM: a catalog id or <family>:<source>",
              "editor": "image editor: a catalog id or <family>:<source>",
              "embedder": "joint image-text embedder (a classifier id, e.g. a CLIP model)",
              "judge": "evaluator LLM: a catalog id or <family>:<source>",
              "generator": "condition source: digits, digits-ink (rendered digits), dataset:FILE.csv (an "
                           "attribute dataset), or t2i:MODEL[@conditions.json] (a text-to-image model)",
              "reference": "reference index id (see the store), a dataset folder, or 'none'",
              "fitted": "store key of the fitted estimator this analysis uses"}


class ToolError(Exception):
    """A tool's failure as the client reads it (message and hint, already redacted)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message, self.hint = message, hint


# -- roots -------------------------------------------------------------------------------------------------------
@dataclass
class Roots:
    """The folders tools may read and write: the user's `--root`s and the results store."""

    folders: list[Path] = field(default_factory=list)

    @classmethod
    def of(cls, folders: list[str | os.PathLike] | None, store_dir: Path | None = None) -> "Roots":
        out = [Path(f).expanduser().resolve() for f in folders or []]
        if store_dir is not None:
            out.append(Path(store_dir).resolve())
        return cls(out)

    def contains(self, path: Path) -> bool:
        return any(path == r or r in path.parents for r in self.folders)

    def check(self, value: str | os.PathLike, what: str) -> Path:
        """The resolved path, or a ToolError when it is outside every root (links are followed first)."""
        path = Path(value).expanduser()
        if not path.is_absolute():
            path = Path.cwd() / path
        resolved = path.resolve()
        if not self.contains(resolved):
            allowed = ", ".join(str(r) for r in self.folders) or "none"
            raise ToolError(f"The {what} {value} is outside the folders this server may use ({allowed}).",
                            hint="Restart it with `nemo mcp --root FOLDER` to allow a folder.")
        return resolved

    def check_model_ref(self, ref: str, what: str) -> str:
        """A `<family>:<source>` reference may name a local folder or file: it must be inside a root too."""
        from ..core.models.catalog import list_catalog

        if ref in {e.id for e in list_catalog()}:
            return ref  # the catalog (shipped, or the user's own file) is trusted
        _family, _sep, source = ref.partition(":")
        if re.match(r"^[a-z][a-z0-9+.-]*://", source, re.I):  # an endpoint URL, not a file
            return ref
        for part in source.split(":"):
            looks_local = part.startswith(("/", "~", ".")) or (part and Path(part).exists())
            if looks_local:
                self.check(part, what)
        return ref


# -- schemas ------------------------------------------------------------------------------------------------------
def _param_schema(p: Any) -> dict[str, Any]:
    base = {"int": {"type": "integer"}, "float": {"type": "number"}, "bool": {"type": "boolean"},
            "str": {"type": "string"}, "size": {"type": "array", "items": {"type": "integer"}, "minItems": 2,
                                                "maxItems": 2},
            "paths": {"type": "array", "items": {"type": "string"}}}[p.kind]
    s: dict[str, Any] = dict(base)
    if p.choices:
        if p.kind == "paths":
            s["items"] = {"type": "string", "enum": list(p.choices)}
        else:
            s["enum"] = list(p.choices)
    if p.minimum is not None:
        s["minimum"] = p.minimum
    if p.maximum is not None:
        s["maximum"] = p.maximum
    default = list(p.default) if isinstance(p.default, tuple) else p.default
    if default is not None:
        s["default"] = default
    if p.optional:
        s = {"anyOf": [s, {"type": "null"}]}
    s["description"] = (p.help or p.label).rstrip(".") + (" (null: the analysis' default)" if p.optional else "")
    s["title"] = p.label
    return s


def settings_schema(config_classes: list[type | None], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON schema of an analysis' settings (the union over several, each field once)."""
    from ..core.registry.params import config_params

    props: dict[str, Any] = {}
    for cls in config_classes:
        for p in config_params(cls):
            if p.kind is None or p.name in skip or p.name in props:
                continue
            props[p.name] = _param_schema(p)
    return {"type": "object", "properties": props, "additionalProperties": False,
            "description": "Analysis settings by name; leave one out for its default."}


def _coerce_settings(spec_configs: list[type | None], settings: Any, roots: "Roots | None" = None) -> dict[str, Any]:
    """JSON values as the config fields want them (arrays -> tuples), with the CLI's messages for bad ones; file
    lists (a 'paths' setting without choices, e.g. extra sentence files) must lie inside the roots."""
    from ..core.errors import ConfigError
    from ..core.registry.params import config_params

    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise ConfigError("'settings' must be an object of setting names and values.")
    params = {p.name: p for cls in spec_configs for p in config_params(cls)}
    out = {}
    for name, value in settings.items():
        p = params.get(name)
        if p is None or value is None:
            out[name] = value  # unknown names are refused by make_config, with the known ones listed
            continue
        want = {"int": int, "float": (int, float), "bool": bool, "str": str}.get(p.kind or "")
        names_files = roots is not None and not p.choices and (
            p.path or re.search(r"(manifest|file|dir|folder|path)$", name) is not None)
        if p.kind in ("size", "paths"):
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"Setting '{name}' must be a list.")
            value = tuple(value)
            if p.kind == "paths" and names_files:
                value = tuple(_checked_path(roots, str(v), name) for v in value)
        elif p.kind == "str" and names_files and isinstance(value, str) and value:
            value = _checked_path(roots, value, name)
        elif want is not None:
            if p.kind == "int" and isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, want) or (p.kind in ("int", "float") and isinstance(value, bool)):
                kind = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "text"}[p.kind]
                raise ConfigError(f"Setting '{name}' ({p.label}) must be {kind}, not {json.dumps(value)}.")
        out[name] = value
    return out


def _looks_like_path(value: str) -> bool:
    """A value that can name a file: separators, ~ or . first, or an existing file (relative to the server's
    working directory). A bare word that names nothing (a shipped sentence set: 'general') is a name."""
    return "/" in value or os.sep in value or value.startswith(("~", ".")) or Path(value).exists()


def _checked_path(roots: "Roots", value: str, setting: str) -> str:
    """A file setting's value inside the roots (resolved), or a name left as it is."""
    if not _looks_like_path(value):
        return value
    return str(roots.check(value, f"file of setting '{setting}'"))


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or [], "additionalProperties": False}


_DEVICE = {"type": "string", "default": "auto", "description": "auto, cpu, cuda, cuda:1, ..."}
_IMAGES_FLAG = {"type": "boolean", "default": False,
                "description": "also return the result's evidence images as image content"}


@dataclass
class ToolDef:
    name: str
    description: str
    schema: dict[str, Any]
    run: Callable[["NemoMCP", dict[str, Any], Any], Any]  # (server, arguments, JobContext) -> ToolOutput
    long: bool = True  # runs in the job thread, with progress and cancellation
    read_only: bool = False


@dataclass
class ToolOutput:
    data: Any
    images: list[tuple[str, Path]] = field(default_factory=list)  # (label, png/jpeg file)


# -- the server ------------------------------------------------------------------------------------------------------
class NemoMCP:
    """The tools, resources and policies; `build_server()` wraps them in the SDK's Server."""

    def __init__(self, roots: list[str] | None = None, device: str = "auto", dtype: str = "auto") -> None:
        from ..core.store.paths import get_paths

        self.paths = get_paths().ensure()
        self.device, self.dtype = device, dtype
        self._roots_given = list(roots or [])
        self._job_lock = threading.Lock()
        self.roots = Roots.of(self._roots_given, self._store_dir())

    def _store_dir(self) -> Path | None:
        from ..core.store import ResultsStore

        store = ResultsStore.open(self.paths)
        try:
            return Path(store.store_dir)
        finally:
            store.close()

    # -- tool list ----------------------------------------------------------------------------------------------
    def tools(self) -> list[ToolDef]:
        from ..core.methods.registry import get_method, list_methods
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
                    _obj({"dataset": {"type": "string", "description": "dataset folder or CSV manifest"},
                          "classifier": {"type": "string", "description": _ROLE_HELP["classifier"]},
                          "device": _DEVICE}, ["dataset", "classifier"]), _index_dataset),
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
        ]
        for name in list_analyses():
            spec = get_analysis(name)
            if name in methods:
                continue
            tools.append(_analysis_tool(spec))
        return tools

    def tool(self, name: str) -> ToolDef:
        for t in self.tools():
            if t.name == name:
                return t
        raise ToolError(f"Unknown tool '{name}'.", hint="List the tools (tools/list).")

    # -- helpers the tools use ---------------------------------------------------------------------------------
    def model(self, ref: Any, what: str) -> str:
        if not isinstance(ref, str) or not ref.strip():
            raise ToolError(f"'{what}' must be a model id or <family>:<source>.")
        return self.roots.check_model_ref(ref.strip(), f"{what} model path")

    def condition_source(self, ref: str) -> str:
        """A condition source's files (an attribute dataset, a conditions file) must lie inside the roots."""
        kind, _, rest = ref.strip().partition(":")
        if kind == "dataset" and rest:
            self.roots.check(rest, "condition dataset")
        elif kind == "t2i" and rest:
            model, _, conditions = rest.partition("@")
            self.model(model, "text-to-image")
            if conditions:
                self.roots.check(conditions, "conditions file")
        return ref

    def run_job(self, fn: Callable[[], Any], ctx: Any) -> Any:
        """Run one job at a time (models share one GPU); a cancelled job waiting here gives up at once."""
        while not self._job_lock.acquire(timeout=0.2):
            ctx.check_cancelled()
        try:
            return fn()
        finally:
            self._job_lock.release()


def _check_args(tool: ToolDef, args: dict[str, Any]) -> None:
    props = tool.schema.get("properties", {})
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ToolError(f"{tool.name} has no argument(s) {', '.join(unknown)}.",
                        hint=f"Its arguments: {', '.join(props) or 'none'}.")
    missing = [r for r in tool.schema.get("required", []) if args.get(r) in (None, "")]
    if missing:
        raise ToolError(f"{tool.name} needs {', '.join(missing)}.")
    for name, value in args.items():
        s = props[name]
        if "enum" in s and value is not None and value not in s["enum"]:
            raise ToolError(f"'{name}' must be one of {', '.join(map(str, s['enum']))}, not {json.dumps(value)}.")
        t = s.get("type")
        ok = {"string": lambda v: isinstance(v, str), "integer": lambda v: isinstance(v, int) and not
              isinstance(v, bool), "boolean": lambda v: isinstance(v, bool), "array": lambda v: isinstance(v, list),
              "object": lambda v: isinstance(v, dict)}
        types = t if isinstance(t, list) else [t] if t else []
        if types and value is not None and not any(ok.get(x, lambda v: True)(value) for x in types):
            raise ToolError(f"'{name}' must be {' or '.join(types)}, not {json.dumps(value)[:80]}.")


# -- tools -----------------------------------------------------------------------------------------------------------
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

    images = [str(server.roots.check(p, "image")) for p in args["images"]]
    classifier = server.model(args["classifier"], "classifier")
    preds = server.run_job(lambda: api.predict(images, classifier, top_k=int(args.get("top_k") or 5),
                                               device=args.get("device") or server.device, dtype=server.dtype,
                                               ctx=ctx), ctx)
    return ToolOutput(preds.to_dict())


def _index_dataset(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api

    dataset = server.roots.check(args["dataset"], "dataset")
    classifier = server.model(args["classifier"], "classifier")
    return ToolOutput(server.run_job(lambda: api.index_dataset(
        dataset, classifier, device=args.get("device") or server.device, dtype=server.dtype, ctx=ctx), ctx))


def _list_indexes(server: NemoMCP, args: dict[str, Any], ctx: Any) -> ToolOutput:
    from .. import api

    return ToolOutput({"indexes": api.list_indexes()})


def _result_summary(result: Any, store_images: dict[str, Path]) -> dict[str, Any]:
    data = result.to_dict()
    out: dict[str, Any] = {"result_key": result.key, "resource": f"{RESULT_URI}{result.key}" if result.key else None}
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
    from ..core.methods.registry import get_method, list_methods

    image = server.roots.check(args["image"], "image")
    classifier = server.model(args["classifier"], "classifier")
    mllm = server.model(args["mllm"], "mllm") if args.get("mllm") else None
    editor = server.model(args["editor"], "editor") if args.get("editor") else None
    reference = args.get("reference")
    if isinstance(reference, str) and reference.lower() != "none" and _looks_like_path(reference):
        reference = str(server.roots.check(reference, "reference dataset"))
    settings = _coerce_settings([get_method(m).config for m in list_methods()], args.get("settings"), server.roots)
    label = args["true_label"]
    result = server.run_job(lambda: api.explain(
        image, label, classifier=classifier, mllm=mllm, editor=editor, reference=reference,
        method=args.get("method") or "scitx", validate=bool(args.get("validate")), settings=settings,
        device=args.get("device") or server.device, dtype=server.dtype, ctx=ctx), ctx)
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
    written = server.run_job(lambda: api.export_report(str(args["key"]), out, args.get("format"), ctx=ctx), ctx)
    return ToolOutput({"path": str(written), "bytes": written.stat().st_size,
                       "format": written.suffix.lstrip(".")})


def _analysis_tool(spec: Any) -> ToolDef:
    """One tool per registered analysis that is not an explanation method: its components, data and settings."""
    from ..core.registry.data_inputs import data_prompt

    props: dict[str, Any] = {}
    required: list[str] = []
    label, how = data_prompt(spec)
    if how != "none":
        props["data"] = {"type": "string", "description": {
            "store": f"{label}: its id in the results store",
            "folder": f"{label}: a folder inside the server's roots",
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
        data = str(server.roots.check(data, "data path"))
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


# -- the SDK server --------------------------------------------------------------------------------------------------
def _error_text(exc: BaseException) -> str:
    from ..core.errors import NemoError
    from ..core.secrets import redact

    if isinstance(exc, ToolError):
        message, hint = exc.message, exc.hint
    elif isinstance(exc, NemoError):
        d = exc.to_dict()
        message, hint = d["message"], d["hint"]
    else:
        message, hint = f"Internal error ({type(exc).__name__}): {exc}", "See the server's log for details."
    return redact(f"error: {message}" + (f"\nhint: {hint}" if hint else ""))


def _content(output: ToolOutput) -> list[Any]:
    import mcp.types as types

    from ..core.secrets import redact

    text = redact(json.dumps(output.data, indent=1, ensure_ascii=False, default=str))
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + "\n... (truncated; read the whole result as its resource)"
    out: list[Any] = [types.TextContent(type="text", text=text)]
    for label, path in output.images:
        mime = "image/jpeg" if path.suffix.lower() in (".jpg", ".jpeg") else "image/png"
        try:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
        except OSError:
            continue
        out.append(types.TextContent(type="text", text=f"image: {label}"))
        out.append(types.ImageContent(type="image", data=data, mime_type=mime))
    return out


class _Progress:
    """JobContext progress (in the job thread) -> MCP progress notifications (in the server's event loop)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.last = 0.0
        self.sent_at = 0.0
        self.stage: str | None = None

    def __call__(self, p: Any) -> None:
        import anyio.from_thread

        now = time.monotonic()
        frac = p.overall_fraction
        value = max(self.last + 0.01, 100.0 * frac if frac is not None else self.last)
        if p.stage == self.stage and now - self.sent_at < 0.25 and (frac or 0) < 1.0:
            return
        self.stage, self.sent_at, self.last = p.stage, now, value
        message = f"{p.stage} {p.done}/{p.total}" if p.total else p.stage
        try:
            anyio.from_thread.run(self.session.report_progress, min(value, 100.0), 100.0, message)
        except Exception:  # noqa: BLE001 - the request is over (cancelled) or the client went away
            pass


def build_server(nemo: NemoMCP) -> Any:
    """The SDK's low-level Server with NEMO's handlers."""
    import anyio
    import anyio.to_thread
    import mcp.types as types
    from mcp.server.lowlevel import Server

    from .. import __version__
    from ..core.errors import JobCancelled
    from ..core.jobs import JobContext

    async def list_tools(ctx: Any, params: Any) -> Any:
        tools = []
        for t in await anyio.to_thread.run_sync(nemo.tools):
            tools.append(types.Tool(name=t.name, description=t.description, input_schema=t.schema,
                                    annotations=types.ToolAnnotations(read_only_hint=t.read_only,
                                                                      open_world_hint=False)))
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        name, args = params.name, dict(params.arguments or {})
        job = JobContext(on_progress=_Progress(ctx.session))
        try:
            tool = await anyio.to_thread.run_sync(nemo.tool, name)
            _check_args(tool, args)
            started = time.monotonic()
            try:
                output = await anyio.to_thread.run_sync(_run_tool, nemo, tool, args, job, abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                job.cancel_token.cancel()
                log.warning("%s: cancelled by the client after %.1f s; the job stops after its current step",
                            name, time.monotonic() - started)
                raise
            return types.CallToolResult(content=_content(output))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is a tool error the agent can read
            if not isinstance(exc, (ToolError,)) and not _is_nemo_error(exc):
                log.error("%s failed", name, exc_info=True)  # the traceback goes to the log file only
            return types.CallToolResult(content=[types.TextContent(type="text", text=_error_text(exc))],
                                        is_error=True)

    def _run_tool(server: NemoMCP, tool: ToolDef, args: dict[str, Any], job: Any) -> ToolOutput:
        try:
            return tool.run(server, args, job)
        except JobCancelled:
            log.warning("%s: job stopped (cancelled)", tool.name)
            raise

    async def list_resources(ctx: Any, params: Any) -> Any:
        def recent() -> list[Any]:
            from ..core.store import ResultsStore

            store = ResultsStore.open(nemo.paths)
            try:
                return store.find(limit=50)
            finally:
                store.close()

        rows = await anyio.to_thread.run_sync(recent)
        return types.ListResourcesResult(resources=[
            types.Resource(uri=f"{RESULT_URI}{r.key}", name=f"{r.kind} {r.key[:12]}", mime_type="application/json",
                           description=f"stored {r.kind} result") for r in rows])

    async def list_templates(ctx: Any, params: Any) -> Any:
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(uri_template=RESULT_URI + "{key}", name="result", mime_type="application/json",
                                   description="A stored result (explanation, analysis) by its key")])

    async def read_resource(ctx: Any, params: Any) -> Any:
        from mcp.shared.exceptions import MCPError

        from ..core.secrets import redact

        uri = str(params.uri)
        if not uri.startswith(RESULT_URI):
            raise MCPError(code=-32602, message=f"Unknown resource {uri}; resources are {RESULT_URI}<key>.")
        try:
            out = await anyio.to_thread.run_sync(_get_result, nemo, {"key": uri[len(RESULT_URI):]}, None)
        except Exception as exc:  # noqa: BLE001
            raise MCPError(code=-32002, message=_error_text(exc)) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="application/json", text=redact(json.dumps(out.data, ensure_ascii=False,
                                                                         default=str)))])

    return Server("nemo-desktop", version=__version__, title="NEMO Desktop",
                  instructions="Explain why a vision classifier got an image wrong, and test each explanation. "
                               "Start with list_models; explain returns a result key, readable with get_result "
                               "or as the resource nemo://result/<key>.",
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource)


def _is_nemo_error(exc: BaseException) -> bool:
    from ..core.errors import NemoError

    return isinstance(exc, NemoError)


def run_stdio(nemo: NemoMCP) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(nemo)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def run_http(nemo: NemoMCP, host: str, port: int, token: str | None) -> None:
    """Streamable HTTP at http://host:port/mcp. A token, when set, is required as `Authorization: Bearer`."""
    import hmac

    import uvicorn

    server = build_server(nemo)
    app = server.streamable_http_app(host=host)
    if token:
        inner = app
        expected = f"Bearer {token}".encode()

        async def app(scope, receive, send):  # type: ignore[no-redef]
            if scope["type"] == "http":
                given = dict(scope.get("headers") or []).get(b"authorization", b"")
                if not hmac.compare_digest(given, expected):
                    await send({"type": "http.response.start", "status": 401,
                                "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                    await send({"type": "http.response.body", "body": b"A bearer token is required.\n"})
                    return
            await inner(scope, receive, send)

    uvicorn.run(app, host=host, port=port, log_level="warning")
