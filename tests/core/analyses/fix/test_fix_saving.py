"""Issue 29: the fixed model becomes a new user-catalog entry (safetensors + lineage) that loads like the original,
the original is never overwritten, and a cancelled save leaves no entry and no weights folder; `nemo fix` with
--json and -o on a timm classifier."""
from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest
from PIL import Image

from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
from nemo_desktop.core.analyses.fix.saving import fixed_models_dir, save_fixed
from nemo_desktop.core.base.errors import ConfigError, JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.models.catalog import get_entry, list_catalog
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model


@pytest.fixture
def timm_clf(tmp_path):
    folder = build_tiny_timm(tmp_path / "tiny", label_names=TINY_CLASSES, input_size=32)
    return load_model(ModelSpec(kind="classifier", family="timm", source=f"local-dir:{folder}"),
                      LoadOptions(device="cpu", dtype="float32")), folder


def _images(n, seed=0):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), "RGB") for _ in range(n)]


def _changed(module):
    import torch

    m = copy.deepcopy(module)
    with torch.no_grad():
        m.get_classifier().bias.add_(torch.linspace(-1, 1, m.get_classifier().bias.numel()))
    return m.eval()


def test_a_saved_fix_loads_from_the_catalog_and_predicts_as_the_trained_copy(timm_clf):
    import torch

    clf, folder = timm_clf
    original = (folder / "model.safetensors").read_bytes()
    fixed = _changed(clf.model)
    lineage = {"key": "k" * 64, "config": {"mode": "head", "data": "edit"}, "summary": "test",
               "base": {"id": clf.info.model_id}, "sources": [{"source": "edit:add", "count": 3}]}
    saved = save_fixed(clf, fixed, "tiny-fix", lineage, JobContext())
    entry = get_entry("tiny-fix")
    assert entry.origin != "shipped" and entry.options["lineage"]["sources"][0]["count"] == 3
    assert saved["weights"].endswith("model.safetensors")
    again = load_model(entry.spec(), LoadOptions(device="cpu", dtype="float32"))
    images = _images(4)
    with torch.no_grad():
        expected = torch.softmax(fixed(clf.preprocess(images)), -1).numpy()
    assert np.allclose(again.predict_proba(images), expected, atol=1e-5)
    assert not np.allclose(clf.predict_proba(images), expected, atol=1e-3)  # it is a different model
    assert (folder / "model.safetensors").read_bytes() == original  # the original is untouched
    with pytest.raises(ConfigError, match="already in the catalog"):
        save_fixed(clf, fixed, "tiny-fix", {**lineage, "key": "other" * 10}, JobContext())


def test_a_cancelled_save_leaves_no_entry_and_no_folder(timm_clf):
    clf, _ = timm_clf
    token = CancelToken()
    token.cancel()
    lineage = {"key": "c" * 64, "config": {"mode": "head", "data": "edit"}, "summary": ""}
    with pytest.raises(JobCancelled):
        save_fixed(clf, _changed(clf.model), "tiny-cancelled", lineage, JobContext(cancel=token))
    assert "tiny-cancelled" not in {e.id for e in list_catalog()}
    assert not fixed_models_dir().exists() or not any(fixed_models_dir().iterdir())


def _fix_folder(tmp_path):
    """A `nemo fix` folder: train/ (12 a class), affected/ and rest/ (6 a class) of two classes."""
    data = tmp_path / "fixdata"
    for k, (split, n) in enumerate((("train", 12), ("affected", 6), ("rest", 6))):
        for c, cls in enumerate(("cat", "dog")):
            (data / split / cls).mkdir(parents=True)
            for i, im in enumerate(_images(n, seed=10 * k + c)):  # not hash(): str hashes change per process
                im.save(data / split / cls / f"{i}.png")
    return data


def test_nemo_fix_writes_json_and_its_file(timm_clf, tmp_path, capsys):
    from nemo_desktop.cli.main import main

    _, folder = timm_clf
    data = _fix_folder(tmp_path)
    out = tmp_path / "fix.json"
    code = main(["fix", str(data), "--classifier", f"timm:local-dir:{folder}", "--data", "augment",
                 "--affected-classes", "cat", "--per-class", "4", "--epochs", "2", "--bootstrap", "100",
                 "--device", "cpu", "--json", "-o", str(out)])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(out.read_text())
    assert printed == written
    assert written["analysis"] == "fix" and written["data"]["targeted"] == 4
    assert written["affected"]["overall"]["n"] == 12 and written["rest"]["overall"]["n"] == 12
    assert written["guard"]["verdict"] in ("keep", "reject-regression", "reject-no-gain", "reject-small-gain")
    assert written["training"]["epochs"] >= 1 and written["sources"][0]["source"] == "augment:colour-jitter"


def test_nemo_fix_says_in_words_how_it_trained_and_what_it_kept(timm_clf, tmp_path, capsys):
    from nemo_desktop.cli.main import main

    _, folder = timm_clf
    data = _fix_folder(tmp_path)
    args = ["fix", str(data), "--classifier", f"timm:local-dir:{folder}", "--data", "augment",
            "--affected-classes", "cat", "--per-class", "4", "--epochs", "2", "--bootstrap", "100", "--device", "cpu"]
    assert main(args + ["--average-epochs", "2"]) == 0
    text = capsys.readouterr().out
    # the plan, before the run: which block "last block" is, and how a kept fix is saved (issue 42 §6)
    assert text.index("Plan: last-block trains the head (") < text.index("Trained 2 epoch(s)")
    assert "A kept fix is saved as a new user-catalog entry (the timm architecture" in text
    assert "Trained 2 epoch(s)" in text and "Guard: " in text
    assert re.search(r"Everything else: .*n=12; \d+ image\(s\) gained, \d+ lost\)", text)
    # 20 training images after the 15 % held-out split (4 of 24), batch 64: one step an epoch, so decay 1 - 1/2
    assert "moving average of the trained ones over about 2 epoch(s) (EMA decay 0.5000 per step)" in text
    assert main(args + ["--average-epochs", "0"]) == 0
    assert "moving average" not in capsys.readouterr().out


def test_nemo_fix_refuses_a_folder_without_the_three_sets(timm_clf, tmp_path, capsys):
    from nemo_desktop.cli.main import main

    _, folder = timm_clf
    (tmp_path / "bad" / "train" / "cat").mkdir(parents=True)
    code = main(["fix", str(tmp_path / "bad"), "--classifier", f"timm:local-dir:{folder}", "--data", "augment",
                 "--affected-classes", "cat", "--device", "cpu"])
    assert code != 0
    assert "affected, rest" in capsys.readouterr().err


def _explanation(kind="image", cei=12.0):
    from nemo_desktop.core.base.records import Candidate, ExplanationResult, SampleInfo

    sample = SampleInfo("x.png", "0" * 64, 0, "cat", 1, "dog", 0.1, 0.8)
    cands = [Candidate("the red carpet", kind, "Remove the red carpet" if kind == "image" else "a photo of a cat",
                       cei=cei), Candidate("the light", kind, "Make it darker", cei=1.0)]
    return ExplanationResult("scitx", sample, "the red carpet", 0, cei, cands).to_dict()


def test_a_finding_comes_from_a_validated_explanation_only():
    from nemo_desktop.core.analyses.fix.finding import finding_from_explanation

    f = finding_from_explanation(_explanation())
    assert f["instruction"] == "Remove the red carpet"
    assert f["affected_classes"] == "cat" and f["predicted_classes"] == "dog"
    assert finding_from_explanation(_explanation("prompt"))["prompt"] == {"cat": "a photo of a cat"}
    with pytest.raises(ConfigError, match="not validated"):
        finding_from_explanation(_explanation(cei=-3.0))


def test_nemo_fix_takes_the_finding_from_a_stored_explanation(timm_clf, tmp_path, capsys):
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.store import ResultsStore
    from nemo_desktop.core.store.paths import get_paths

    _, folder = timm_clf
    with ResultsStore.open(get_paths().ensure()) as store:
        store.put("k-explained", "explanation", _explanation())
    data = tmp_path / "fixdata"
    for split in ("train", "affected", "rest"):
        for c, cls in enumerate(("cat", "dog")):
            (data / split / cls).mkdir(parents=True)
            for i, im in enumerate(_images(6, seed=c)):
                im.save(data / split / cls / f"{i}.png")
    assert main(["fix", str(data), "--classifier", f"timm:local-dir:{folder}", "--from-result", "k-explained",
                 "--data", "augment", "--per-class", "2", "--epochs", "1", "--bootstrap", "100", "--device", "cpu",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["instruction"] == "Remove the red carpet"
    assert [(s["direction"], s["class"], s["count"]) for s in out["sources"]] == [("remove", "dog", 2)]


def test_a_family_that_loads_a_fixed_checkpoint_gets_a_catalog_entry(timm_clf):
    """Issue 42 §6: a plugin family saves a kept fix in the form it supports: its adapter's fixed_catalog_entry
    (here one that loads the checkpoint with timm) names the entry's family and source."""
    from types import SimpleNamespace

    from nemo_desktop.core.analyses.fix.saving import save_form

    clf, _ = timm_clf

    class PluginClassifier:
        zero_shot, class_names, model, preprocess = False, clf.class_names, clf.model, clf.preprocess
        info = SimpleNamespace(model_id="my-plugin:tiny", family="my-plugin", revision="1", extra={})

        def fixed_catalog_entry(self, weights):
            return {"family": "timm", "source": f"checkpoint:{clf.info.extra['architecture']}:{weights}",
                    "options": {"class_names": list(clf.class_names), "data_config": dict(clf.data_config)}}

    plugin = PluginClassifier()
    assert save_form(plugin)["form"] == "catalog" and "my-plugin family" in save_form(plugin)["how"]
    fixed = _changed(clf.model)
    saved = save_fixed(plugin, fixed, "plugin-fix", {"key": "p" * 64, "config": {}, "summary": "s"}, JobContext())
    entry = get_entry("plugin-fix")
    assert saved["id"] == "plugin-fix" and entry.options["lineage"]["key"] == "p" * 64
    again = load_model(entry.spec(), LoadOptions(device="cpu", dtype="float32"))
    images = _images(2)
    import torch

    with torch.no_grad():
        expected = torch.softmax(fixed(clf.preprocess(images)), -1).numpy()
    assert np.allclose(again.predict_proba(images), expected, atol=1e-5)
    assert save_form(SimpleNamespace(info=SimpleNamespace(family="torch", model_id="x")))["form"] == "weights"
