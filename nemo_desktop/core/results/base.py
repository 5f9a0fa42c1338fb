"""One way to turn a result into plain JSON and back, for every result type (issue 41).

    @dataclass
    class MyResult(ResultBase):
        rows: list[Row]                      # nested dataclasses, lists, dicts, X | None: rebuilt from the type hints
        result_key: str | None = None        # `key` reads it (the registry's AnalysisResult protocol)

    d = result.to_dict()                     # plain data; numpy scalars and arrays become numbers and lists
    MyResult.from_dict(d) == result

`to_dict` writes the fields (a nested part with its own `to_dict`, e.g. one that adds a derived value, uses it) and
`"schema": SCHEMA`. `from_dict` reads dicts of every schema up to the class's own: the dicts stored before this
base existed carry no schema and have the layout of schema 1. Unknown keys (derived values, fields of a later
version) are ignored and missing fields take their defaults, so a stored result stays readable; a dict of a newer
schema than the class knows is refused in words. When a field changes meaning, raise SCHEMA and rewrite the older
dicts in `upgrade`.

Hand-written rather than dacite (installed with the fiftyone extra only): the nested parts with their own
`from_dict` (model-diff's conditions) and the schema check need hooks dacite does not have, and this is short.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from functools import lru_cache
from pathlib import PurePath
from typing import Any, ClassVar

SCHEMA_FIELD = "schema"


def to_plain(value: Any) -> Any:
    """`value` as JSON-ready data: dataclasses as dicts (their own `to_dict` when they have one), tuples as lists,
    numpy scalars and arrays as numbers and lists, paths as POSIX strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_dict", None)
        if own is not None:
            return own()
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, PurePath):
        return value.as_posix()
    if type(value).__module__ == "numpy":
        return value.tolist() if hasattr(value, "tolist") else value  # ndarray -> lists; np.float32(1) -> 1.0
    return value


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_plain(tp: Any, value: Any) -> Any:
    """Plain data `value` as type `tp` (a type hint): dataclasses rebuilt (their own `from_dict` when they have
    one), through lists, tuples, dicts and `X | None`; numbers and strings are kept as they are."""
    if value is None or tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return from_plain(args[0], value) if len(args) == 1 else value  # several types: kept as stored
    args = typing.get_args(tp)
    if origin is list and isinstance(value, list):
        return [from_plain(args[0] if args else Any, v) for v in value]
    if origin is tuple and isinstance(value, (list, tuple)):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_plain(args[0], v) for v in value)
        return tuple(from_plain(a, v) for a, v in zip(args, value)) if args else tuple(value)
    if origin is dict and isinstance(value, dict):
        return {k: from_plain(args[1] if args else Any, v) for k, v in value.items()}
    if isinstance(tp, type) and isinstance(value, dict) and dataclasses.is_dataclass(tp):
        own = getattr(tp, "from_dict", None)
        return own(value) if own is not None else _build(tp, value)
    if getattr(tp, "__module__", "") == "numpy" and getattr(tp, "__name__", "") == "ndarray":
        import numpy as np

        return np.asarray(value)
    return value


def _build(cls: type, d: dict[str, Any]) -> Any:
    hints = _hints(cls)
    return cls(**{f.name: from_plain(hints.get(f.name, Any), d[f.name])
                  for f in dataclasses.fields(cls) if f.init and f.name in d})


class Record:
    """A part of a result that is also read and written on its own (a score, a row): `to_dict` / `from_dict`
    without the store key and the schema."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: to_plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        return _build(cls, d)


class ResultBase(Record):
    """A stored result: `key` (its results-store key, None until stored; from the `result_key` field) and the
    JSON form with a schema version (module docstring)."""

    SCHEMA: ClassVar[int] = 1

    @property
    def key(self) -> str | None:
        return getattr(self, "result_key", None)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), SCHEMA_FIELD: self.SCHEMA}

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        schema = d.get(SCHEMA_FIELD, 1)  # written before the schema existed: the layout of schema 1
        if not isinstance(schema, int) or schema > cls.SCHEMA:
            raise ValueError(f"This {cls.__name__} was written by a newer version of NEMO Desktop (result schema "
                             f"{schema!r}; this version reads up to {cls.SCHEMA}). Update NEMO Desktop to open it.")
        analysis = _default(cls, "analysis")
        if analysis is not None and d.get("analysis", analysis) != analysis:
            raise ValueError(f"not a {analysis} result: {d.get('analysis')!r}")
        return _build(cls, cls.upgrade(dict(d), schema))

    @classmethod
    def upgrade(cls, d: dict[str, Any], schema: int) -> dict[str, Any]:
        """`d` (of result schema `schema`) in the layout of cls.SCHEMA; one step per schema when SCHEMA rises."""
        return d


def _default(cls: type, name: str) -> Any:
    for f in dataclasses.fields(cls):
        if f.name == name and isinstance(f.default, str):
            return f.default
    return None
