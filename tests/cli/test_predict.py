"""`nemo predict` on a tiny timm model saved with save_for_hf and on a user checkpoint."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm, write_class_file
from nemo_desktop.cli.main import main


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("predict")
    model = build_tiny_timm(root / "model", label_names=TINY_CLASSES)
    rng = np.random.default_rng(1)
    images = []
    for i in range(2):
        path = root / f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(path)
        images.append(str(path))
    bad = root / "notes.jpg"
    bad.write_text("not an image")
    return {"root": root, "model": model, "images": images, "bad": str(bad)}


def test_predict_json_top_k(setup, capsys):
    rc = main(["predict", *setup["images"], "-c", f"timm:local-dir:{setup['model']}", "--top-k", "3", "--json",
               "--device", "cpu"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["classifier"]["family"] == "timm" and out["classifier"]["revision"].startswith("sha256:")
    assert [r["image"] for r in out["results"]] == setup["images"]
    for result in out["results"]:
        probs = [t["probability"] for t in result["top_k"]]
        assert len(probs) == 3 and probs == sorted(probs, reverse=True) and sum(probs) <= 1.0 + 1e-6
        assert all(t["name"] == TINY_CLASSES[t["index"]] for t in result["top_k"])
        assert "embedding" not in result


def test_predict_embeddings_come_from_the_same_pass(setup, capsys):
    from nemo_desktop.core.base.images import load_image
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

    rc = main(["predict", *setup["images"], "-c", f"timm:local-dir:{setup['model']}", "--json", "--embeddings",
               "--device", "cpu"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{setup['model']}"), LoadOptions(device="cpu"))
    images = [load_image(p) for p in setup["images"]]
    expected_emb, expected_p = clf.embed(images), clf.predict_proba(images)
    for result, emb, p in zip(out["results"], expected_emb, expected_p):
        assert np.allclose(result["embedding"], emb, atol=1e-6)
        assert result["top_k"][0]["probability"] == pytest.approx(float(p.max()), abs=1e-6)


def test_predict_table_and_a_bad_image(setup, capsys):
    rc = main(["predict", setup["images"][0], setup["bad"], "-c", f"timm:local-dir:{setup['model']}", "-k", "2",
               "--device", "cpu"])
    captured = capsys.readouterr()
    assert rc == 1  # one image could not be read; the other was still classified
    assert setup["images"][0] in captured.out and " 1. " in captured.out and " 2. " in captured.out
    assert "notes.jpg" in captured.err and "not an image" in captured.err


def test_predict_only_bad_images_fails_clearly(setup, capsys):
    rc = main(["predict", setup["bad"], "-c", f"timm:local-dir:{setup['model']}", "--device", "cpu"])
    assert rc == 3 and "notes.jpg" in capsys.readouterr().err  # nothing completed (cli/exit_codes.py)


def test_predict_user_checkpoint_with_class_file(setup, capsys):
    classes = write_class_file(setup["root"] / "classes.txt", TINY_CLASSES)
    ckpt = setup["model"] / "model.safetensors"
    rc = main(["predict", setup["images"][0], "-c", f"timm:checkpoint:test_resnet:{ckpt}", "--classes", str(classes),
               "--json", "--device", "cpu", "--batch-size", "1"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["top_k"][0]["name"] in TINY_CLASSES


def test_predict_unknown_classifier_gives_a_hint(setup, capsys):
    rc = main(["predict", setup["images"][0], "-c", "vit-b16"])
    err = capsys.readouterr().err
    assert rc == 2 and "vit-b16-augreg2" in err and "hint:" in err


def test_predict_catalog_model_not_downloaded_offline(setup, capsys):
    rc = main(["predict", setup["images"][0], "-c", "resnet50", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 3 and "not in the local Hugging Face cache" in err  # runtime error: the weights are missing
    assert "nemo models download resnet50" in err


@pytest.mark.timeout(120)  # a FIFO opened by mistake would block forever
def test_predict_reports_each_unreadable_file_and_classifies_the_rest(setup, tmp_path, capsys):
    from fixtures_tiny.bad_files import bad_files

    files = bad_files(tmp_path, open(setup["images"][0], "rb").read())
    files.pop("unreadable")  # root reads it anyway: see the unprivileged test below
    rc = main(["predict", setup["images"][0], *map(str, files.values()), setup["images"][1], "--json",
               "-c", f"timm:local-dir:{setup['model']}", "--device", "cpu"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1  # partial: some files failed, the others were classified
    by_image = {r["image"]: r for r in out["results"]}
    assert all("top_k" in by_image[p] for p in setup["images"])
    for kind, words in (("fifo", "FIFO"), ("dangling", "does not exist"), ("folder", "is a folder")):
        assert words in by_image[str(files[kind])]["error"]["message"]


@pytest.mark.timeout(180)
def test_predict_file_without_read_permission_is_a_per_file_error(setup, tmp_path):
    import sys

    from fixtures_tiny.bad_files import make_unreadable, run_unprivileged

    secret = make_unreadable(tmp_path / "secret.png", open(setup["images"][0], "rb").read())
    proc = run_unprivileged([sys.executable, "-m", "nemo_desktop.cli.main", "--home", str(tmp_path / "home"),
                             "predict", str(secret), setup["images"][0], "--json", "-c",
                             f"timm:local-dir:{setup['model']}", "--device", "cpu"])
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stderr
    results = {r["image"]: r for r in json.loads(proc.stdout)["results"]}
    assert "permission denied" in results[str(secret)]["error"]["message"]
    assert results[setup["images"][0]]["top_k"]
