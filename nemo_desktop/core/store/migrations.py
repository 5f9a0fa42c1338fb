"""Schema migrations of the results database, applied in order; `PRAGMA user_version` holds the version.

Each migration is a function of the open connection. `migrate()` applies every migration above the file's
version, each in its own `BEGIN IMMEDIATE` transaction together with the version bump, so a crash or a
failing step leaves the database at the previous version, and two processes opening the store at once
cannot both apply the same step (the second re-reads the version after taking the write lock).

To change the schema, append `Migration(N + 1, "what changes", _vN_plus_1)`; never edit a shipped step.
Do not call `executescript` inside a step: it commits the open transaction.

Version 0 is the pre-versioned prototype layout (one `results` table without a `kind` column, artifacts
as a JSON map of relative paths) or an empty file; version 1 is the layout in STORE_API.md.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Callable, Sequence

from ..base.errors import StoreError


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[sqlite3.Connection], None]


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def _run_all(conn: sqlite3.Connection, statements: Sequence[str]) -> None:
    for sql in statements:
        conn.execute(sql)


_V1_TABLES = (
    """CREATE TABLE IF NOT EXISTS results (
        key TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,          -- JSON object
        created_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS results_by_kind ON results(kind, created_at)",
    "CREATE INDEX IF NOT EXISTS results_by_time ON results(created_at)",
    # Which content-addressed artifact files a result uses (artifacts/<sha[:2]>/<sha>.<ext>).
    """CREATE TABLE IF NOT EXISTS result_artifacts (
        result_key TEXT NOT NULL REFERENCES results(key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        ext TEXT NOT NULL,
        size INTEGER,
        PRIMARY KEY (result_key, name)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS result_artifacts_by_sha ON result_artifacts(sha256)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        config TEXT NOT NULL,           -- JSON object
        created_at REAL NOT NULL,
        status TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS runs_by_kind ON runs(kind, created_at)",
    """CREATE TABLE IF NOT EXISTS run_items (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        item_id TEXT NOT NULL,
        result_key TEXT,                -- not a foreign key: clearing results keeps the run's history
        status TEXT NOT NULL,
        error TEXT,                     -- JSON object
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, item_id))""",
    """CREATE TABLE IF NOT EXISTS indexes (
        index_id TEXT PRIMARY KEY,
        dataset_root TEXT,
        classifier_id TEXT,
        classifier_revision TEXT,
        class_names TEXT,               -- JSON list
        feature_dim INTEGER,
        features_array TEXT,
        created_at REAL,
        updated_at REAL,
        meta TEXT)                      -- JSON object""",
    """CREATE TABLE IF NOT EXISTS index_entries (
        index_id TEXT,
        path TEXT,
        sha256 TEXT,
        label INTEGER,
        pred INTEGER,
        prob_label REAL,
        prob_pred REAL,
        correct INTEGER,
        row INTEGER,
        top5 TEXT,                      -- JSON list
        mtime REAL,
        size INTEGER,
        PRIMARY KEY (index_id, path))""",
    # Retrieval asks for "correct samples of class c" within one index.
    "CREATE INDEX IF NOT EXISTS index_entries_by_label ON index_entries(index_id, label, correct)",
)


def _v1_initial_layout(conn: sqlite3.Connection) -> None:
    legacy_cols = table_columns(conn, "results")
    if legacy_cols and "kind" not in legacy_cols:
        conn.execute("ALTER TABLE results RENAME TO results_v0")
    _run_all(conn, _V1_TABLES)
    if legacy_cols and "kind" not in legacy_cols:
        _import_v0_results(conn, legacy_cols)
        conn.execute("DROP TABLE results_v0")


def _import_v0_results(conn: sqlite3.Connection, cols: list[str]) -> None:
    """Prototype rows: kind lived inside the payload (if anywhere); artifacts were {name: "ab/<sha>.<ext>"}."""
    artifacts_col = "artifacts" if "artifacts" in cols else "NULL"
    created_col = "created_at" if "created_at" in cols else "0"
    rows = conn.execute(f"SELECT key, payload, {artifacts_col}, {created_col} FROM results_v0").fetchall()
    result_rows, artifact_rows = [], []
    for key, payload_text, artifacts_text, created_at in rows:
        try:
            payload = json.loads(payload_text) if payload_text else {}
        except ValueError:
            payload = None
        if not isinstance(payload, dict):  # keep unparseable prototype payloads rather than drop them
            payload = {"legacy_payload": payload_text}
        kind = payload.get("kind") if isinstance(payload.get("kind"), str) else "legacy"
        result_rows.append((key, kind, json.dumps(payload, ensure_ascii=False), float(created_at or 0.0)))
        try:
            refs = json.loads(artifacts_text) if artifacts_text else {}
        except ValueError:
            refs = {}
        for name, rel in (refs.items() if isinstance(refs, dict) else ()):
            p = PurePosixPath(str(rel))
            sha, ext = p.stem, p.suffix.lstrip(".")
            if len(sha) == 64 and ext:
                artifact_rows.append((key, str(name), sha, ext, None))
    conn.executemany("INSERT INTO results(key, kind, payload, created_at) VALUES (?, ?, ?, ?)", result_rows)
    conn.executemany("INSERT INTO result_artifacts(result_key, name, sha256, ext, size) VALUES (?, ?, ?, ?, ?)",
                     artifact_rows)


def _v2_index_entropy(conn: sqlite3.Connection) -> None:
    """Per-image prediction entropy (nats) for the failure-modes easy/hard split. Rows indexed before this
    step keep NULL; readers estimate it from the stored top-5 (see failure_modes/split.py)."""
    if "entropy" not in table_columns(conn, "index_entries"):
        conn.execute("ALTER TABLE index_entries ADD COLUMN entropy REAL")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial layout: results, artifact refs, runs, reference index (imports prototype rows)",
              _v1_initial_layout),
    Migration(2, "reference index: per-image prediction entropy column", _v2_index_entropy),
)

CURRENT_VERSION = MIGRATIONS[-1].version


def _validate(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..N without gaps, got {versions}")


_validate(MIGRATIONS)


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def newer_schema_error(db_path: object, found: int, supported: int) -> StoreError:
    return StoreError(
        f"The results database {db_path} was written by a newer version of NEMO Desktop "
        f"(schema version {found}; this version understands up to {supported}).",
        hint="Upgrade NEMO Desktop, or point NEMO_HOME at another folder to use a separate store with this "
             "version. The database was left untouched.",
        detail=f"PRAGMA user_version = {found} > {supported}")


def migrate(conn: sqlite3.Connection, db_path: object,
            migrations: Sequence[Migration] = MIGRATIONS) -> tuple[int, int]:
    """Bring the database up to the last migration; returns (version before, version after).

    The connection must be in autocommit mode (isolation_level=None): each step opens its own transaction.
    """
    _validate(migrations)
    target = migrations[-1].version if migrations else 0
    start = user_version(conn)
    if start > target:
        raise newer_schema_error(db_path, start, target)
    for m in migrations:
        if m.version <= start:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            found = user_version(conn)  # another process may have migrated while we waited for the lock
            if found > target:
                raise newer_schema_error(db_path, found, target)
            if found < m.version:
                m.apply(conn)
                conn.execute(f"PRAGMA user_version = {int(m.version)}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return start, user_version(conn)
