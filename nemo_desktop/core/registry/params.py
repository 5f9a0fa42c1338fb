"""Parameters of an analysis, read from its config dataclass: the CLI options and the GUI settings form are
derived from these, so a new config field shows up in both without touching either.

A field may carry metadata for the surfaces:

    k: int = field(default=3, metadata={"label": "Observations per set", "help": "...", "min": 0, "max": 20})
    contrast: str = field(default="pdiff", metadata={"choices": ("pdiff", "fpdiff", "tops")})

    calibration_set: str = field(default="", metadata={"label": ..., "path": True})  # a file or folder

A config may instead (or also) carry a class attribute `FIELD_INFO = {"k": {"label": ..., ...}}`, which keeps the
field lines short; a field's own metadata wins. Without either the label is the field name in words and the range
is open.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

from ..base.errors import ConfigError


@dataclass(frozen=True)
class ParamInfo:
    name: str
    kind: str | None  # 'int' 'float' 'bool' 'str' 'size' 'paths'; None = not editable in a form / on the CLI
    # 'paths' is any tuple of strings: files, or, with `choices`, several names from a list (see `multi`)
    optional: bool  # None is allowed (meaning: the analysis' or the model's default)
    default: Any
    label: str
    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    path: bool = False  # names files or folders (metadata "path": True): surfaces that confine file access check it

    @property
    def multi(self) -> bool:
        """A tuple of names from `choices` (e.g. the explainers to run): several may be chosen, at least one."""
        return self.kind == "paths" and bool(self.choices)

    @property
    def form_kind(self) -> str | None:
        """'int', 'int?', 'float', 'float?', 'bool', 'size?', 'str', 'choice', 'choices' (several of a list) ... as
        the settings form wants it."""
        if self.kind is None:
            return None
        base = "choices" if self.multi else "choice" if self.choices else self.kind
        return base + ("?" if self.optional else "")

    @property
    def cli_flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _base_kind(annotation: Any) -> tuple[str | None, bool]:
    optional = False
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            return None, True
        annotation, optional = rest[0], True
    if annotation is bool:
        return "bool", optional
    if annotation is int:
        return "int", optional
    if annotation is float:
        return "float", optional
    if annotation is str:
        return "str", optional
    origin, targs = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple and targs == (int, int):
        return "size", optional
    if origin is tuple and targs in ((str, ...),):
        return "paths", optional
    return None, optional


def config_params(config_cls: type | None) -> list[ParamInfo]:
    """The parameters of a config dataclass, in declaration order."""
    if config_cls is None:
        return []
    try:
        hints = typing.get_type_hints(config_cls)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to their text
        hints = {}
    out = []
    for f in dataclasses.fields(config_cls):
        if not f.init or f.name.startswith("_"):
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        kind, optional = _base_kind(hints.get(f.name, f.type))
        meta = {**(getattr(config_cls, "FIELD_INFO", None) or {}).get(f.name, {}), **(f.metadata or {})}
        choices = meta.get("choices")
        out.append(ParamInfo(f.name, kind, optional, default, meta.get("label") or f.name.replace("_", " ").capitalize(),
                             meta.get("help", ""), meta.get("min"), meta.get("max"),
                             tuple(choices) if choices else None, bool(meta.get("path"))))
    return out


def parse_value(param: ParamInfo, text: str) -> Any:
    """A CLI string as the parameter's type ('none' gives None for optional parameters)."""
    if param.optional and text.strip().lower() in ("none", "default", ""):
        return None
    try:
        if param.kind == "int":
            value: Any = int(text)
        elif param.kind == "float":
            value = float(text)
        elif param.kind == "bool":
            low = text.strip().lower()
            if low not in ("true", "false", "yes", "no", "1", "0", "on", "off"):
                raise ValueError(text)
            value = low in ("true", "yes", "1", "on")
        elif param.kind == "size":
            w, h = (int(v) for v in text.lower().split("x"))
            if w <= 0 or h <= 0:
                raise ValueError(text)
            value = (w, h)
        elif param.kind == "paths":
            value = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))  # in order, each once
        else:
            value = text
    except ValueError:
        want = {"size": "WIDTHxHEIGHT, e.g. 512x512", "bool": "true or false"}.get(param.kind or "", param.kind)
        raise ConfigError(f"{param.cli_flag} takes {want}, not '{text}'.") from None
    return value  # ranges and choices are checked once, by make_config


def check_range(param: ParamInfo, value: Any) -> None:
    if value is None:
        return
    if param.choices:
        # A tuple-valued field with choices (e.g. several methods) checks each of its values.
        chosen = value if isinstance(value, (tuple, list)) else (value,)
        bad = [v for v in chosen if v not in param.choices]
        if bad:
            raise ConfigError(f"{param.label} must be one of {', '.join(param.choices)}, not "
                              f"'{', '.join(map(str, bad))}'.")
        if not chosen:
            raise ConfigError(f"{param.label} ({param.cli_flag}): choose at least one of {', '.join(param.choices)}.")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if param.minimum is not None and value < param.minimum:
            raise ConfigError(f"{param.label} ({param.cli_flag}) must be at least {param.minimum}, not {value}.")
        if param.maximum is not None and value > param.maximum:
            raise ConfigError(f"{param.label} ({param.cli_flag}) must be at most {param.maximum}, not {value}.")
