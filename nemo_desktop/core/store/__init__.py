"""Per-user paths, settings and the results store (SQLite + content-addressed artifact files)."""
from __future__ import annotations

from .atomic import atomic_write_bytes, atomic_write_text
from .db import ResultsStore, StoredResult
from .keys import content_hash, result_key
from .paths import AppPaths, get_paths
from .settings import Settings, load_settings, save_settings

__all__ = ["AppPaths", "ResultsStore", "Settings", "StoredResult", "atomic_write_bytes", "atomic_write_text",
           "content_hash", "get_paths", "load_settings", "result_key", "save_settings"]
