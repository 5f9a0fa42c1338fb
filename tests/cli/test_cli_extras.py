"""The CLI names the extra a capability needs before anything runs (exit 2, the JSON error shape under --json),
and `nemo doctor` lists the extras."""
from __future__ import annotations

import json

import pytest

from nemo_desktop.cli.main import main
from nemo_desktop.core.base.extras import EXTRAS




@pytest.fixture
def no_model_loads(monkeypatch):
    from nemo_desktop.core.models import families as registry

    monkeypatch.setattr(registry, "load_model", lambda *a, **k: pytest.fail("a model was loaded"))


def _error(capsys) -> dict:
    return json.loads(capsys.readouterr().out)["error"]


def test_doctor_lists_every_extra(without, capsys):
    without("tokens")
    assert main(["doctor", "--json"]) == 0
    rows = {r["extra"]: r for r in json.loads(capsys.readouterr().out)["extras"]}
    assert set(rows) == set(EXTRAS) and not rows["tokens"]["installed"] and rows["pdf"]["installed"]
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "extra tokens: NOT installed" in out and "pip install 'nemo-desktop[tokens]'" in out
    assert "extra pdf: installed" in out


def test_a_pdf_report_without_the_extra_is_refused_before_the_store_opens(without, tmp_path, capsys, monkeypatch):
    from nemo_desktop.core.store import ResultsStore

    without("pdf")
    monkeypatch.setattr(ResultsStore, "open", lambda *a, **k: pytest.fail("the store was opened"))
    target = tmp_path / "report.pdf"
    assert main(["report", "some-key", "-o", str(target), "--json"]) == 2
    error = _error(capsys)
    assert "'pdf' extra" in error["message"] and "nemo-desktop[pdf]" in error["hint"] and not target.exists()


def test_explain_with_an_editor_without_the_extra_is_refused_before_any_model_loads(without, no_model_loads,
                                                                                     tmp_path, capsys):
    from PIL import Image

    image = tmp_path / "x.png"
    Image.new("RGB", (8, 8)).save(image)
    without("editing")
    args = ["explain", str(image), "-y", "cat", "-c", "timm:local-dir:/nowhere", "--mllm", "qwen2.5-vl-7b",
            "--reference", "none", "--json"]
    assert main(args) == 2
    error = _error(capsys)
    assert "editor flux-kontext-dev" in error["message"] and "'editing' extra" in error["message"]
    # A zero-shot classifier tests hypotheses by rewriting prompts: no editor, so no extra is needed.
    from nemo_desktop.cli.commands.explain import _check_extras
    from nemo_desktop.core.registry.methods import get_method

    zero_shot = type("Args", (), {"classifier": "clip-vit-b32", "editor": None})()
    _check_extras(get_method("scitx"), zero_shot)


def test_competency_bench_without_the_extra_is_refused_before_reading_images(without, tmp_path, capsys):
    without("competency")
    assert main(["competency", "bench", str(tmp_path / "no-such-folder"), "-c", "resnet50", "-E", "key",
                 "--json"]) == 2
    error = _error(capsys)
    assert "'competency' extra" in error["message"] and "nemo-desktop[competency]" in error["hint"]
    assert main(["competency", "lpips", "--json"]) == 2


def test_compare_with_a_t2i_generator_without_the_extra_is_refused(without, no_model_loads, capsys):
    without("editing")
    assert main(["compare", "run", "--model-a", "resnet50", "--model-b", "convnext-tiny", "--conditions",
                 "t2i:sd3.5-medium", "--llm", "qwen2.5-vl-7b", "--json"]) == 2
    assert "generator sd3.5-medium" in _error(capsys)["message"]


def test_compare_says_before_the_run_that_token_lengths_are_approximate_without_the_extra(without, capsys,
                                                                                          monkeypatch):
    from nemo_desktop.core.store import ResultsStore

    without("tokens")
    monkeypatch.setattr(ResultsStore, "open", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    main(["compare", "run", "--model-a", "resnet50", "--model-b", "convnext-tiny", "--llm", "qwen2.5-vl-7b",
          "--json"])
    assert "nemo-desktop[tokens]" in capsys.readouterr().err


def test_a_local_bench_run_without_the_editing_extra_is_refused_before_anything_runs(without, no_model_loads,
                                                                                      tmp_path, capsys, monkeypatch):
    """Local (not Ray) runs check the whole config on the spot too: a diffusers editor needs the 'editing' extra."""
    from nemo_desktop.core.store import ResultsStore

    (tmp_path / "data").mkdir()
    config = tmp_path / "run.toml"
    config.write_text(f'''
name = "extras"
[[datasets]]
kind = "folder"
root = "{(tmp_path / "data").as_posix()}"
[classifiers]
ViT = "timm:local-dir:/nowhere"
[editors]
Kontext = "flux-kontext-dev"
[mllms]
Qwen = "qwen2.5-vl-7b"
[[methods]]
label = "SciTX"
method = "scitx"
''', encoding="utf-8")
    without("editing")
    monkeypatch.setattr(ResultsStore, "open", lambda *a, **k: pytest.fail("the store was opened"))
    assert main(["bench", "run", str(config), "--json"]) == 2
    error = _error(capsys)
    assert "'editing' extra" in error["message"] and "Nothing was started" in error["hint"]


def test_a_lora_fix_without_the_extra_is_refused_before_the_classifier_loads(without, no_model_loads, tmp_path,
                                                                              capsys):
    """Issue 42 §4: `nemo fix --mode lora` without peft used to load the classifier and prepare the data first."""
    without("fix")
    for split in ("train", "affected", "rest"):
        (tmp_path / "data" / split / "cat").mkdir(parents=True)
    assert main(["fix", str(tmp_path / "data"), "-c", "timm:local-dir:/nowhere", "--mode", "lora", "--data",
                 "augment", "--affected-classes", "cat", "--json"]) == 2
    error = _error(capsys)
    assert "'fix' extra" in error["message"] and "peft" in error["message"]
    assert "nemo-desktop[fix]" in error["hint"]


def test_a_lora_fix_built_through_the_registry_checks_the_extra_first(without):
    """The app, the API and MCP build the fix through the registry: refused there, before any data is read."""
    import torch

    from nemo_desktop.core.base.errors import ConfigError
    from nemo_desktop.core.registry import Components, build_analysis

    class Torchy:
        zero_shot, class_names = False, ["a", "b"]
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))

        def preprocess(self, images):
            raise AssertionError("no image is prepared")

    without("fix")
    with pytest.raises(ConfigError, match="'fix' extra"):
        build_analysis("fix", Components(classifier=Torchy()), {"mode": "lora", "data": "augment",
                                                                "affected_classes": "a"})
