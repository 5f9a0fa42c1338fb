"""The JSON schemas of tool inputs (derived from the analysis registry) and the checks of arguments."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .replies import ToolError
from .roots import Roots, _checked_path

if TYPE_CHECKING:
    from .server import NemoMCP

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
    from ..core.base.errors import ConfigError
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


_BOUNDS = {"minimum": "must be at least {v}", "maximum": "must be at most {v}",
           "exclusiveMinimum": "must be more than {v}", "exclusiveMaximum": "must be less than {v}",
           "minItems": "needs at least {v} item(s)", "maxItems": "takes at most {v} item(s)",
           "minLength": "must be at least {v} character(s) long", "maxLength": "must be at most {v} characters long"}


def _nul_in(value: Any, where: str) -> str | None:
    """The argument (path) holding a NUL byte: no file name can, and the OS would refuse it deep in a job."""
    if isinstance(value, str):
        return where if "\0" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        found = _nul_in(v, f"{where}.{k}" if isinstance(k, str) else f"{where}[{k}]")
        if found:
            return found
    return None


def _bound_errors(error: Any) -> list[Any]:
    """The schema's bounds a value breaks (inside anyOf too: an optional setting is anyOf [value, null])."""
    if error.validator in _BOUNDS:
        return [error]
    return [e for sub in (error.context or []) for e in _bound_errors(sub)]


def _check_bounds(schema: dict[str, Any], args: dict[str, Any]) -> None:
    """Every bound the tool's schema declares (minimum, maximum, minItems, ...), checked with jsonschema (the
    schema's own validator, not a copy of its rules); other problems keep the messages of the checks above."""
    from jsonschema import Draft202012Validator

    for error in Draft202012Validator(schema).iter_errors(args):
        for e in _bound_errors(error):
            name = ".".join(str(p) for p in e.absolute_path) or "arguments"
            raise ToolError(f"'{name}' {_BOUNDS[e.validator].format(v=e.validator_value)}, "
                            f"not {json.dumps(e.instance)[:80]}.")


def _check_args(tool: ToolDef, args: dict[str, Any]) -> None:
    nul = _nul_in(args, "")
    if nul:
        raise ToolError(f"'{nul.lstrip('.')}' contains a NUL byte (\\0), which no file path can hold.",
                        hint="Give the path as the file system spells it.")
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
    _check_bounds(tool.schema, args)
