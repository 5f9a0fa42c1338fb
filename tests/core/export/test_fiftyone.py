"""FiftyOne hand-off (issue 44) with the real `fiftyone` package: its bundled database is started by the fixture in a
temporary folder and stopped after. The demo's findings (index, competency, failure modes, fix, an explanation) are
exported, read back through FiftyOne's own API and compared field by field with the per-image table; a second export
updates the samples in place; the FiftyOne dataset is then a NEMO dataset source whose index predicts the same labels.
Skipped where the `fiftyone` extra is not installed (CI installs it: .ci/run)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_findings import demo_findings  # noqa: E402
from fiftyone_db import fiftyone_in_temporary_database  # noqa: E402

# find_spec, not importorskip: FiftyOne reads its database folder from the environment when it is first imported
# (in the fixture below).
if importlib.util.find_spec("fiftyone") is None:
    pytest.skip("the 'fiftyone' extra is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def fo():
    with fiftyone_in_temporary_database() as fiftyone:
        yield fiftyone


@pytest.fixture(scope="module")
def findings():
    return demo_findings()


@pytest.fixture
def store(findings, tmp_path):
    s = findings.open_store(tmp_path / "store")
    yield s
    s.close()


def _table_rows(store, findings) -> dict[str, dict]:
    from nemo_desktop.core.export.table import PerImageTable

    rows = {}
    for cols in PerImageTable.open(store, str(findings.dataset_dir), findings.classifier_id).batches():
        rows.update({r["path"]: r for r in (dict(zip(cols, v)) for v in zip(*cols.values()))})
    return rows


def _export(store, findings, name):
    from nemo_desktop.core.export.fiftyone_export import export_to_fiftyone

    return export_to_fiftyone(store, str(findings.dataset_dir), findings.classifier_id, name=name,
                              visualization="pca")


def test_every_field_reads_back_equal_to_the_table(fo, findings, store):
    from nemo_desktop.core.export import schema
    from nemo_desktop.core.export.fiftyone_export import BRAIN_KEY, TAG_PREFIX, VIEW_PREFIX, field_name

    done = _export(store, findings, "demo-findings")
    assert (done["created"], done["samples"], done["added"], done["updated"]) == (True, 360, 360, 0)
    rows = _table_rows(store, findings)
    ds = fo.load_dataset("demo-findings")
    assert ds.persistent and len(ds) == 360
    fields = ds.get_field_schema()
    for c in schema.COLUMNS[1:]:
        assert fields[field_name(c.name)].description == c.doc
    modes: dict[str, set] = {}
    for sample in ds:
        r = rows[sample.filepath]
        for c in schema.COLUMNS[1:]:
            got, want = sample[field_name(c.name)], r[c.name]
            if isinstance(want, float):
                assert got == pytest.approx(want), c.name
            else:
                assert got == want, (c.name, sample.filepath)
        assert sample.ground_truth.label == r["true_label"]
        assert sample.predictions.label == r["pred_label"]
        assert sample.predictions.confidence == pytest.approx(r["prob_pred"])
        assert sorted(sample.tags) == sorted(TAG_PREFIX + m for m in r["failure_mode_ids"] or [])
        for m in r["failure_mode_ids"] or []:
            modes.setdefault(m, set()).add(sample.filepath)
    assert modes and done["failure_modes"] == len(modes)
    views = [v for v in ds.list_saved_views() if v.startswith(VIEW_PREFIX)]
    assert sorted(views) == sorted(done["saved_views"]) and len(views) == len(modes)
    for v in views:
        members = set(ds.load_saved_view(v).values("filepath"))
        assert members in modes.values()
    assert done["visualization"]["computed"] and BRAIN_KEY in ds.list_brain_runs()
    points = ds.load_brain_results(BRAIN_KEY).points
    assert points.shape == (360, 2)
    info = ds.info["nemo"]
    assert info["index_id"] == findings.index_id and json.loads(info["sources"])["fix"] == findings.fix_key


def test_a_second_export_updates_in_place(fo, findings, store):
    from nemo_desktop.core.export.fiftyone_export import TAG_PREFIX

    _export(store, findings, "demo-update")
    ds = fo.load_dataset("demo-update")
    ids = dict(zip(ds.values("filepath"), ds.values("id")))
    tags_before = ds.count_sample_tags()
    store.delete(findings.explanation_key)  # a fact leaves the store: the next export clears its field
    done = _export(store, findings, "demo-update")
    assert (done["created"], done["added"], done["updated"], done["samples"]) == (False, 0, 360, 360)
    ds = fo.load_dataset("demo-update")
    assert dict(zip(ds.values("filepath"), ds.values("id"))) == ids  # the same samples, none added
    assert ds.count_values("nemo_explanation") == {None: 360}
    assert ds.count_sample_tags() == tags_before  # NEMO's tags replaced, not doubled
    assert all(t.startswith(TAG_PREFIX) for t in tags_before)
    assert len(ds.list_brain_runs()) == 1


def test_a_fiftyone_dataset_is_a_source_that_predicts_the_same_labels(fo, findings, store, tmp_path):
    from nemo_desktop.core.data.datasets import open_dataset
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.base.errors import ConfigError
    from nemo_desktop.core.store import ResultsStore

    _export(store, findings, "demo-source")
    exported = dict(zip(*fo.load_dataset("demo-source").values(["filepath", "predictions.label"])))
    source = open_dataset("fiftyone:demo-source")
    assert type(source).__name__ == "FiftyOneDataset" and len(source) == 360 and source.unlabelled == 0
    assert str(source.root) == "fiftyone:demo-source"
    with ResultsStore.open(db_path=tmp_path / "s2" / "results.sqlite") as s2:
        index = build_index(source, findings.classifier(), s2)
        assert index.dataset_root == "fiftyone:demo-source"
        from nemo_desktop.cli.loading import reference
        from nemo_desktop.core.data.reference_index import find_index
        from nemo_desktop.core.base.job_context import JobContext

        assert find_index(s2, "fiftyone:demo-source").index_id == index.index_id  # what --reference resolves
        assert reference("fiftyone:demo-source", findings.classifier(), s2, JobContext()).index_id == index.index_id
        e = index.entries
        predicted = {str(p): index.class_names[int(i)] for p, i in zip(e.paths, e.preds)}
    assert predicted == exported
    with pytest.raises(ConfigError, match="no field 'truth'"):
        open_dataset("fiftyone:demo-source#truth")
    with pytest.raises(ConfigError, match="not a Classification"):
        open_dataset("fiftyone:demo-source#nemo_pred_label")
    with pytest.raises(ConfigError, match="no FiftyOne dataset named"):
        open_dataset("fiftyone:no-such-dataset")


def test_nemo_export_fiftyone_and_nemo_index_from_fiftyone(fo, findings, store, tmp_path, capsys):
    import shutil

    from nemo_desktop.cli.main import main
    from nemo_desktop.core.store.paths import get_paths

    home = get_paths().ensure()
    store.close()
    shutil.rmtree(home.store_dir)
    shutil.copytree(findings.store_dir, home.store_dir)
    assert main(["export", "fiftyone", str(findings.dataset_dir), "-c", findings.classifier_id, "--name", "demo-cli",
                 "--visualization", "pca", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["samples"] == 360 and done["visualization"]["method"] == "pca"
    clf = f"timm:local-dir:{findings.classifier_dir}"
    assert main(["index", "fiftyone:demo-cli", "--classifier", clf, "--device", "cpu", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dataset"] == "fiftyone:demo-cli" and out["entries"] == 360
    assert main(["export", "table", "fiftyone:demo-cli", "-c", clf, "-o", str(tmp_path / "t.csv")]) == 0
