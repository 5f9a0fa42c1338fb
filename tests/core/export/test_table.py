"""The per-image table (issue 44): one row per image of the demo dataset for its classifier with every fact the store
holds (the real index, competency scores, failure-modes run, fix and a stored explanation), typed and documented
columns, nulls where a fact does not exist, written in batches; Parquet round-trips through pandas and polars with
the documented schema, and CSV / JSON Lines carry the same values."""
from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_findings import demo_findings  # noqa: E402
from nemo_desktop.core.export import schema  # noqa: E402
from nemo_desktop.core.export.table import PerImageTable  # noqa: E402

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def findings():
    return demo_findings()


@pytest.fixture
def store(findings, tmp_path):
    s = findings.open_store(tmp_path / "store")
    yield s
    s.close()


@pytest.fixture
def table(findings, store):
    return PerImageTable.open(store, str(findings.dataset_dir), findings.classifier_id)


def _rows(table) -> list[dict]:
    out = []
    for cols in table.batches():
        out += [dict(zip(cols, vals)) for vals in zip(*cols.values())]
    return out


def test_the_documentation_is_the_schema():
    doc = (ROOT / "docs" / "per-image-table.md").read_text(encoding="utf-8")
    assert schema.markdown_table() in doc
    assert len(set(schema.NAMES)) == len(schema.NAMES)


def test_the_demo_facts_are_in_their_rows(findings, store, table):
    from nemo_desktop.core.analyses.failure_modes.members import list_modes
    from nemo_desktop.core.analyses.failure_modes.result import FailureModesResult
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    rows = {r["path"]: r for r in _rows(table)}
    index = ReferenceIndex.load(store, findings.index_id)
    assert len(rows) == len(index) == 360 and table.notes == []
    e, names = index.entries, index.class_names
    for i in range(len(index)):  # predictions and embeddings: the index's own rows
        r = rows[str(e.paths[i])]
        assert (r["true_label"], r["pred_label"], r["correct"], r["embedding_row"], r["image_sha256"]) == \
            (names[e.labels[i]], names[e.preds[i]], bool(e.correct[i]), i, e.sha256[i])
        assert r["prob_pred"] == pytest.approx(float(e.prob_pred[i])) and r["topk_labels"][0] == r["pred_label"]
        assert r["topk_probs"] == sorted(r["topk_probs"], reverse=True) and r["index_id"] == findings.index_id
    # Failure modes: every member of every mode, with the mode's sentence; nobody else.
    fm = FailureModesResult.from_dict(store.get(findings.failure_modes_key).payload)
    fm.result_key = findings.failure_modes_key
    expected: dict[str, list] = {}
    for m in list_modes(fm):
        for p in m.paths:
            expected.setdefault(p, []).append((f"{findings.failure_modes_key[:12]}/{m.group_name}/{m.number}",
                                               m.sentence, m.holds))
    assert expected
    for p, r in rows.items():
        got = list(zip(r["failure_mode_ids"] or [], r["failure_mode_sentences"] or [], r["failure_mode_holds"] or []))
        assert got == expected.get(p, []), p
        assert r["failure_modes_key"] == findings.failure_modes_key
    # Competency: the stored score of each image, and its low part at the stored threshold.
    scored = {i["path"]: i["score"] for i in store.get(findings.competency_key).payload["items"]}
    assert set(scored) == set(rows)
    for p, sc in scored.items():
        assert rows[p]["competency"] == pytest.approx(sc["competency"])
        assert rows[p]["competency_low_part"] in ("competent", "unsure", "unfamiliar", "both", "product")
    # The fix: its held-out images with before/after; gained and lost add up to the fix's own counts.
    fix = store.get(findings.fix_key).payload
    in_fix = [r for r in rows.values() if r["fix_key"] is not None]
    assert len(in_fix) == fix["data"]["affected"] + fix["data"]["rest"]
    for name in ("affected", "rest"):
        part = [r for r in in_fix if r["fix_set"] == name]
        assert sum(r["fix_gained"] for r in part) == fix[name]["overall"]["gained"]
        assert sum(r["fix_lost"] for r in part) == fix[name]["overall"]["lost"]
    assert sum(r["fix_gained"] or r["fix_lost"] for r in in_fix) > 0  # the demo fix moved some images
    for r in in_fix:
        assert r["fix_gained"] == (r["fix_pred_before"] != r["true_label"] and r["fix_pred_after"] == r["true_label"])
    # The explanation: on its image only.
    explained = [r for r in rows.values() if r["explanation_key"] is not None]
    assert [r["explanation_key"] for r in explained] == [findings.explanation_key]
    (x,) = explained
    assert (x["explanation"], x["explanation_method"], x["explanation_cei"], x["explanation_edit_verdict"],
            x["explanation_outcome"], x["explanation_count"], x["correct"]) == \
        ("the stroke is broken", "scitx", 42.0, "local", "explained", 1, False)


def test_missing_facts_are_null_and_images_not_indexed_yet_have_path_and_label(findings, tmp_path):
    import shutil

    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.store import ResultsStore

    data = shutil.copytree(findings.dataset_dir, tmp_path / "digits")
    with ResultsStore.open(db_path=tmp_path / "s" / "results.sqlite") as store:
        build_index(data, findings.classifier(), store)
        extra = data / "three" / "copy-of-a-three.png"
        shutil.copy(next((data / "three").glob("*.png")), extra)
        rows = _rows(t := PerImageTable.open(store, str(data), findings.classifier_id))
    assert len(rows) == 361
    facts = [c.name for c in schema.COLUMNS if c.source not in ("dataset", schema.COLUMNS[1].source)]
    assert all(r[k] is None for r in rows for k in facts)  # nothing but the index in this store
    (new,) = [r for r in rows if r["path"] == str(extra)]
    assert new["true_label"] == "three" and all(new[k] is None for k in ("pred_label", "correct", "topk_labels"))
    assert any("not in the reference index yet" in n for n in t.notes)


def test_parquet_round_trips_through_pandas_and_polars_with_the_documented_schema(table, tmp_path):
    target = tmp_path / "findings.parquet"
    done = table.write(target, batch_rows=100)
    assert done["rows"] == 360 and done["format"] == "parquet"
    written = pq.read_schema(target)
    expected = schema.arrow_schema()
    assert written.names == list(schema.NAMES)
    for f in expected:
        got = written.field(f.name)
        assert got.type == f.type and got.metadata[b"doc"] == schema.BY_NAME[f.name].doc.encode()
    meta = pq.read_metadata(target)
    assert meta.num_rows == 360 and meta.num_row_groups == 4  # written 100 rows at a time
    kv = meta.metadata
    assert kv[b"index_id"].decode() == table.head.index_id and json.loads(kv[b"notes"]) == []
    assert json.loads(kv[b"class_names"]) == table.head.class_names

    import pandas as pd

    df = pd.read_parquet(target, dtype_backend="numpy_nullable")
    mine = table.to_pandas()
    assert list(df.columns) == list(mine.columns) == list(schema.NAMES)
    assert str(mine["pred_index"].dtype) == "Int64" and str(mine["correct"].dtype) == "boolean"
    assert str(mine["competency"].dtype) == "Float64" and str(mine["explanation"].dtype).startswith("string")
    for c in schema.COLUMNS:
        a, b = df[c.name].tolist(), mine[c.name].tolist()
        assert [_plain(v) for v in a] == [_plain(v) for v in b], c.name
    assert mine["explanation"].isna().sum() == 359  # a missing fact is <NA>, not a default

    pl = pytest.importorskip("polars")
    frame = pl.read_parquet(target)
    assert frame.columns == list(schema.NAMES) and frame.height == 360
    kinds = {schema.STRING: pl.String, schema.INT: pl.Int64, schema.FLOAT: pl.Float64, schema.BOOL: pl.Boolean}
    for c in schema.COLUMNS:
        dtype = frame.schema[c.name]
        if c.type.startswith("list<"):
            assert dtype == pl.List(kinds[c.type[5:-1]]), c.name
        else:
            assert dtype == kinds[c.type], c.name
    assert frame["explanation"].null_count() == 359
    assert frame.filter(pl.col("explanation").is_not_null())["explanation_cei"].to_list() == [42.0]


def _plain(v):
    """A cell as plain Python (numpy arrays of list cells to lists; NA/NaN/None to None)."""
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    try:
        import pandas as pd

        if v is pd.NA:
            return None
    except ImportError:
        pass
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def test_csv_and_jsonl_carry_the_same_values(table, tmp_path):
    rows = _rows(table)
    table.write(tmp_path / "t.jsonl")
    table.write(tmp_path / "t.csv")
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()]
    assert lines == rows and list(lines[0]) == list(schema.NAMES)
    with open(tmp_path / "t.csv", newline="", encoding="utf-8") as f:
        read = list(csv.DictReader(f))
    assert [r["path"] for r in read] == [r["path"] for r in rows]
    lists = {c.name for c in schema.COLUMNS if c.type.startswith("list<")}
    for got, want in zip(read, rows):
        for k in lists:
            assert (json.loads(got[k]) if got[k] else None) == want[k]
        assert got["explanation"] == (want["explanation"] or "")


def test_batches_never_hold_more_than_asked(table):
    sizes = [len(c["path"]) for c in table.batches(batch_rows=64)]
    assert sum(sizes) == 360 and max(sizes) <= 64 and len(sizes) == 6


def test_bad_requests_are_refused_in_words(findings, store, tmp_path):
    from nemo_desktop.core.base.errors import ConfigError

    with pytest.raises(ConfigError, match="no reference index"):
        PerImageTable.open(store, str(tmp_path), None)
    with pytest.raises(ConfigError, match="not indexed with the classifier"):
        PerImageTable.open(store, str(findings.dataset_dir), "some-other-classifier")
    with pytest.raises(ConfigError, match="No stored fix result"):
        PerImageTable.open(store, findings.index_id, None, fix_key="0" * 64)
    table = PerImageTable.open(store, findings.index_id)  # by index id
    with pytest.raises(ConfigError, match="format"):
        table.write(tmp_path / "t.xlsx")
    assert not list(tmp_path.glob("*t.xlsx*"))


def test_nemo_export_table_cli(findings, store, tmp_path, capsys, without):
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.store.paths import get_paths

    home = get_paths().ensure()
    store.close()
    import shutil

    shutil.rmtree(home.store_dir)
    shutil.copytree(findings.store_dir, home.store_dir)
    out = tmp_path / "t.parquet"
    assert main(["export", "table", str(findings.dataset_dir), "-c", findings.classifier_id, "-o", str(out),
                 "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["rows"] == 360 and pq.read_metadata(out).num_rows == 360
    without("parquet")
    assert main(["export", "table", str(findings.dataset_dir), "-o", str(tmp_path / "u.parquet"), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "'parquet' extra" in error["message"] and not (tmp_path / "u.parquet").exists()
    assert main(["export", "table", str(findings.dataset_dir), "-o", str(tmp_path / "u.csv")]) == 0
    assert "Wrote 360 rows" in capsys.readouterr().out


def test_nemo_export_fiftyone_without_the_extra_is_refused_before_any_work(without, monkeypatch, capsys):
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.store import ResultsStore

    without("fiftyone")
    monkeypatch.setattr(ResultsStore, "open", lambda *a, **k: pytest.fail("the store was opened"))
    assert main(["export", "fiftyone", "some/dataset", "--name", "x", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "'fiftyone' extra" in error["message"] and "nemo-desktop[fiftyone]" in error["hint"]


def test_the_python_api_gives_the_table_as_a_dataframe_and_a_file(findings, store, tmp_path):
    import nemo_desktop as nemo

    df = nemo.per_image_table(str(findings.dataset_dir), findings.classifier_id, store=store)
    assert list(df.columns) == list(schema.NAMES) and len(df) == 360
    assert df["explanation_key"].dropna().tolist() == [findings.explanation_key]
    done = nemo.export_table(findings.index_id, tmp_path / "t.jsonl", store=store, progress=False)
    assert done["rows"] == 360 and (tmp_path / "t.jsonl").read_text().count("\n") == 360


def test_to_pandas_without_pyarrow_has_the_same_columns_and_dtypes(table, without):
    with_arrow = table.to_pandas()
    without("parquet")
    plain = table.to_pandas()
    assert list(plain.columns) == list(with_arrow.columns)
    for c in schema.COLUMNS:
        if c.type in schema.PANDAS_DTYPES:
            assert str(plain[c.name].dtype) == str(with_arrow[c.name].dtype), c.name
        assert [_plain(v) for v in plain[c.name]] == [_plain(v) for v in with_arrow[c.name]], c.name
