"""`nemo fix` on a zero-shot classifier (issue 29): adopting a class prompt re-evaluates the held-out folders with
the changed prompt set through the real loader, the guard rejects a prompt that helps one class by hurting another,
kept prompts become versioned prompt sets the classifier loads back, and --json / -o carry the figures.

The classifier is a tiny random CLIP (a user catalog entry naming its classes), so which images a new prompt moves
is the model's own: the folders are built from its predictions with the old and the new prompt (images the new
cat prompt takes from 'dog' to 'cat'), labelled so that the right answer is known before the command runs."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

CLASSES = ["cat", "dog"]
NEW_CAT = "a blurry photo of a cat"


@pytest.fixture(scope="module")
def clip_entry(tmp_path_factory):
    from fixtures_tiny.classifiers import build_tiny_clip

    root = tmp_path_factory.mktemp("fix-zero-shot")
    clip = build_tiny_clip(root / "clip")
    entry = {"id": "fix-clip", "kind": "classifier", "family": "hf-clip", "repo": str(clip), "source": str(clip),
             "revision": "main", "license": "mit", "gated": False, "disk_size_bytes": 1000, "vram_bf16_gb": 0.1,
             "recommended_gpu": "any", "description": "tiny", "options": {"class_names": CLASSES}}
    return entry


@pytest.fixture
def clip(clip_entry):
    """The entry in this test's user catalog, and the classifier loaded through the same path the command uses."""
    from nemo_desktop.core.models.catalog import resolve_model_ref, user_catalog_path
    from nemo_desktop.core.models.families import LoadOptions, load_model

    user_catalog_path().parent.mkdir(parents=True, exist_ok=True)
    user_catalog_path().write_text(json.dumps({"entries": [clip_entry]}))
    return load_model(resolve_model_ref("fix-clip", "classifier"), LoadOptions(device="cpu"))


def _moved(clf, n: int = 400):
    """Plain-colour images split by what the new cat prompt does to them: (dog -> cat, unchanged with their
    prediction)."""
    rng = np.random.default_rng(0)
    images = [Image.new("RGB", (32, 32), tuple(int(v) for v in rng.integers(0, 256, 3))) for _ in range(n)]
    before = clf.predict_proba(images).argmax(1)
    after = clf.predict_proba(images, class_prompts={0: NEW_CAT}).argmax(1)
    flipped = [im for im, b, a in zip(images, before, after) if b == 1 and a == 0]
    same = [(im, int(b)) for im, b, a in zip(images, before, after) if b == a]
    assert len(flipped) >= 12 and {y for _, y in same} == {0, 1}, "the tiny CLIP's prompts move too few images"
    return flipped, same


def _write(root, split, items):
    for i, (im, y) in enumerate(items):
        d = root / split / CLASSES[y]
        d.mkdir(parents=True, exist_ok=True)
        im.save(d / f"{i}.png")


def test_adopting_a_prompt_re_evaluates_keeps_and_versions_it(clip, tmp_path, capsys):
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.analyses.fix.prompts import apply_prompt_set, list_prompt_sets, load_prompt_set

    flipped, same = _moved(clip)
    data = tmp_path / "zs"
    _write(data, "affected", [(im, 0) for im in flipped])  # cats the old prompts take for dogs
    _write(data, "rest", same[:40])  # images the new prompt does not move
    out = tmp_path / "adopt.json"
    args = ["fix", str(data), "--classifier", "fix-clip", "--prompt", f"cat={NEW_CAT}", "--prompt-set", "cats",
            "--bootstrap", "200", "--device", "cpu"]
    assert main([*args, "--json", "-o", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    a, r = printed["affected"]["overall"], printed["rest"]["overall"]
    # the fix analysis in its mode prompt (issue 41): keyed and stored like every fix
    assert printed["analysis"] == "fix" and printed["config"]["mode"] == "prompt"
    assert printed["classifier"]["id"] == "fix-clip" and printed["result_key"]
    assert (a["n"], a["before"], a["after"], a["change"]) == (len(flipped), 0.0, 1.0, 100.0)
    assert a["ci"][0] > 0 and r["n"] == len(same[:40]) and r["change"] == 0.0
    assert set(printed["rest"]["per_class"]) == {"cat", "dog"}
    assert printed["guard"]["verdict"] == "keep" and printed["prompts"]["before"] == {"cat": "a photo of a cat."}
    assert printed["saved"] == {"name": "cats", "version": 1}
    # The same command again: answered from the results store (no second version), in the text output
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "+100.0 points" in text and "Guard: keep" in text and "version 1 of the prompt set 'cats'" in text
    assert printed["result_key"][:16] in text
    # `nemo run fix` in mode prompt: the same stored result and the same summary (not the generic one)
    assert main(["run", "fix", str(data), "--classifier", "fix-clip", "--mode", "prompt", "--prompts",
                 f"cat={NEW_CAT}", "--prompt-set", "cats", "--bootstrap", "200", "--device", "cpu"]) == 0
    summary = capsys.readouterr().out
    assert summary.startswith("Adopting the prompt(s)") and text.endswith(summary)  # `nemo fix` adds its plan
    assert [s["version"] for s in list_prompt_sets("fix-clip")] == [1]
    # Another prompt set name is another result: the next adoption is saved there
    assert main([a if a != "cats" else "cats2" for a in args]) == 0
    assert "version 1 of the prompt set 'cats2'" in capsys.readouterr().out
    stored = load_prompt_set("fix-clip", "cats", version=1)
    assert stored["prompts"] == [NEW_CAT, "a photo of a dog."] and stored["lineage"]["guard"] == "keep"
    apply_prompt_set(clip, stored)  # the classifier loaded with the set predicts as the measurement said
    assert clip.predict_proba(flipped).argmax(1).tolist() == [0] * len(flipped)


def test_the_guard_rejects_a_prompt_that_helps_one_class_by_hurting_another(clip, tmp_path, capsys):
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.analyses.fix.prompts import list_prompt_sets

    flipped, same = _moved(clip)
    half = len(flipped) // 2
    data = tmp_path / "zs"
    _write(data, "affected", [(im, 0) for im in flipped[:half]])  # cats fixed by the new cat prompt ...
    # ... and, in everything else, dogs it now takes for cats beside images it leaves alone
    _write(data, "rest", [(im, 1) for im in flipped[half:]] + [(im, y) for im, y in same if y == 0][:20])
    assert main(["fix", str(data), "--classifier", "fix-clip", "--prompt", f"cat={NEW_CAT}", "--prompt-set", "bad",
                 "--bootstrap", "200", "--device", "cpu", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["affected"]["overall"]["change"] == 100.0
    dog = out["rest"]["per_class"]["dog"]
    assert dog["change"] == -100.0 and dog["n"] == len(flipped) - half and dog["ci"][1] < 0
    assert out["rest"]["per_class"]["cat"]["change"] == 0.0
    assert out["guard"]["verdict"] == "reject-regression" and out["saved"] is None
    assert "class dog" in {r["set"] for r in out["guard"]["regressions"]}
    assert list_prompt_sets("fix-clip") == []  # a rejected prompt is not kept


def test_a_prompt_intervention_from_a_stored_explanation_is_adopted(clip, tmp_path, capsys):
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.base.records import Candidate, ExplanationResult, SampleInfo
    from nemo_desktop.core.store import ResultsStore
    from nemo_desktop.core.store.paths import get_paths

    sample = SampleInfo("x.png", "0" * 64, 0, "cat", 1, "dog", 0.1, 0.8)
    explanation = ExplanationResult("scitx", sample, "noise", 0, 9.0, [Candidate("noise", "prompt", NEW_CAT, cei=9.0)])
    with ResultsStore.open(get_paths().ensure()) as store:
        store.put("k-prompt", "explanation", explanation.to_dict())
    flipped, same = _moved(clip)
    data = tmp_path / "zs"
    _write(data, "affected", [(im, 0) for im in flipped])
    _write(data, "rest", same[:20])
    assert main(["fix", str(data), "--classifier", "fix-clip", "--from-result", "k-prompt", "--bootstrap", "200",
                 "--device", "cpu", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prompts"]["changes"] == {"cat": NEW_CAT} and out["affected"]["overall"]["change"] == 100.0
    assert out["saved"] == {"name": "adopted", "version": 1}


def test_a_zero_shot_fix_without_a_prompt_says_what_to_give(clip, tmp_path, capsys):
    from nemo_desktop.cli.main import main

    flipped, same = _moved(clip)
    _write(tmp_path / "zs", "affected", [(im, 0) for im in flipped])
    _write(tmp_path / "zs", "rest", same[:10])
    code = main(["fix", str(tmp_path / "zs"), "--classifier", "fix-clip", "--device", "cpu"])
    assert code != 0
    assert "--prompt CLASS=TEXT" in capsys.readouterr().err
