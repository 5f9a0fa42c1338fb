"""A damaged database moved aside: repair keeps its artifact files until it is discarded, salvage recovers what
SQLite can still read, and a 0-byte database file with nothing beside it is an empty store (with stored files
beside it, it is a truncated database: see test_store_quarantine.py)."""
from __future__ import annotations

import os
import sqlite3

import pytest

from nemo_desktop.cli.main import main
from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.store import ResultsStore
from nemo_desktop.core.store.maintenance import PROBLEM_KEPT, PROBLEM_ORPHAN
from nemo_desktop.core.store.paths import get_paths
from nemo_desktop.core.store.salvage import SALVAGE_STAGE, salvage_into

N_RESULTS = 60


def _fill(store) -> dict[str, bytes]:
    """Results with two artifact files each (one shared by all) and a benchmark run with one item each."""
    run = store.create_run("benchmark", {"config": "t"})
    keys = {}
    for i in range(N_RESULTS):
        key = f"{i:04d}" + "k" * 60
        store.put(key, "explanation", {"i": i, "text": "x" * 1500},  # ~1.5 KB rows: the table spans many pages
                  {"own": f"artifact {i}".encode(), "shared": b"shared bytes"})
        store.add_run_item(run, f"item-{i}", key, "done")
        keys[key] = f"artifact {i}".encode()
    return keys


def _damage(db_path) -> None:
    """Overwrite the header magic (the file no longer opens at all) and one page in the middle of the data."""
    with sqlite3.connect(db_path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = db_path.stat().st_size // page_size
    with open(db_path, "r+b") as f:
        f.write(b"DAMAGED-HEADER!!")
        f.seek(page_size * (pages // 2))
        f.write(os.urandom(page_size))


@pytest.fixture
def damaged(tmp_path):
    paths = get_paths().ensure()
    with ResultsStore.open(paths) as store:
        keys = _fill(store)
        artifact_files = sorted(p for p in store.artifacts_dir.rglob("*") if p.is_file())
    _damage(paths.database)
    store = ResultsStore.open(paths)
    assert store.recovered_from is not None
    yield store, keys, artifact_files
    store.close()


def test_repair_never_deletes_the_files_of_a_moved_aside_database(damaged, capsys):
    store, _keys, files = damaged
    assert len(files) == N_RESULTS + 1
    problems = store.check()
    assert not any(p.startswith(PROBLEM_ORPHAN) for p in problems)  # not "safe to remove"
    kept = [p for p in problems if p.startswith(PROBLEM_KEPT)]
    assert len(kept) == 1 and str(store.recovered_from) in kept[0] and f"{len(files)} artifact file" in kept[0]
    assert "nemo cache salvage" in kept[0] and "nemo cache discard" in kept[0]
    assert store.cleanup()["orphans"] == 0
    store.close()
    assert main(["cache", "check", "--repair"]) == 1
    out = capsys.readouterr().out
    assert "removed 0 leftover temporary file(s); moved 0 orphan artifact file(s) to the quarantine" in out
    assert f"{len(files)} artifact file(s) not used by the current database are kept" in out
    assert all(p.is_file() for p in files)


def test_salvage_recovers_the_readable_results_then_discard_frees_the_rest(damaged, capsys):
    store, keys, files = damaged
    aside = store.recovered_from
    token = CancelToken()
    token.cancel()
    with pytest.raises(JobCancelled):  # Ctrl-C: the results' transaction is rolled back
        salvage_into(store, aside, JobContext(cancel=token))
    assert not any(store.has(k) for k in keys)
    seen = []
    report = salvage_into(store, aside, JobContext(lambda p: seen.append((p.stage, p.done, p.total))))
    assert seen[0][:2] == (SALVAGE_STAGE, 0) and seen[-1][0] == SALVAGE_STAGE and seen[-1][1] == seen[-1][2] > 0
    assert report.damaged_regions >= 1
    # A random page in the middle of the table is lost; the rest comes back intact with its files.
    assert N_RESULTS * 0.7 <= report.results < N_RESULTS, report
    recovered = [k for k in keys if store.has(k)]
    assert len(recovered) == report.results
    for k in recovered:
        r = store.get(k)
        assert r.artifacts["own"].read_bytes() == keys[k] and r.payload["text"] == "x" * 1500
    assert report.runs == 1 and report.run_items >= report.results * 0.7
    assert not [p for p in store.check() if not p.startswith(PROBLEM_KEPT)]
    assert salvage_into(store, aside).results_existing == report.results  # salvaging twice duplicates nothing
    store.close()

    assert main(["cache", "discard", str(aside), "--yes"]) == 0
    assert not aside.exists()
    capsys.readouterr()
    assert main(["cache", "check", "--repair"]) == 0  # the unsalvaged results' files are ordinary orphans now
    assert sum(p.is_file() for p in files) == report.results + 1  # the recovered results' files stayed


def test_salvage_of_a_file_whose_only_damage_is_its_header_recovers_everything(tmp_path):
    paths = get_paths().ensure()
    with ResultsStore.open(paths) as store:
        keys = _fill(store)
    with open(paths.database, "r+b") as f:
        f.write(b"DAMAGED-HEADER!!")
    with ResultsStore.open(paths) as store:
        report = salvage_into(store, store.recovered_from)
        assert report.results == N_RESULTS and report.damaged_regions == 0
        assert report.runs == 1 and report.run_items == N_RESULTS
        assert all(store.has(k) for k in keys) and store.check() == []


def test_discard_refuses_a_file_that_is_not_a_moved_aside_database(tmp_path, capsys):
    other = get_paths().ensure().database.with_name("precious.sqlite")
    other.write_bytes(b"x")
    assert main(["cache", "discard", str(other), "--yes"]) == 2
    assert other.exists() and "not a moved-aside copy" in capsys.readouterr().err
    assert main(["cache", "salvage", str(tmp_path / "no-such.corrupt-1")]) == 2  # a wrong FILE: usage error
    assert "does not exist" in capsys.readouterr().err


def test_a_zero_byte_database_with_nothing_beside_it_is_an_empty_store(caplog, capsys):
    paths = get_paths().ensure()
    paths.database.write_bytes(b"")
    with caplog.at_level("WARNING"), ResultsStore.open(paths) as store:
        assert store.opened_empty and store.recovered_from is None and "empty file (0 bytes)" in caplog.text
        assert store.aside_databases() == []
    capsys.readouterr()
    assert main(["cache", "info"]) == 0
    assert "empty file (0 bytes)" not in capsys.readouterr().err  # the second open finds a real database
    paths.database.unlink()
    paths.database.write_bytes(b"")
    assert main(["cache", "info"]) == 0
    assert "was an empty file (0 bytes)" in capsys.readouterr().err


def _damage_inner_page(db_path) -> None:
    """One page in the middle of the data overwritten; the header stays (the database still opens)."""
    with sqlite3.connect(db_path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = db_path.stat().st_size // page_size
    with open(db_path, "r+b") as f:
        f.seek(page_size * (pages // 2))
        f.write(os.urandom(page_size))


def test_check_repair_moves_a_database_with_a_damaged_inner_page_aside_and_salvages_it(capsys):
    """Issue 42 §3: `check` advised moving such a database aside; `check --repair` now does it, under the
    documented name <database>.corrupt-<time>, and salvages its readable results into a fresh database."""
    import json

    from nemo_desktop.core.store.salvage import ASIDE_RE

    paths = get_paths().ensure()
    with ResultsStore.open(paths) as store:
        keys = _fill(store)
    _damage_inner_page(paths.database)
    assert main(["cache", "check"]) == 1
    assert "`nemo cache check --repair` moves it aside" in capsys.readouterr().out
    main(["cache", "check", "--repair", "--json"])
    out = json.loads(capsys.readouterr().out)
    aside = paths.database.with_name(out["repaired"]["moved_aside"].rsplit("/", 1)[-1])
    assert aside.is_file() and ASIDE_RE.search(aside.name) and aside.name.startswith(paths.database.name)
    salvage = out["repaired"]["salvage"]
    assert salvage["damaged_regions"] >= 1 and N_RESULTS * 0.7 <= salvage["results"] < N_RESULTS
    assert not any(p.startswith("database") for p in out["problems"])
    with ResultsStore.open(paths) as store:
        assert sum(store.has(k) for k in keys) == salvage["results"] and store.recovered_from is None


def test_salvage_text_reports_every_loss_its_json_knows(damaged, capsys):
    """Issue 42 §3: the text said "0 not recovered" while --json counted results whose artifact references were
    unreadable; it now names each loss: missing files, unreadable references, damaged regions."""
    from nemo_desktop.cli.commands.cache import format_salvage
    from nemo_desktop.core.store.salvage import SalvageReport

    store, _keys, _files = damaged
    aside = store.recovered_from
    store.close()
    assert main(["cache", "salvage", str(aside)]) == 0
    text = capsys.readouterr().out
    assert "damaged region(s) of the database could not be read" in text
    report = SalvageReport(aside, results=3, results_unreadable_refs=60, results_missing_files=2, damaged_regions=4)
    text = format_salvage(report)
    assert "3 result(s) recovered" in text and "62 not recovered" in text
    assert "60 result(s) not recovered because the list of their artifact files was on a damaged page" in text
    assert "2 result(s) not recovered because their artifact files are gone" in text
    assert "4 damaged region(s)" in text
