"""`nemo failure-modes`: the command end to end on the bundled digits (scikit-learn's 8x8 scans) with a trained MLP
classifier (loaded through the model registry) and a tiny random HF CLIP as the joint space (the real loader):
indexing, analysis, attribute relevance from the index's own CSV manifest, --json, the HTML report, a re-run
served from the store, and bad input refused with exit code 2."""
from __future__ import annotations

import csv
import json
import warnings

import pytest

from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays, write_digit_folder
from nemo_desktop.cli.main import main
from nemo_desktop.core.models import families as registry

pytest.importorskip("transformers")
N = 120


@pytest.fixture(scope="module")
def trained():
    X, y = load_digits_arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DigitsMLPClassifier.train(X[N:], y[N:], hidden=8).mlp, X[:N], y[:N]


@pytest.fixture
def digits_family(monkeypatch, trained):
    mlp = trained[0]
    registry._ensure_builtin_families()
    monkeypatch.setitem(registry._FAMILIES, ("classifier", "test-digits"),
                        lambda spec, options: DigitsMLPClassifier(mlp, model_id=spec.model_id))


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    from fixtures_tiny.classifiers import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny-clip"))


@pytest.fixture
def manifest(tmp_path, trained):
    """The digits as a CSV manifest with an attribute column (parity) the sentence file refers to."""
    _, X, y = trained
    paths = write_digit_folder(tmp_path / "digits", X, y)
    out = tmp_path / "digits.csv"
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["path", "label", "parity"])
        for p, label in zip(paths, y):
            w.writerow([p.relative_to(tmp_path).as_posix(), str(label), "even" if int(label) % 2 == 0 else "odd"])
    return out


@pytest.fixture
def sentences(tmp_path):
    items = [{"text": f"a handwritten {p} digit", "requires": {"parity": p}} for p in ("even", "odd")]
    items += [{"text": f"a <b>{d}</b> drawn by hand", "requires": {"label": str(d)}} for d in range(10)]
    path = tmp_path / "digits_sentences.json"
    path.write_text(json.dumps({"name": "digits", "version": 1, "sentences": items}))
    return path


def test_failure_modes_end_to_end(digits_family, clip_dir, manifest, sentences, tmp_path, capsys):
    out, report = tmp_path / "fm.json", tmp_path / "fm.html"
    args = ["failure-modes", str(manifest), "--classifier", "test-digits:plain", "--embedder", f"hf-clip:{clip_dir}",
            "--device", "cpu", "--clusters", "3", "--k", "2", "--sentence-sets", str(sentences),
            "--relevance", "attributes", "--split", "correctness"]
    assert main([*args, "-o", str(out), "--report", str(report)]) == 0
    text = capsys.readouterr().out
    d = json.loads(out.read_text())
    assert d["analysis"] == "failure-modes" and d["kind"] == "dataset" and d["index"]["rows"] == N
    (g,) = d["groups"]
    wrong = N - round(g["accuracy"] * N)
    assert g["split"]["hard"] == wrong > 0  # correctness split: hard = the misclassified images
    assert 1 <= len(g["hard_clusters"]) <= 3
    for c in g["hard_clusters"]:
        assert all(len(c["sentences"][m]) == 2 for m in ("tops", "pdiff", "setdiff", "fpdiff"))
    assert set(d["evaluation"]) == {"tops", "pdiff", "setdiff", "fpdiff"}  # evaluated from the CSV's columns
    assert d["p_at_k"]["k"] == 10 and g["evaluation"]["p_at_k"]["partitions"] >= 1  # App. B, beside the others
    assert (d["p_at_k"]["value"] is None) == (d["p_at_k"]["n"] == 0)
    assert "P@10 " in text
    for c in g["hard_clusters"]:  # a fallback is said per cluster and method, and its padded picks are marked
        for m in ("tops", "pdiff", "setdiff", "fpdiff"):
            assert c["tau_padded"][m] == sum(bool(p.get("padded")) for p in c["sentences"][m])
    assert d["manifest"]["embedder"]["family"] == "hf-clip" and d["manifest"]["joint_space"] == "embedder"
    assert "Whole dataset: 120 images" in text and ("Failure mode 1" in text or "did not hold up" in text)
    html = report.read_text(encoding="utf-8")
    assert "<b>" not in html.split("<body", 1)[1].replace("<body", "")  # sentences escaped
    assert "&lt;b&gt;" in html and html.count("data:image/png;base64") >= 1

    # The stored result has its report through `nemo report KEY` too.
    assert main(["report", d["result_key"][:12], "-o", str(tmp_path / "again.pdf")]) == 0
    assert (tmp_path / "again.pdf").read_bytes().startswith(b"%PDF")
    assert "wrote failure-modes report" in capsys.readouterr().out  # says what it is, not "diagnosis"

    # By index id: answered from the store (same key), nothing embedded again.
    index_id = d["index"]["index_id"]
    assert main(["failure-modes", index_id, "--embedder", f"hf-clip:{clip_dir}", "--device", "cpu", "--clusters", "3",
                 "--k", "2", "--sentence-sets", str(sentences), "--relevance", "attributes",
                 "--attributes-manifest", str(manifest), "--split", "correctness", "--json",
                 "--rank-by", "a handwritten even digit", "--top", "5"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["result_key"] == d["result_key"] and again["groups"] == d["groups"]
    ranked = again["rankings"]["a handwritten even digit"]
    assert len(ranked) == 5 and [r["similarity"] for r in ranked] == sorted((r["similarity"] for r in ranked),
                                                                           reverse=True)
    assert all(r["path"].endswith(".png") and r["true"] in [str(i) for i in range(10)] for r in ranked)


@pytest.mark.parametrize("bad, message", [
    (["--split", "nope"], "must be one of"),
    (["--k", "0"], "at least 1"),
    (["--relevance", "vqa"], "--mllm"),
])
def test_bad_settings_are_refused_with_exit_2(digits_family, clip_dir, manifest, bad, message, capsys):
    code = main(["failure-modes", str(manifest), "--classifier", "test-digits:plain",
                 "--embedder", f"hf-clip:{clip_dir}", "--device", "cpu", *bad])
    assert code == 2 and message in capsys.readouterr().err


def test_a_dataset_needs_the_classifier(manifest, capsys):
    assert main(["failure-modes", str(manifest)]) == 2
    assert "needs the classifier" in capsys.readouterr().err


def test_help_lists_the_settings(capsys):
    with pytest.raises(SystemExit):
        main(["failure-modes", "--help"])
    out = capsys.readouterr().out
    for flag in ("--split", "--a ", "--clusters", "--tau", "--methods", "--relevance", "--sentence-sets", "--json",
                 "--report", "--embedder", "--vqa-question", "--p-at-k"):
        assert flag in out


class _TopicLLM:
    """Chat double for `nemo failure-sentences`: answers each topic from a table (test code)."""

    from nemo_desktop.core.models.protocols import ModelInfo as _Info

    info = _Info("test-double:topic-llm", "test-double", "1")
    calls = 0
    REPLIES = {"weather": '{"sentences": ["An image taken in fog.", "an image taken in fog", "an image taken in rain"]}',
               "lighting": '{"sentences": ["an image taken at night"]}'}

    def chat(self, messages, **kw):
        type(self).calls += 1
        prompt = messages[0].content[0]
        return next((r for t, r in self.REPLIES.items() if f"Topic: {t}" in prompt), "no idea")


@pytest.fixture
def topic_llm(monkeypatch):
    registry._ensure_builtin_families()
    _TopicLLM.calls = 0
    monkeypatch.setitem(registry._FAMILIES, ("mllm", "test-topics"), lambda spec, options: _TopicLLM())


def test_failure_sentences_writes_a_set_the_analysis_loads(topic_llm, tmp_path, capsys):
    from nemo_desktop.core.analyses.failure_modes import load_sentence_sets

    out = tmp_path / "gen.json"
    args = ["failure-sentences", str(out), "--mllm", "test-topics:x", "--topic", "weather", "--topic", "lighting",
            "--per-topic", "3", "--context", "street scenes"]
    assert main(args) == 0
    assert "wrote 3 sentences on 2 topic(s)" in capsys.readouterr().out
    assert load_sentence_sets([str(out)]).texts == ["an image taken in fog", "an image taken in rain",
                                                    "an image taken at night"]
    assert main(args) == 0 and _TopicLLM.calls == 2  # answered from the store
    # a topic the model cannot answer: partial (1); only such topics: nothing produced (3)
    assert main([*args, "--topic", "vehicles"]) == 1
    assert main(["failure-sentences", str(tmp_path / "none.json"), "--mllm", "test-topics:x", "--topic", "x"]) == 3
    assert not (tmp_path / "none.json").exists()
    assert main(["failure-sentences", str(tmp_path / "gen.txt"), "--mllm", "test-topics:x"]) == 2


def test_nemo_run_builds_the_same_analysis_as_the_command(digits_family, clip_dir, manifest, sentences, capsys):
    """`nemo run failure-modes` is the registry entry the command runs: the same settings give the same stored
    result (answered from the store the second time), and the same summary."""
    common = [str(manifest), "--classifier", "test-digits:plain", "--embedder", f"hf-clip:{clip_dir}",
              "--device", "cpu", "--clusters", "3", "--k", "2", "--sentence-sets", str(sentences),
              "--split", "correctness"]
    assert main(["failure-modes", *common, "--json"]) == 0
    by_command = json.loads(capsys.readouterr().out)
    assert main(["run", "failure-modes", *common, "--json"]) == 0
    by_run = json.loads(capsys.readouterr().out)
    assert by_run["result_key"] == by_command["result_key"] and by_run["groups"] == by_command["groups"]
    assert main(["run", "failure-modes", *common]) == 0
    summary = capsys.readouterr().out
    assert summary.startswith("Whole dataset: 120 images") and by_run["result_key"][:16] in summary
