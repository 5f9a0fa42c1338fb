"""Content hashes and result keys.

A result key is the sha256 of canonical JSON over everything that determines a result (input image hash,
model ids and revisions, method, parameters, prompt version, seed...). Canonical means: keys sorted at
every level, no whitespace, floats in Python's shortest round-trip repr, tuples as lists, so the same
parts in any order give the same key on every machine and Python version.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import PurePath
from typing import Any

_CHUNK = 1 << 20


def content_hash(x: Any) -> str:
    """sha256 hex of bytes, of a file's bytes (str / PathLike, streamed), or of a PIL image's mode+size+pixels."""
    h = hashlib.sha256()
    if isinstance(x, (bytes, bytearray, memoryview)):
        h.update(x)
    elif isinstance(x, (str, os.PathLike)):
        from ..base.confine import check_file

        check_file(x)  # a server's roots (nemo mcp): never read a file outside them, not even to hash it
        with open(x, "rb") as f:
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                h.update(chunk)
    elif _is_pil_image(x):
        # Pixels, not the encoded file: the same picture saved as PNG or re-encoded hashes the same.
        h.update(f"PIL:{x.mode}:{x.size[0]}x{x.size[1]}:".encode())
        h.update(x.tobytes())
    else:
        raise TypeError(f"content_hash() takes bytes, a path or a PIL image, not {type(x).__name__}")
    return h.hexdigest()


def _is_pil_image(x: Any) -> bool:
    # Avoid importing PIL just to answer "no".
    return type(x).__module__.startswith("PIL.") and hasattr(x, "tobytes") and hasattr(x, "mode")


def _normalise(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"result_key: {where} is {value!r}; NaN/infinity cannot be part of a key")
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"result_key: {where} has a non-string key {k!r}")
            out[k] = _normalise(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_normalise(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, PurePath):
        return value.as_posix()
    # numpy scalars (np.float32(0.5), np.int64(3)) without importing numpy
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return _normalise(item(), where)
    raise TypeError(f"result_key: {where} has unsupported type {type(value).__name__}; "
                    "use str, int, float, bool, None, lists and dicts")


def canonical_json(obj: Any) -> str:
    """Deterministic JSON text: sorted keys, compact separators, ASCII only, NaN refused."""
    return json.dumps(_normalise(obj, "value"), sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


def result_key(kind: str, **parts: Any) -> str:
    """sha256 hex of canonical JSON of {"kind": kind, **parts}."""
    if not kind or not isinstance(kind, str):
        raise ValueError("result_key: kind must be a non-empty string")
    return hashlib.sha256(canonical_json({"kind": kind, **parts}).encode("ascii")).hexdigest()
