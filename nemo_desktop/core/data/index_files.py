"""The reference index's files: per-batch embedding chunks, the consolidated feature matrix and the
entries sidecar, and the one transaction that publishes them (see reference_index.py for the design).

Array names in the store: `index-<id>-chunk-<first row>` (a committed batch's embeddings, rows numbered
after the published matrix), `index-<id>-<token>` (the matrix), `index-<id>-<token>-entries-<token>`
(the sidecar: the rows as one structured array).
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import time
from pathlib import Path

import numpy as np

from ..store.arrays import numbered_arrays
from ..store.atomic import atomic_writer

log = logging.getLogger(__name__)

CHUNK_MARK = "-chunk-"
_GATHER_ROWS = 16384  # rows copied per step when the matrix is rewritten


def _matrix_prefix(index_id: str) -> str:
    return f"index-{index_id}"


def chunk_name(index_id: str, start_row: int) -> str:
    return f"{_matrix_prefix(index_id)}{CHUNK_MARK}{start_row:012d}"


def meta_of(conn, index_id: str) -> dict | None:
    r = conn.execute("SELECT meta FROM indexes WHERE index_id=?", (index_id,)).fetchone()
    if r is None:
        return None
    return json.loads(r[0]) if r[0] else {}


def write_meta(conn, index_id: str, meta: dict) -> None:
    conn.execute("UPDATE indexes SET meta=?, updated_at=? WHERE index_id=?", (json.dumps(meta), time.time(), index_id))


def _chunk_files(store, index_id: str) -> dict[int, Path]:
    return numbered_arrays(store.arrays_dir, _matrix_prefix(index_id) + CHUNK_MARK)


_LIVE_COLUMNS = "path, row, sha256, label, pred, prob_label, prob_pred, correct, entropy"


def consolidate(store, index_id: str, *, remove_orphans: bool) -> None:
    """Rewrite the matrix as exactly the live rows in (correct first, label, path) order and publish it,
    together with the entries sidecar (the same rows as one structured array, so that loading a large index
    does not walk the SQLite table).

    Optimistic: if another writer commits meanwhile (meta version changed), the new files are discarded and
    the index stays as it was (still consistent; the other writer consolidates).
    """
    with store.transaction() as conn:
        head = conn.execute("SELECT features_array, feature_dim, meta FROM indexes WHERE index_id=?",
                            (index_id,)).fetchone()
        if head is None:
            return
        base_name, dim, meta_text = head
        meta = json.loads(meta_text) if meta_text else {}
        live = conn.execute(f"SELECT {_LIVE_COLUMNS} FROM index_entries WHERE index_id=? AND row IS NOT NULL "
                            "ORDER BY correct DESC, label, path", (index_id,)).fetchall()
    version = meta.get("version", 0)
    dtype = np.dtype(meta.get("feature_dtype", "float32"))
    base = store.open_array(base_name) if base_name and store.array_path(base_name).exists() else None
    n_base = 0 if base is None else len(base)
    chunk_paths = _chunk_files(store, index_id)
    starts = np.array(sorted(chunk_paths), dtype=np.int64)
    chunks = [np.load(chunk_paths[s], mmap_mode="r") for s in starts.tolist()]
    old_rows = np.fromiter((r[1] for r in live), np.int64, len(live))

    # Which stored rows are still readable: base rows below n_base, chunk rows inside their chunk.
    in_base = old_rows < n_base
    ci = np.searchsorted(starts, old_rows, side="right") - 1 if len(starts) else np.full(len(live), -1)
    lengths = np.array([len(c) for c in chunks], np.int64)
    in_chunk = (~in_base) & (ci >= 0)
    in_chunk[in_chunk] &= (old_rows[in_chunk] - starts[ci[in_chunk]]) < lengths[ci[in_chunk]]
    lost = ~(in_base | in_chunk)

    aligned = (base is not None and not lost.any() and not in_chunk.any() and len(live) == n_base
               and np.array_equal(old_rows, np.arange(n_base)) and base.dtype == dtype)
    if aligned:  # the matrix is current: at most the sidecar to refresh and leftovers to remove
        if not sidecar_current(store, meta):
            _publish(store, index_id, base_name, dim, live, version, new_matrix=None, leftover_end=None)
        if remove_orphans:
            for p in chunk_paths.values():
                _unlink_quietly(p)
            _remove_unreferenced(store, index_id, keep=_published_names(store, index_id))
        return

    dim = int(dim or (chunks[0].shape[1] if chunks else (base.shape[1] if base is not None and base.ndim == 2 else 0)))
    keep = ~lost
    new_name = f"{_matrix_prefix(index_id)}-{secrets.token_hex(4)}"
    path = store.array_path(new_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    src_rows = old_rows[keep]
    src_in_base, src_ci = in_base[keep], ci[keep]
    with atomic_writer(path) as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (len(src_rows), dim)})
        for s in range(0, len(src_rows), _GATHER_ROWS):
            r, b, c = src_rows[s:s + _GATHER_ROWS], src_in_base[s:s + _GATHER_ROWS], src_ci[s:s + _GATHER_ROWS]
            block = np.empty((len(r), dim), np.float32)
            if b.any():
                block[b] = base[r[b]]
            for k in np.unique(c[~b]).tolist():
                m = (~b) & (c == k)
                block[m] = chunks[k][r[m] - starts[k]]
            f.write(np.ascontiguousarray(block.astype(dtype, copy=False)).tobytes())
    del base, chunks

    # Chunks whose rows are published are consumed. An unreferenced chunk is left by a killed run, or is
    # being committed by a concurrent build right now: only the build itself (remove_orphans) removes those,
    # and new row numbers never reuse the range of a chunk that stays.
    used = set(np.unique(ci[in_chunk]).tolist())
    leftover = [] if remove_orphans else [k for k in range(len(starts)) if k not in used]
    leftover_end = max([0] + [int(starts[k] + lengths[k]) for k in leftover])
    if lost.any():
        log.warning("Reference index %s: %d rows lost their features (a chunk file is missing); they are "
                    "re-processed by the next build", index_id, int(lost.sum()))
    published = _publish(store, index_id, new_name, dim, [r for r, k in zip(live, keep) if k], version,
                         new_matrix=path, leftover_end=leftover_end,
                         lost_paths=[r[0] for r, k in zip(live, keep) if not k])
    if not published:
        return
    # Published: the old matrix and consumed chunks are garbage now.
    if base_name:
        _unlink_quietly(store.array_path(base_name))
    for k, s in enumerate(starts.tolist()):
        if k not in leftover:
            _unlink_quietly(chunk_paths[s])
    if remove_orphans:
        _remove_unreferenced(store, index_id, keep=_published_names(store, index_id))


def sidecar_current(store, meta: dict) -> bool:
    name = meta.get("entries_array")
    return bool(name) and meta.get("entries_version") == meta.get("version", 0) and store.array_path(name).exists()


def _entries_struct(rows: list[tuple]) -> tuple[np.ndarray, str]:
    """Rows (as in _LIVE_COLUMNS) -> a structured array with paths relative to their common prefix."""
    paths = [r[0] for r in rows]
    prefix = os.path.commonprefix(paths) if paths else ""
    rel = [p[len(prefix):].encode("utf-8") for p in paths]
    width = max([1] + [len(b) for b in rel])
    dt = np.dtype([("path", f"S{width}"), ("sha256", "S64"), ("label", "<i8"), ("pred", "<i8"),
                   ("prob_label", "<f4"), ("prob_pred", "<f4"), ("correct", "?"), ("entropy", "<f4")])
    out = np.empty(len(rows), dt)
    if rows:
        out["path"] = rel
        out["sha256"] = [r[2].encode("ascii") for r in rows]
        for col, i in (("label", 3), ("pred", 4), ("prob_label", 5), ("prob_pred", 6), ("correct", 7)):
            out[col] = [r[i] for r in rows]
        out["entropy"] = [np.nan if r[8] is None else r[8] for r in rows]  # NULL: indexed before schema 2
    return out, prefix


def _publish(store, index_id: str, matrix_name: str, dim, rows: list[tuple], version: int, *, new_matrix,
             leftover_end, lost_paths=()) -> bool:
    """Write the entries sidecar, then in one transaction (if nobody wrote since `version`): row numbers,
    matrix name, sidecar name. Returns False (new files removed) when another writer got there first."""
    entries_name = f"{matrix_name}-entries-{secrets.token_hex(3)}"
    struct, prefix = _entries_struct(rows)
    store.save_array(entries_name, struct)
    with store.transaction() as conn:
        meta_now = meta_of(conn, index_id)
        if meta_now is None or meta_now.get("version", 0) != version:
            store.array_path(entries_name).unlink(missing_ok=True)
            if new_matrix is not None:
                new_matrix.unlink(missing_ok=True)  # someone wrote meanwhile; they will publish their own
            return False
        if new_matrix is not None:
            conn.executemany("DELETE FROM index_entries WHERE index_id=? AND path=?",
                             [(index_id, p) for p in lost_paths])
            conn.executemany("UPDATE index_entries SET row=? WHERE index_id=? AND path=?",
                             [(i, index_id, r[0]) for i, r in enumerate(rows)])
            meta_now["next_row"] = max(len(rows), leftover_end or 0)
            conn.execute("UPDATE indexes SET features_array=?, feature_dim=? WHERE index_id=?",
                         (matrix_name, dim, index_id))
        old_entries = meta_now.get("entries_array")
        meta_now["version"] = version + 1
        meta_now.update(entries_array=entries_name, entries_version=version + 1, path_prefix=prefix)
        write_meta(conn, index_id, meta_now)
    if old_entries and old_entries != entries_name:
        _unlink_quietly(store.array_path(old_entries))
    return True


def _published_names(store, index_id: str) -> set[str]:
    with store.transaction() as conn:
        r = conn.execute("SELECT features_array, meta FROM indexes WHERE index_id=?", (index_id,)).fetchone()
    if r is None:
        return set()
    meta = json.loads(r[1]) if r[1] else {}
    return {n for n in (r[0], meta.get("entries_array")) if n}


def _unlink_quietly(path: Path) -> None:
    """Remove a file that may be gone already, or (Windows) still memory-mapped by a reader: the next
    consolidation removes what is left."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.debug("could not remove %s yet: %s", path, exc)


def _remove_unreferenced(store, index_id: str, keep: set[str]) -> None:
    """Matrices of this index left by interrupted consolidations (not chunks: a writer may be filling one)."""
    prefix = _matrix_prefix(index_id) + "-"
    if not store.arrays_dir.is_dir():
        return
    for p in store.arrays_dir.glob(f"{prefix}*.npy"):
        if p.stem not in keep and CHUNK_MARK not in p.stem:
            _unlink_quietly(p)


def remove_array_files(store, index_id: str) -> None:
    if store.arrays_dir.is_dir():
        for p in store.arrays_dir.glob(f"{_matrix_prefix(index_id)}-*.npy"):
            _unlink_quietly(p)
