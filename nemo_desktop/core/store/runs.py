"""Runs in the results store: a benchmark or batch run and the status of each of its items."""
from __future__ import annotations

import json
import sqlite3
import time
import uuid

from ..base.errors import StoreError
from .serialize import _dump_json


class RunsMixin:
    """The run methods of ResultsStore (needs its `transaction()` and `_reading()`)."""

    def create_run(self, kind: str, config: dict, run_id: str | None = None) -> str:
        run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        try:
            with self.transaction() as conn:
                conn.execute("INSERT INTO runs(run_id, kind, config, created_at, status) VALUES (?, ?, ?, ?, ?)",
                             (run_id, kind, _dump_json(config, "run config"), time.time(), "created"))
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"A run with id {run_id!r} already exists.",
                             hint="Resume that run, or choose another id.", detail=repr(exc)) from exc
        return run_id

    @staticmethod
    def _run_dict(row: tuple) -> dict:
        run_id, kind, config, created_at, status = row
        return {"run_id": run_id, "kind": kind, "config": json.loads(config), "created_at": created_at,
                "status": status}

    def get_run(self, run_id: str) -> dict | None:
        with self._reading() as conn:
            row = conn.execute("SELECT run_id, kind, config, created_at, status FROM runs WHERE run_id = ?",
                               (run_id,)).fetchone()
        return None if row is None else self._run_dict(row)

    def list_runs(self, kind: str | None = None) -> list[dict]:
        sql = "SELECT run_id, kind, config, created_at, status FROM runs"
        params: tuple = ()
        if kind is not None:
            sql, params = sql + " WHERE kind = ?", (kind,)
        with self._reading() as conn:
            rows = conn.execute(sql + " ORDER BY created_at DESC, rowid DESC", params).fetchall()
        return [self._run_dict(r) for r in rows]

    def set_run_status(self, run_id: str, status: str) -> None:
        with self.transaction() as conn:
            if conn.execute("UPDATE runs SET status = ? WHERE run_id = ?", (status, run_id)).rowcount == 0:
                raise StoreError(f"There is no run {run_id!r} in the results store.",
                                 hint="List the runs with `nemo cache info`.")

    def delete_run(self, run_id: str) -> None:
        """Forget a run and its items (the results it produced stay)."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

    def add_run_item(self, run_id: str, item_id: str, result_key: str | None, status: str,
                     error: dict | None = None) -> None:
        error_text = None if error is None else _dump_json(error, "run item error")
        try:
            with self.transaction() as conn:
                conn.execute(
                    "INSERT INTO run_items(run_id, item_id, result_key, status, error, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(run_id, item_id) DO UPDATE SET "
                    "result_key = excluded.result_key, status = excluded.status, error = excluded.error, "
                    "updated_at = excluded.updated_at",
                    (run_id, item_id, result_key, status, error_text, time.time()))
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"There is no run {run_id!r} to add item {item_id!r} to.",
                             hint="Create the run first with create_run().", detail=repr(exc)) from exc

    def run_items(self, run_id: str) -> list[dict]:
        with self._reading() as conn:
            rows = conn.execute("SELECT item_id, result_key, status, error, updated_at FROM run_items "
                                "WHERE run_id = ? ORDER BY rowid", (run_id,)).fetchall()
        return [{"item_id": i, "result_key": k, "status": s, "error": None if e is None else json.loads(e),
                 "updated_at": u} for i, k, s, e, u in rows]
