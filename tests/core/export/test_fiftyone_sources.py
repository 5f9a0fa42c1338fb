"""A FiftyOne dataset (`fiftyone:NAME`) as the dataset of the competency commands and of `nemo predict`, with the real
`fiftyone` (its bundled database in a temporary folder, fiftyone_db.py): the same images and labels as a class-folder
tree give the same estimator, the same scores and the same predictions as that folder, from the CLI and from the MCP
server (which takes it only when its images are inside the server's roots). Skipped where the `fiftyone` extra is not
installed (CI installs it: .ci/run)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fiftyone_db import fiftyone_in_temporary_database  # noqa: E402

if importlib.util.find_spec("fiftyone") is None:
    pytest.skip("the 'fiftyone' extra is not installed", allow_module_level=True)

CLASSES = ["red", "green", "blue"]
FIT = ["--epochs", "2", "--image-size", "16", "--latent-dim", "8", "--batch-size", "8", "--calibration-fraction",
       "0.34", "--device", "cpu", "--json"]


@pytest.fixture(scope="module")
def fo():
    with fiftyone_in_temporary_database() as fiftyone:
        yield fiftyone


@pytest.fixture(scope="module")
def setup(fo, tmp_path_factory):
    """A tiny timm classifier, a class-folder tree of 18 images, and a FiftyOne dataset of the same images made by
    FiftyOne's own importer of class-folder trees (labels in `ground_truth`)."""
    import torch

    from fixtures_tiny.classifiers import build_tiny_timm
    from fixtures_tiny.images import write_colour_folders

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("fiftyone-sources")
    model = build_tiny_timm(root / "model", num_classes=3, label_names=CLASSES, input_size=32)
    rng = np.random.default_rng(0)
    write_colour_folders(root / "data", CLASSES, rng)
    fo.Dataset.from_dir(dataset_dir=str(root / "data"), dataset_type=fo.types.ImageClassificationDirectoryTree,
                        name="colours", label_field="ground_truth")
    return {"root": root, "classifier": f"timm:local-dir:{model}", "data": str(root / "data")}


def _nemo(setup, home: str, *args, capsys) -> tuple[int, dict]:
    from nemo_desktop.cli.main import main

    rc = main(["--home", str(setup["root"] / home), *args])
    out, err = capsys.readouterr()
    return rc, json.loads(out) if out.strip().startswith("{") else {"printed": out, "stderr": err}


def test_competency_fit_and_score_on_a_fiftyone_source_equal_those_on_the_folder(setup, capsys):
    clf = setup["classifier"]
    # each in its own results store: the FiftyOne fit is computed, not answered from the folder's result
    rc, folder_fit = _nemo(setup, "home-folder", "competency", "fit", setup["data"], "-c", clf, *FIT, capsys=capsys)
    assert rc == 0, folder_fit
    rc, fo_fit = _nemo(setup, "home-fo", "competency", "fit", "fiftyone:colours", "-c", clf, *FIT, capsys=capsys)
    assert rc == 0, fo_fit
    assert fo_fit["manifest"]["dataset"]["name"] == "fiftyone:colours"
    assert fo_fit["manifest"]["dataset"]["fingerprint"] == folder_fit["manifest"]["dataset"]["fingerprint"]
    assert fo_fit["result_key"] == folder_fit["result_key"]  # the key names the images and labels, not the source
    for k in ("z", "mean_competency", "accuracy", "curve"):
        assert fo_fit["calibration"][k] == pytest.approx(folder_fit["calibration"][k]), k
    assert fo_fit["manifest"]["training"]["loss_per_epoch"] == pytest.approx(
        folder_fit["manifest"]["training"]["loss_per_epoch"])

    key = fo_fit["result_key"]
    score = ["-c", clf, "-E", key, "--threshold", "0.5", "--device", "cpu", "--json"]
    rc, folder_scores = _nemo(setup, "home-folder", "competency", "score", setup["data"], *score, capsys=capsys)
    assert rc == 0, folder_scores
    rc, fo_scores = _nemo(setup, "home-fo", "competency", "score", "fiftyone:colours", *score, capsys=capsys)
    assert rc == 0, fo_scores
    assert fo_scores["summary"]["n_labelled"] == 18  # the FiftyOne labels were used, as the folder's were
    assert fo_scores["summary"] == pytest.approx(folder_scores["summary"])
    by_path = {i["path"]: i["score"] for i in folder_scores["items"]}
    assert len(fo_scores["items"]) == len(by_path) == 18
    for item in fo_scores["items"]:
        want = by_path[item["path"]]
        assert item["score"]["pred_index"] == want["pred_index"]
        assert item["score"]["competency"] == pytest.approx(want["competency"], rel=1e-5, abs=1e-6)


def test_nemo_predict_on_a_fiftyone_source_predicts_its_images_as_the_files(setup, capsys):
    clf = setup["classifier"]
    files = sorted(str(p) for p in Path(setup["data"]).rglob("*.png"))
    args = ["-c", clf, "--device", "cpu", "--json"]
    rc, from_files = _nemo(setup, "home-folder", "predict", *files, *args, capsys=capsys)
    assert rc == 0
    rc, from_fo = _nemo(setup, "home-fo", "predict", "fiftyone:colours", *args, capsys=capsys)
    assert rc == 0
    top = {r["image"]: r["top_k"][0]["name"] for r in from_files["results"]}
    assert {r["image"]: r["top_k"][0]["name"] for r in from_fo["results"]} == top


def test_a_missing_fiftyone_dataset_is_a_usage_error_in_words(setup, capsys):
    rc, out = _nemo(setup, "home-fo", "competency", "fit", "fiftyone:no-such", "-c", setup["classifier"], *FIT,
                    capsys=capsys)
    assert rc == 2
    assert "no FiftyOne dataset named 'no-such'" in json.dumps(out)


def test_the_competency_image_sets_read_a_fiftyone_source_as_the_folder(setup):
    """What `competency score | bench | causes` (and their analyses, given a string) read a set with."""
    from nemo_desktop.core.analyses.competency.score_set import open_image_set

    from_fo, from_folder = open_image_set("fiftyone:colours"), open_image_set(setup["data"])
    assert str(from_fo.root) == "fiftyone:colours"
    assert [str(p) for p in from_fo.paths] == [str(p) for p in from_folder.paths]
    assert list(from_fo.labels) == list(from_folder.labels) and from_fo.class_names == from_folder.class_names


@pytest.mark.anyio
async def test_mcp_tools_take_a_fiftyone_source_whose_images_are_inside_the_roots(setup, tmp_path):
    """The real server over stdio (a child process on the same temporary FiftyOne database): the competency fit on
    fiftyone:colours is the folder's (same key, answered from the store); a root that does not hold its images
    refuses it, naming one."""
    pytest.importorskip("mcp")
    from fixtures_tiny.mcp_stdio import stdio_session, text_of

    fit = {"epochs": 2, "image_size": 16, "latent_dim": 8, "batch_size": 8, "calibration_fraction": 0.34}
    clf = setup["classifier"]
    async with stdio_session([setup["root"]], tmp_path) as (s, _):
        keys = []
        for data in (setup["data"], "fiftyone:colours"):
            res = await s.call_tool("analysis_competency_estimator", {"data": data, "classifier": clf, "settings": fit})
            assert not res.is_error, text_of(res)
            keys.append(json.loads(res.content[0].text)["result_key"])
        assert keys[0] == keys[1]
        res = await s.call_tool("index_dataset", {"dataset": "fiftyone:colours", "classifier": clf})
        assert not res.is_error, text_of(res)
        assert json.loads(res.content[0].text)["entries"] == 18
    other, w2 = tmp_path / "other", tmp_path / "w2"
    other.mkdir()
    w2.mkdir()
    async with stdio_session([other, setup["root"] / "model"], w2) as (s, _):
        res = await s.call_tool("index_dataset", {"dataset": "fiftyone:colours", "classifier": clf})
        assert res.is_error and "18 image(s) of the dataset fiftyone:colours are outside" in text_of(res)
