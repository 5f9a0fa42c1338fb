"""`nemo compare run | score` end to end: two tiny random timm checkpoints loaded through the real loader, the
shipped digit renderer, and an LLM double behind a loopback OpenAI-compatible server (it reads only the prompts
it is sent). Random classifiers make arbitrary differences: this tests the plumbing, the stored re-run, the JSON
and the report, not what is found (tests/core/analyses/model_diff does that on trained models)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("timm")

SMALL = ["--samples-per-condition", "2", "--initial-conditions", "2", "--iterations", "1", "--explore-size", "2",
         "--beam-size", "2", "--test-conditions", "8", "--device", "cpu"]
DIGITS = [str(d) for d in range(10)]
DEMO_CLASSES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from fixtures_tiny.classifiers import build_tiny_timm
    from fixtures_tiny.model_diff_llms import DiffLLM, serve_openai_compatible

    root = tmp_path_factory.mktemp("tiny-compare")
    a = build_tiny_timm(root / "a", label_names=DIGITS, input_size=32, seed=0)
    b = build_tiny_timm(root / "b", label_names=DIGITS, input_size=32, seed=1)
    # "cat" is no declared name of class 9 ("nine" would be: the digits grid's label aliases)
    other = build_tiny_timm(root / "c", label_names=DIGITS[:9] + ["cat"], input_size=32, seed=2)
    # named as the demo classifier names its classes (nemo_desktop/core/demo/digits.py)
    words = build_tiny_timm(root / "d", label_names=list(DEMO_CLASSES), input_size=32, seed=3)
    llm = DiffLLM()
    server = serve_openai_compatible(llm)
    yield {"a": f"timm:local-dir:{a}", "b": f"timm:local-dir:{b}", "other": f"timm:local-dir:{other}",
           "words": f"timm:local-dir:{words}",
           "llm": f"openai-compatible:http://127.0.0.1:{server.server_port}/v1", "double": llm}
    server.shutdown()


def test_compare_run_stores_reruns_from_the_store_and_reports(tiny, tmp_path, capsys):
    from nemo_desktop.cli.main import main

    out = tmp_path / "diff.json"
    argv = ["compare", "run", "--model-a", tiny["a"], "--model-b", tiny["b"], "--llm", tiny["llm"], *SMALL,
            "-o", str(out), "--csv", str(tmp_path / "diff.csv")]
    assert main(argv) == 0
    rows = (tmp_path / "diff.csv").read_text().splitlines()
    assert rows[0].startswith("set,digit,color,angle,label,n,") and sum(r.startswith("held-out,") for r in rows) == 8
    import csv

    scores = list(csv.DictReader((tmp_path / "diff.scores.csv").open(encoding="utf-8")))
    assert [r["method"] for r in scores] == ["raw-differences", "summarization", "optimization"]
    assert all(r["n_held_out"] == "8" and r["completeness"] for r in scores)
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["kind"] == "model" and data["analysis"] == "model-diff"
    assert [e["method"] for e in data["explanations"]] == ["raw-differences", "summarization", "optimization"]
    assert all(e["score"]["n"] == 8 for e in data["explanations"]) and len(data["test"]) == 8
    assert data["manifest"]["model_a"]["id"] == tiny["a"] and data["manifest"]["llm"]["id"].startswith("openai")
    assert "Completeness" in text and "held-out conditions" in text
    for e in data["explanations"]:  # token attribution, bounded by the defaults (20 units, 50 conditions)
        a = e["attribution"]
        assert 0 < len(a["units"]) <= 20 and len(a["delta"]) == len(a["score"]) == len(a["units"])
        assert a["conditions"] == 8 and a["calls"] == 8 * (len(a["units"]) + 1)
    assert text.count("carried by: ") == 3
    calls = len(tiny["double"].calls)
    assert calls > 0

    # The same command again is answered from the results store: no LLM request at all.
    assert main(argv) == 0
    capsys.readouterr()
    assert len(tiny["double"].calls) == calls
    assert json.loads(out.read_text())["result_key"] == data["result_key"]

    # Its report, by key prefix, in HTML and PDF.
    html = tmp_path / "diff.html"
    assert main(["report", data["result_key"][:12], "-o", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert "Model differences on 8 held-out conditions" in page and "Optimization trace" in page
    assert "Accuracy of A minus B per digit and color" in page
    # Random classifiers mostly agree, so Completeness may well be undefined: the report must then say so.
    opt = data["explanations"][2]["score"]
    if opt["completeness_undefined"]:
        assert "Completeness is undefined on 8 held-out conditions" in page and "did not hold up" in page
    else:
        assert "Pearson correlation over 8 held-out conditions" in page
    pdf = tmp_path / "diff.pdf"
    assert main(["report", data["result_key"][:12], "-o", str(pdf)]) == 0
    assert pdf.read_bytes().startswith(b"%PDF")


def test_compare_score_scores_a_users_hypothesis(tiny, capsys):
    from nemo_desktop.cli.main import main

    rc = main(["compare", "score", "--model-a", tiny["a"], "--model-b", tiny["b"], "--judge", tiny["llm"], *SMALL,
               "--explanation", "Model A is better than model B for the digits 1 and 7.", "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["score"]["method"] == "user" and data["score"]["score"]["n"] == 8


def test_compare_names_the_class_one_model_lacks(tiny, capsys):
    from nemo_desktop.cli.main import main

    rc = main(["compare", "run", "--model-a", tiny["a"], "--model-b", tiny["other"], "--llm", tiny["llm"], *SMALL])
    assert rc == 2
    err = capsys.readouterr().err
    assert "'9'" in err or "9" in err.split("error:")[1]


@pytest.mark.parametrize("source", ["digits", "digits-ink"])
def test_compare_a_model_named_like_the_demo_classifier_on_the_shipped_digits(tiny, capsys, source):
    """Issue 28 #1: the demo classifier's classes are 'zero'..'nine', the digits grid's labels '0'..'9'; the grid
    declares the mapping, so the comparison runs (it stopped with "Both models lack '0'...")."""
    from nemo_desktop.cli.main import main

    rc = main(["compare", "run", "--model-a", tiny["words"], "--model-b", tiny["a"], "--conditions", source,
               "--llm", tiny["llm"], *SMALL])
    assert rc == 0, capsys.readouterr().err


def test_compare_usage_errors(tiny, capsys):
    from nemo_desktop.cli.main import main

    assert main(["compare", "run", "--model-a", tiny["a"], "--llm", tiny["llm"], *SMALL]) == 2
    assert "--model-b" in capsys.readouterr().err
    assert main(["compare", "run", "--model-a", tiny["a"], "--model-b", tiny["b"], "--llm", tiny["llm"],
                 "--conditions", "nowhere", *SMALL]) == 2
    assert "Unknown condition source" in capsys.readouterr().err
    # A bad setting is refused before any model is loaded.
    assert main(["compare", "run", "--model-a", "no-such-model", "--llm", tiny["llm"], "--methods", "summarise"]) == 2
    assert "Methods must be one of raw-differences, summarization, optimization, not 'summarise'" in \
        capsys.readouterr().err


@pytest.mark.slow  # about a minute alone (two CNNs trained, ~1,500 loopback requests); 3 min on a busy CPU
def test_compare_demo_trains_the_biased_models_and_recovers_the_planted_difference(tiny, tmp_path, capsys):
    """The demo's CNNs get the seed's colour biases; the LLM double reads only its prompts, so the recovered
    rule comes from the measured differences the prompts carry."""
    from fixtures_tiny.model_diff_llms import _answer

    from nemo_desktop.cli.main import main

    out = tmp_path / "demo.json"
    rc = main(["compare", "demo", "--llm", tiny["llm"], "--samples-per-condition", "10", "--iterations", "4",
               "--test-conditions", "100", "-o", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["manifest"]["model_a"]["id"] == "demo:digit-cnn-A" and len(data["test"]) == 100
    opt = next(e for e in data["explanations"] if e["method"] == "optimization")
    assert _answer(opt["text"], 3, "green", 0).startswith("[2]") and _answer(opt["text"], 7, "green", 0).startswith(
        "[1]"), opt["text"]
    # Measured 0.79 on these 100 held-out conditions (0.8+ on 200 in the world test; the paper's Optimization: 0.66).
    assert opt["score"]["completeness"] > 0.7 and "angle" not in opt["text"]
    assert "optimization (" in capsys.readouterr().out


def test_compare_one_zero_shot_model_with_two_prompt_sets_on_an_attribute_dataset(tiny, tmp_path, capsys):
    """The seed's gender setting in miniature: one CLIP (a tiny random one, a user catalog entry naming its
    classes) seen through two prompt sets, measured on the user's own labelled images (CSV with attributes)."""
    from PIL import Image

    from fixtures_tiny.classifiers import build_tiny_clip
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.models.catalog import user_catalog_path

    clip = build_tiny_clip(tmp_path / "clip")
    user_catalog_path().parent.mkdir(parents=True, exist_ok=True)
    user_catalog_path().write_text(json.dumps({"entries": [{
        "id": "my-clip", "kind": "classifier", "family": "hf-clip", "repo": str(clip), "source": str(clip),
        "revision": "main", "license": "mit", "gated": False, "disk_size_bytes": 1000, "vram_bf16_gb": 0.1,
        "recommended_gpu": "any", "description": "tiny", "options": {"class_names": ["man", "woman"]}}]}))
    prompts_a = tmp_path / "a.json"
    prompts_a.write_text(json.dumps({"man": "a photo of a man with black hair", "woman": "a photo of a woman "
                                                                                         "with blond hair"}))
    prompts_b = tmp_path / "b.json"
    prompts_b.write_text(json.dumps({"man": "a photo of a man with blond hair", "woman": "a photo of a woman "
                                                                                         "with black hair"}))
    rows = ["path,label,hair,setting"]
    for i, (label, hair, setting) in enumerate([(lab, h, s) for lab in ("man", "woman") for h in ("black", "blond")
                                                for s in ("indoor", "outdoor")]):
        for j in range(2):
            Image.new("RGB", (32, 32), (40 * i, 20 * j, 200 - 20 * i)).save(tmp_path / f"img{i}_{j}.png")
            rows.append(f"img{i}_{j}.png,{label},{hair},{setting}")
    (tmp_path / "people.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "zs.json"
    rc = main(["compare", "run", "--model-a", "my-clip", "--prompts-a", str(prompts_a), "--prompts-b",
               str(prompts_b), "--conditions", f"dataset:{tmp_path / 'people.csv'}", "--llm", tiny["llm"],
               "--judge", tiny["llm"], "--samples-per-condition", "2", "--initial-conditions", "2", "--iterations",
               "1", "--explore-size", "2", "--beam-size", "1", "--device", "cpu", "-o", str(out)])
    assert rc in (0, 1), capsys.readouterr().err  # the LLM double may not parse this task's lines: partial is fine
    data = json.loads(out.read_text())
    a, b = data["manifest"]["model_a"], data["manifest"]["model_b"]
    assert a["id"] == "my-clip#A" and b["id"] == "my-clip#B" and a["revision"] != b["revision"]
    assert a["classes"] == ["man", "woman"] and len(data["test"]) == 8  # every (label, hair, setting) cell
    assert {m["n"] for m in data["test"]} == {2}


def test_compare_with_text_to_image_conditions(tiny, tmp_path, capsys):
    """`--conditions t2i:ID@FILE`: a generator from the (user) catalog with its sampling options, loaded by the
    command, over the user's open conditions; the images are measured by both classifiers."""
    pytest.importorskip("diffusers")
    from fixtures_tiny.classifiers import build_tiny_timm
    from fixtures_tiny.t2i import build_tiny_flux_schnell
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.models.catalog import user_catalog_path

    t2i = build_tiny_flux_schnell(tmp_path)
    user_catalog_path().parent.mkdir(parents=True, exist_ok=True)
    user_catalog_path().write_text(json.dumps({"entries": [{
        "id": "my-t2i", "kind": "generator", "family": "diffusers-t2i", "repo": str(t2i), "source": str(t2i),
        "revision": "main", "license": "apache-2.0", "gated": False, "disk_size_bytes": 1000, "vram_bf16_gb": 0.1,
        "recommended_gpu": "any", "description": "tiny",
        "options": {"steps": 2, "guidance": 0.0, "max_sequence_length": 32, "width": 32, "height": 32}}]}))
    conds = tmp_path / "conds.json"
    conds.write_text(json.dumps({"name": "pets", "task_description": "classifying cats and dogs",
                                 "labels": ["cat", "dog"], "conditions": [
                                     {"text": "a cat in the snow", "label": "cat"},
                                     {"text": "a cat on a beach", "label": "cat"},
                                     {"text": "a dog in the snow", "label": "dog"}]}))
    a = build_tiny_timm(tmp_path / "a", label_names=["cat", "dog"], num_classes=2, input_size=32, seed=0)
    b = build_tiny_timm(tmp_path / "b", label_names=["dog", "cat"], num_classes=2, input_size=32, seed=1)
    out = tmp_path / "t2i.json"
    rc = main(["compare", "run", "--model-a", f"timm:local-dir:{a}", "--model-b", f"timm:local-dir:{b}",
               "--conditions", f"t2i:my-t2i@{conds}", "--llm", tiny["llm"], "--methods", "raw-differences",
               "--samples-per-condition", "2", "--device", "cpu", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    gen = data["manifest"]["generator"]
    assert gen["source"] == "text-to-image" and gen["model"] == "my-t2i" and gen["settings"]["steps"] == 2
    assert len(data["test"]) == 3 and {m["n"] for m in data["test"]} == {2}
    assert data["test"][0]["condition"]["attributes"] == [["text", "a cat in the snow"]]
