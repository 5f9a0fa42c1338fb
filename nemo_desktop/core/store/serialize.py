"""How results and artifacts are written: strict JSON for payloads (no NaN), PNG / .npy / raw bytes for artifacts."""
from __future__ import annotations

import io
import json
from pathlib import PurePath
from typing import Any


def _encode_artifact(name: str, value: Any) -> tuple[str, bytes]:
    """(extension, file bytes): PNG for PIL images, .npy for numpy arrays, .bin for bytes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bin", bytes(value)
    module = type(value).__module__
    if module.startswith("PIL."):
        buf = io.BytesIO()
        value.save(buf, format="PNG")
        return "png", buf.getvalue()
    if module == "numpy" and type(value).__name__ == "ndarray":
        import numpy as np

        buf = io.BytesIO()
        np.save(buf, value, allow_pickle=False)
        return "npy", buf.getvalue()
    raise TypeError(f"artifact {name!r}: expected bytes, a PIL image or a numpy array, not {type(value).__name__}")


def _json_default(value: Any) -> Any:
    if isinstance(value, PurePath):
        return value.as_posix()
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return value.item()  # numpy scalars (probabilities, indices)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _dump_json(obj: Any, what: str) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_json_default)
    except ValueError as exc:  # NaN / infinity: SQLite's JSON functions would reject the row later
        raise ValueError(f"{what} contains NaN or infinity, which cannot be stored as JSON; use None") from exc
