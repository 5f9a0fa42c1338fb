"""Schema versions, migrations, and the bad-input cases: newer schema, corrupt file, unwritable root."""
import json
import os
import sqlite3

import pytest

from nemo_desktop.core.base.errors import StoreError
from nemo_desktop.core.store import ResultsStore, get_paths
from nemo_desktop.core.store import migrations as mig

V1_TABLES = {"results", "result_artifacts", "runs", "run_items", "indexes", "index_entries"}


def tables(db_path):
    con = sqlite3.connect(db_path)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()


def pragma(db_path, name):
    con = sqlite3.connect(db_path)
    try:
        return con.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        con.close()


def test_fresh_store_has_current_schema_in_wal_mode(store, db_path):
    assert store.schema_version() == mig.CURRENT_VERSION == pragma(db_path, "user_version")
    assert V1_TABLES <= tables(db_path)
    assert pragma(db_path, "journal_mode") == "wal"
    con = store._conn
    assert con.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
    assert con.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert con.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def make_v0_database(db_path, artifacts_dir):
    """The pre-versioned prototype layout: no `kind` column, artifacts as a JSON map, user_version 0."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    sha = "ab" + "1" * 62
    (artifacts_dir / "ab").mkdir(parents=True)
    (artifacts_dir / "ab" / f"{sha}.png").write_bytes(b"png bytes of the prototype")
    con = sqlite3.connect(db_path)
    con.execute("CREATE TABLE results (key TEXT PRIMARY KEY, payload TEXT NOT NULL, artifacts TEXT, "
                "created_at REAL)")
    con.executemany("INSERT INTO results VALUES (?, ?, ?, ?)", [
        ("k-caption", json.dumps({"kind": "caption", "text": "a dog"}), json.dumps({"input": f"ab/{sha}.png"}),
         100.0),
        ("k-nokind", json.dumps({"text": "old"}), None, 101.0),
        ("k-garbage", "{not json", "also not json", None),
    ])
    con.commit()
    assert con.execute("PRAGMA user_version").fetchone()[0] == 0
    con.close()
    return sha


def test_migration_from_prototype_v0_keeps_the_data(db_path):
    art = db_path.parent / "artifacts"
    sha = make_v0_database(db_path, art)
    with ResultsStore.open(db_path=db_path) as s:
        assert s.schema_version() == mig.CURRENT_VERSION
        r = s.get("k-caption")
        assert r.kind == "caption" and r.payload == {"kind": "caption", "text": "a dog"}
        assert r.created_at == 100.0
        assert r.artifacts == {"input": art / "ab" / f"{sha}.png"}
        assert r.artifact_bytes("input") == b"png bytes of the prototype"
        assert s.get("k-nokind").kind == "legacy" and s.get("k-nokind").payload == {"text": "old"}
        assert s.get("k-garbage").payload == {"legacy_payload": "{not json"}
        # the store works normally afterwards
        s.put("new", "caption", {"text": "new"})
        assert [x.key for x in s.find("caption")] == ["new", "k-caption"]
    assert "results_v0" not in tables(db_path) and V1_TABLES <= tables(db_path)
    assert pragma(db_path, "user_version") == mig.CURRENT_VERSION
    # opening again is a no-op
    with ResultsStore.open(db_path=db_path) as s:
        assert s.info()["results"] == 4


def test_migrations_apply_in_order_and_a_failing_step_rolls_back(tmp_path):
    db = tmp_path / "m.sqlite"
    con = sqlite3.connect(db, isolation_level=None)
    applied = []
    n = mig.CURRENT_VERSION  # the shipped steps come first; the test appends two of its own

    def pin(c):
        applied.append(n + 1)
        c.execute("ALTER TABLE results ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")

    def broken(c):
        applied.append(n + 2)
        c.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("bug in the last migration")

    chain = list(mig.MIGRATIONS) + [mig.Migration(n + 1, "pin results", pin)]
    assert mig.migrate(con, db, chain) == (0, n + 1)
    assert "pinned" in mig.table_columns(con, "results")
    assert mig.migrate(con, db, chain) == (n + 1, n + 1) and applied == [n + 1]  # idempotent

    with pytest.raises(RuntimeError, match="bug in the last migration"):
        mig.migrate(con, db, chain + [mig.Migration(n + 2, "broken", broken)])
    assert mig.user_version(con) == n + 1
    assert "half_done" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    con.close()

    with pytest.raises(RuntimeError, match="without gaps"):
        mig.migrate(sqlite3.connect(":memory:"), "mem", [mig.Migration(2, "gap", pin)])


def test_database_from_a_newer_version_is_refused_untouched(db_path):
    ResultsStore.open(db_path=db_path).close()
    con = sqlite3.connect(db_path)
    con.execute(f"PRAGMA user_version = {mig.CURRENT_VERSION + 1}")
    con.close()
    before = db_path.read_bytes()
    with pytest.raises(StoreError) as err:
        ResultsStore.open(db_path=db_path)
    e = err.value
    assert "newer version of NEMO Desktop" in e.message and str(db_path) in e.message
    assert f"schema version {mig.CURRENT_VERSION + 1}" in e.message
    assert "Upgrade NEMO Desktop" in e.hint and "NEMO_HOME" in e.hint
    assert db_path.read_bytes() == before
    assert [p.name for p in db_path.parent.glob("*corrupt*")] == []


def test_corrupt_database_is_moved_aside_and_a_fresh_store_created(db_path, caplog):
    db_path.parent.mkdir(parents=True)
    garbage = os.urandom(8192)
    db_path.write_bytes(garbage)
    stale_wal = db_path.with_name(db_path.name + "-wal")
    stale_wal.write_bytes(b"stale wal of the damaged file")
    with caplog.at_level("WARNING"):
        s = ResultsStore.open(db_path=db_path)
    try:
        moved = s.recovered_from
        assert moved is not None and moved.exists() and moved.read_bytes() == garbage
        assert moved.parent == db_path.parent
        assert moved.name.startswith("results.sqlite.corrupt-")
        stamp = moved.name.split("corrupt-")[1]
        assert len(stamp) == 15 and stamp[8] == "-" and stamp.replace("-", "").isdigit()
        assert moved.with_name(moved.name + "-wal").read_bytes() == b"stale wal of the damaged file"
        assert "moved to" in caplog.text and str(moved) in caplog.text
        s.put("k", "x", {"ok": True}, {"a": b"bytes"})
        assert s.get("k").payload == {"ok": True} and s.check() == []
        assert s.info()["recovered_from"] == str(moved)
    finally:
        s.close()
    # a second corrupt file in the same second gets its own name; nothing is overwritten
    db_path.unlink()
    for p in db_path.parent.glob("results.sqlite-*"):
        p.unlink()
    db_path.write_bytes(b"again not a database" * 100)
    with ResultsStore.open(db_path=db_path) as s2:
        assert s2.recovered_from != moved and s2.recovered_from.exists() and moved.exists()


def test_corrupt_database_without_recovery_raises(db_path):
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(os.urandom(4096))
    before = db_path.read_bytes()
    with pytest.raises(StoreError) as err:
        ResultsStore.open(db_path=db_path, recover_corrupt=False)
    assert "not a readable SQLite database" in err.value.message and str(db_path) in err.value.message
    assert "Move the file aside" in err.value.hint
    assert db_path.read_bytes() == before and list(db_path.parent.glob("*corrupt*")) == []


def test_unwritable_root_gives_a_clear_error(tmp_path):
    blocker = tmp_path / "a_regular_file"
    blocker.write_text("not a folder")
    paths = get_paths(home=blocker / "sub")  # fails for everyone, root included
    with pytest.raises(StoreError) as err:
        paths.ensure()
    assert "cannot write" in err.value.message and "NEMO_HOME" in err.value.hint
    with pytest.raises(StoreError):
        ResultsStore.open(paths)
    with pytest.raises(StoreError) as err2:
        ResultsStore.open(db_path=blocker / "store" / "results.sqlite")
    assert "cannot create the store folder" in err2.value.message


def test_open_via_app_paths_uses_the_standard_layout(tmp_path):
    paths = get_paths(home=tmp_path / "home")
    with ResultsStore.open(paths) as s:
        assert s.db_path == paths.database and s.artifacts_dir == paths.artifacts_dir
        s.put("k", "x", {}, {"a": b"1"})
        assert s.get("k").artifacts["a"].is_relative_to(paths.artifacts_dir)
    with ResultsStore.open() as s:  # NEMO_HOME from the autouse fixture
        assert s.db_path == get_paths().database
