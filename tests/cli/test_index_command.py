"""`nemo index`: the command end to end, with the digits MLP test double loaded through the model registry."""
from __future__ import annotations

import json
import os
import signal
import warnings

import pytest

from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays, write_digit_folder
from nemo_desktop.cli.main import main
from nemo_desktop.core.models import families as registry

N = 120


@pytest.fixture(scope="module")
def trained():
    X, y = load_digits_arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DigitsMLPClassifier.train(X[N:], y[N:]).mlp, X[:N], y[:N]


class _InterruptingClassifier(DigitsMLPClassifier):
    """Presses Ctrl-C (SIGINT to this process) while its second batch is being classified."""

    calls = 0

    def predict_proba(self, images, **kw):
        type(self).calls += 1
        if type(self).calls == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return super().predict_proba(images, **kw)


class _WashedOutClassifier(DigitsMLPClassifier):
    """The same MLP behind a preprocessing that squeezes the contrast to a tenth (as when an image is
    normalised twice): the classifier then predicts one class for nearly everything."""

    def predict_proba(self, images, **kw):
        from PIL import Image

        return super().predict_proba([Image.blend(Image.new("RGB", im.size, (128, 128, 128)), im.convert("RGB"),
                                                  0.1) for im in images], **kw)


@pytest.fixture
def digits_family(monkeypatch, trained):
    """Registers family 'test-digits': source 'plain', 'interrupting' or 'washed-out' picks the double."""
    mlp = trained[0]
    _InterruptingClassifier.calls = 0

    def load(spec, options):
        cls = {"interrupting": _InterruptingClassifier, "washed-out": _WashedOutClassifier}.get(
            spec.source, DigitsMLPClassifier)
        return cls(mlp, model_id=spec.model_id)

    registry._ensure_builtin_families()
    monkeypatch.setitem(registry._FAMILIES, ("classifier", "test-digits"), load)


@pytest.fixture
def folder(tmp_path, trained):
    _, X, y = trained
    write_digit_folder(tmp_path / "refs", X, y)
    return tmp_path / "refs"


def test_index_builds_then_updates_incrementally(digits_family, folder, capsys):
    assert main(["index", str(folder), "--classifier", "test-digits:plain", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["entries"] == N and out["report"]["processed"] == N and out["feature_dim"] == 32
    assert out["classifier"] == "test-digits:plain" and 0.8 < out["accuracy"] <= 1.0

    assert main(["index", str(folder), "--classifier", "test-digits:plain"]) == 0
    text = capsys.readouterr().out
    assert f"{N} images of {folder.resolve()}" in text and "0 processed" in text and f"{N} unchanged" in text

    assert main(["index", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["index_id"] for r in listed] == [out["index_id"]] and listed[0]["entries"] == N

    assert main(["index", "--delete", out["index_id"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": out["index_id"]}
    assert main(["index", "--delete", out["index_id"]]) == 2
    assert "No reference index" in capsys.readouterr().err
    assert main(["index", "--list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_ctrl_c_cancels_cleanly_and_a_rerun_resumes(digits_family, folder, capsys):
    code = main(["index", str(folder), "--classifier", "test-digits:interrupting", "--batch-size", "16"])
    err = capsys.readouterr().err
    assert code == 130
    assert "Indexing cancelled: 32 of 120 images are indexed" in err and "again to resume" in err

    assert main(["index", str(folder), "--classifier", "test-digits:interrupting", "--batch-size", "16",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["report"]["processed"] == N - 32 and out["entries"] == N


def test_user_errors_are_explained(digits_family, folder, tmp_path, capsys):
    assert main(["index", str(tmp_path / "nowhere"), "--classifier", "test-digits:plain"]) == 2
    assert "Dataset not found" in capsys.readouterr().err
    assert main(["index", str(folder), "--classifier", "no-such-model"]) == 2
    assert "neither a catalog id" in capsys.readouterr().err
    (folder / "dragon").mkdir()
    (folder / "dragon" / "x.png").write_bytes((folder / "0" / os.listdir(folder / "0")[0]).read_bytes())
    assert main(["index", str(folder), "--classifier", "test-digits:plain"]) == 2
    assert "'dragon'" in capsys.readouterr().err
    assert main(["index", str(folder), "--classifier", "test-digits:plain", "--skip-unmatched", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["entries"] == N and "skipped class 'dragon'" in captured.err
    assert main(["index", str(folder), "--classifier", "test-digits:plain", "--skip-unmatched",
                 "--workers", "0"]) == 2
    assert "decode workers" in capsys.readouterr().err


def test_workers_and_no_draft_options(digits_family, folder, capsys):
    assert main(["index", str(folder), "--classifier", "test-digits:plain", "--workers", "1", "--no-draft",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == N


def test_unreadable_files_are_listed_and_make_the_index_partial(digits_family, folder, capsys):
    from fixtures_tiny.bad_files import make_dangling_link, make_fifo

    fifo, dangling = make_fifo(folder / "3" / "pipe.png"), make_dangling_link(folder / "3" / "gone.png")
    assert main(["index", str(folder), "--classifier", "test-digits:plain"]) == 1  # partial
    out = capsys.readouterr().out
    assert f"{N} images of" in out and "2 unreadable" in out
    assert "FIFO" in out and "does not exist" in out and str(fifo) in out and str(dangling) in out


def test_index_warns_when_one_class_takes_most_predictions(digits_family, folder, capsys):
    assert main(["index", str(folder), "--classifier", "test-digits:plain"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["index", str(folder), "--classifier", "test-digits:washed-out"]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "are predicted as" in err and "input size, normalisation and interpolation" in err
    assert main(["index", str(folder), "--classifier", "test-digits:washed-out", "--json"]) == 0
    assert "are predicted as" in json.loads(capsys.readouterr().out)["warning"]
