"""Issue 34 §2: a 0-byte database must not empty the store. An empty database file beside stored files is a
truncated database: it is moved aside like the other damaged ones, and `nemo cache check --repair` never deletes
artifact files that no healthy database accounts for; it moves them to a dated quarantine folder that
`nemo cache quarantine list|restore|purge` manages."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

from nemo_desktop.cli.main import main
from nemo_desktop.core.base.errors import StoreError
from nemo_desktop.core.store import ResultsStore
from nemo_desktop.core.store.maintenance import PROBLEM_KEPT, PROBLEM_ORPHAN
from nemo_desktop.core.store.paths import get_paths
from nemo_desktop.core.store.salvage import salvage_into

from test_store_salvage import N_RESULTS, _damage, _fill


def _truncate(db_path) -> None:
    db_path.write_bytes(b"")  # the file is still there, with 0 bytes: a crash or a full disk mid-write


def _overwrite_header(db_path) -> None:
    with open(db_path, "r+b") as f:
        f.write(b"DAMAGED-HEADER!!")


DAMAGE = {"zero-bytes": _truncate, "header": _overwrite_header, "damaged-page": _damage}


def _artifact_files(store) -> dict:
    return {p.relative_to(store.artifacts_dir): p.read_bytes()
            for p in sorted(store.artifacts_dir.rglob("*")) if p.is_file()}


def _quarantine_json(capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["cache", "quarantine", "list", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_damaged_database_never_costs_an_artifact_file(how, capsys):
    paths = get_paths().ensure()
    with ResultsStore.open(paths) as store:
        keys = _fill(store)
        before = _artifact_files(store)
    assert len(before) == N_RESULTS + 1
    DAMAGE[how](paths.database)

    with ResultsStore.open(paths) as store:
        aside = store.recovered_from
        assert aside is not None and aside.is_file() and not store.opened_empty  # moved aside, as damaged
        assert store.info()["results"] == 0
        problems = store.check()
        assert not any(p.startswith(PROBLEM_ORPHAN) for p in problems)  # nothing is called "safe to remove"
        assert any(p.startswith(PROBLEM_KEPT) and str(aside) in p for p in problems)
    if how == "zero-bytes":
        assert aside.stat().st_size == 0
    capsys.readouterr()
    assert main(["cache", "check", "--repair"]) == 1  # the moved-aside database is still pending
    assert "moved 0 orphan artifact file(s)" in capsys.readouterr().out
    with ResultsStore.open(paths) as store:
        assert _artifact_files(store) == before  # every file still in place, byte for byte
        if how == "zero-bytes":
            report = salvage_into(store, aside)
            assert report.results == 0 and any("empty file (0 bytes)" in n for n in report.notes)
    assert _quarantine_json(capsys) == []

    # Given up: --repair moves the files no database accounts for to the quarantine, it deletes none.
    assert main(["cache", "discard", str(aside), "--yes"]) == 0
    capsys.readouterr()
    assert main(["cache", "check", "--repair"]) == 0
    out = capsys.readouterr().out
    assert f"moved {len(before)} orphan artifact file(s) to the quarantine" in out
    listed = _quarantine_json(capsys)
    assert len(listed) == 1 and listed[0]["files"] == len(before) and listed[0]["name"] in out
    assert listed[0]["bytes"] == sum(len(b) for b in before.values())
    with ResultsStore.open(paths) as store:
        assert _artifact_files(store) == {}
        assert store.info()["quarantined_files"] == len(before)

    # Restored: back in place, byte for byte, and a salvage of the old database (had it been kept) finds them.
    capsys.readouterr()
    assert main(["cache", "quarantine", "restore", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"restored": len(before), "already_present": 0, "kept": 0}
    with ResultsStore.open(paths) as store:
        assert _artifact_files(store) == before
    assert _quarantine_json(capsys) == []

    # Quarantined again, then purged: only `purge` deletes, and only what it lists.
    assert main(["cache", "check", "--repair"]) == 0
    name = _quarantine_json(capsys)[0]["name"]
    assert main(["cache", "quarantine", "purge", "no-such-folder", "--yes"]) == 2
    assert "no quarantine folder" in capsys.readouterr().err
    assert main(["cache", "quarantine", "purge", name, "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == len(before)
    assert _quarantine_json(capsys) == []
    assert len(keys) == N_RESULTS


def test_a_zero_byte_database_beside_files_is_refused_without_recovery():
    paths = get_paths().ensure()
    with ResultsStore.open(paths) as store:
        store.put("k" * 64, "explanation", {"x": 1}, {"a": b"bytes"})
    _truncate(paths.database)
    with pytest.raises(StoreError, match=r"empty file \(0 bytes\) although 1 stored file"):
        ResultsStore.open(paths, recover_corrupt=False)
    assert paths.database.stat().st_size == 0 and not list(paths.database.parent.glob("*.corrupt-*"))


def test_a_zero_byte_database_beside_only_its_write_ahead_log_is_moved_aside_with_it():
    paths = get_paths().ensure()
    paths.database.write_bytes(b"")
    wal = paths.database.with_name(paths.database.name + "-wal")
    wal.write_bytes(b"\x37\x7f\x06\x82" + b"\0" * 60)  # a WAL header: the newest commits may be in there
    with ResultsStore.open(paths) as store:
        assert store.recovered_from is not None
        assert store.recovered_from.with_name(store.recovered_from.name + "-wal").is_file()


def test_salvage_takes_back_files_a_repair_quarantined(capsys):
    """A database moved aside by hand is unknown to the store: its files look like orphans and --repair
    quarantines them. Salvaging that database later moves the files it needs back."""
    paths = get_paths().ensure()
    with ResultsStore.open(paths) as store:
        keys = _fill(store)
    by_hand = paths.database.with_name("my-copy.sqlite")
    shutil.move(paths.database, by_hand)
    capsys.readouterr()
    assert main(["cache", "check", "--repair"]) == 0
    assert f"moved {N_RESULTS + 1} orphan artifact file(s)" in capsys.readouterr().out
    assert main(["cache", "salvage", str(by_hand)]) == 0
    out = capsys.readouterr().out
    assert f"{N_RESULTS} result(s) recovered" in out and f"{N_RESULTS + 1} artifact file(s)" in out
    with ResultsStore.open(paths) as store:
        for k, own in keys.items():
            assert store.get(k).artifact_bytes("own") == own
        assert store.check() == []


def test_restore_never_overwrites_a_different_file(store):
    r = store.put("k" * 64, "explanation", {"x": 1}, {"a": b"original"})
    path = r.artifacts["a"]
    store.delete(r.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"original")  # an orphan (as a crash between file and row leaves it)
    assert store.cleanup() == {"tmp": 0, "orphans": 1} and not path.exists()
    [folder] = store.quarantine_folders()
    assert (folder.path / path.relative_to(store.artifacts_dir)).read_bytes() == b"original"
    path.write_bytes(b"something else")  # its place is taken by different bytes
    assert store.restore_quarantine() == {"restored": 0, "already_present": 0, "kept": 1}
    assert path.read_bytes() == b"something else"
    assert store.quarantine_folders()[0].files == 1  # still kept
    path.write_bytes(b"original")
    assert store.restore_quarantine(folder.name) == {"restored": 0, "already_present": 1, "kept": 0}
    assert store.quarantine_folders() == []


_OPEN_AT_GO = """
import sys, time
from pathlib import Path
from nemo_desktop.core.store import ResultsStore
db, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.0005)
with ResultsStore.open(db_path=db) as s:
    s.put("key-" + sys.argv[3], "t", {"p": sys.argv[3]}, {"a": sys.argv[3].encode()})
    print("OK", s.recovered_from is not None)
"""


def test_processes_opening_a_truncated_store_at_once_move_it_aside_once(tmp_path):
    """The decision (empty file beside stored files: move it aside) is taken under an inter-process lock:
    a database another process has just created is never taken for the truncated one."""
    db = tmp_path / "store" / "results.sqlite"
    with ResultsStore.open(db_path=db) as s:
        s.put("old", "t", {}, {"a": b"old bytes"})
    _truncate(db)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _OPEN_AT_GO, str(db), str(go), str(i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    time.sleep(1.0)
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        outs.append(out.split())
    assert sorted(o[1] for o in outs) == ["False", "False", "False", "True"]  # one of them moved it aside
    assert len(list(db.parent.glob("results.sqlite.corrupt-*"))) == 1
    with ResultsStore.open(db_path=db) as s:
        assert {r.key for r in s.find()} == {f"key-{i}" for i in range(4)}  # nobody's results went aside
