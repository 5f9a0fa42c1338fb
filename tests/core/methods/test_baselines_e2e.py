"""The baselines end to end on tiny random models loaded through the real loaders (timm, Hugging Face CLIP,
open_clip, Qwen2-VL, InstructPix2Pix), and `nemo explain --method ... [--validate]`.

Tiny random MLLMs write garbage: those runs check that every method completes, records the raw replies and
errors per candidate, stores its result and reuses it. A JSON-writing MLLM double lets the real tiny
classifiers and editor run the counterfactual test of the validated variants.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from baseline_doubles import JsonWriterMLLM
from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.registry.methods import get_method
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

pytestmark = pytest.mark.slow

CPU = LoadOptions(device="cpu")
SMALL = dict(m=2, hypothesis_max_new_tokens=12, intervention_max_new_tokens=12, edit_steps=2)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_clip, build_tiny_open_clip, build_tiny_timm
    from fixtures_tiny.editors import build_tiny_instruct_pix2pix
    from fixtures_tiny.images import write_random_reference
    from fixtures_tiny.mllm import build_tiny_qwen_vl

    root = tmp_path_factory.mktemp("tiny-baselines")
    timm_dir = build_tiny_timm(root / "timm", label_names=TINY_CLASSES, input_size=32)
    clip_dir = build_tiny_clip(root / "clip")
    oc = build_tiny_open_clip(root / "open_clip")
    specs = {"classifier": f"timm:local-dir:{timm_dir}", "clip": f"hf-clip:{clip_dir}",
             "open_clip": f"open_clip:local-dir:{oc['local_dir']}",
             "mllm": f"transformers-mllm:{build_tiny_qwen_vl(root, 'qwen2_vl')}",
             "editor": f"diffusers-instruct-pix2pix:{build_tiny_instruct_pix2pix(root)}"}
    ref, query = write_random_reference(root, TINY_CLASSES)
    return {"specs": specs, "reference": ref, "query": query, "classes": TINY_CLASSES}


@pytest.fixture(scope="module")
def models(tiny):
    from nemo_desktop.core.models.catalog import resolve_model_ref

    def load(name, kind, **options):
        spec = resolve_model_ref(tiny["specs"][name], kind)
        if options:
            spec = ModelSpec(spec.kind, spec.family, spec.source, options={**spec.options, **options})
        return load_model(spec, CPU)

    return {"classifier": load("classifier", "classifier"), "mllm": load("mllm", "mllm"),
            "editor": load("editor", "editor"), "clip": load("clip", "classifier", class_names=tiny["classes"]),
            "open_clip": load("open_clip", "classifier", class_names=tiny["classes"])}


def wrong_label(classifier, path) -> int:
    pred = int(classifier.predict_proba([Image.open(path).convert("RGB")])[0].argmax())
    return (pred + 1) % len(classifier.class_names)


def _check_complete_and_reused(entry, build, query, y, result):
    assert result.result_key and result.manifest["complete"] is True
    for c in result.candidates:  # random weights cannot write the JSON asked for: recorded, with the reply
        if c.error is not None:
            assert c.raw_reply is not None or "Intervention" in c.error or "MLLM failed" in c.error
    again = build()(query, y)
    assert again.to_dict() == result.to_dict()


def test_cam_mllm_on_tiny_models(tiny, models, store):
    clf, mllm, editor = models["classifier"], models["mllm"], models["editor"]
    y = wrong_label(clf, tiny["query"])
    entry = get_method("cam-mllm")
    build = lambda: entry.factory(clf, mllm, editor=editor, store=store, config=entry.config(**SMALL))  # noqa: E731
    result = build()(tiny["query"], y)
    assert result.method == "cam-mllm" and len(result.candidates) == 1
    stored = store.get(result.result_key)
    assert stored.load_image("gradcam_overlay").size == (336, 336)
    assert stored.load_array("gradcam_heatmap").shape == (32, 32)
    assert result.manifest["details"]["gradcam"]["layout"] == "nchw"
    _check_complete_and_reused(entry, build, tiny["query"], y, result)


def test_cam_mllm_validated_scores_with_the_real_editor_and_classifier(tiny, models, store):
    clf, editor = models["classifier"], models["editor"]
    y = wrong_label(clf, tiny["query"])
    mllm = JsonWriterMLLM()
    result = get_method("cam-mllm-validated").factory(clf, mllm, editor=editor, store=store,
                                                      config=get_method("cam-mllm").config(**SMALL, selection="cei"))(
        tiny["query"], y)  # the plain argmax: a tiny random editor's noise is never selected by the default rule
    assert result.method == "cam-mllm-validated" and len(result.candidates) == 2
    assert all(c.error is None and c.cei is not None for c in result.candidates)
    assert result.cei == max(c.cei for c in result.candidates) and result.selected_index is not None
    assert store.get(result.result_key).load_image("edited_0").size == Image.open(tiny["query"]).size
    assert mllm.image_counts[0] == 1  # the overlay only


def test_change_mllm_on_tiny_models(tiny, models, store):
    clf, mllm = models["classifier"], models["mllm"]
    index = build_index(tiny["reference"], clf, store)
    y = wrong_label(clf, tiny["query"])
    entry = get_method("change-mllm")
    build = lambda: entry.factory(clf, mllm, store=store, reference=index, config=entry.config(**SMALL))  # noqa: E731
    result = build()(tiny["query"], y)
    (obs,) = result.observations
    assert obs.label_index in (y, result.sample.pred_index) and obs.image_path
    assert any("not scored" in n for n in result.notes)  # no editor given, not zero-shot
    _check_complete_and_reused(entry, build, tiny["query"], y, result)


def test_error_retrieval_in_a_zero_shot_classifiers_own_space(tiny, models, store):
    clip = models["clip"]
    y = wrong_label(clip, tiny["query"])
    entry = get_method("error-retrieval")
    # The class-caption corpus with the contrastive ranking (options): sentences name the class.
    small = dict(m=2, intervention_max_new_tokens=12, corpus="class-captions", contrast="pdiff")
    build = lambda: entry.factory(clip, models["mllm"], store=store, config=entry.config(**small))  # noqa: E731
    result = build()(tiny["query"], y)
    name = clip.class_names[y]
    assert result.explanation is not None and name in result.explanation
    assert result.manifest["models"]["embedder"]["family"] == "hf-clip"
    assert result.manifest["details"]["reference_caption"] == f"a photo of a {name}."
    assert result.candidates[0].intervention_kind == "prompt"  # scored by prompt rewriting (garbage here)
    _check_complete_and_reused(entry, build, tiny["query"], y, result)

    validated = get_method("error-retrieval-validated").factory(clip, JsonWriterMLLM(), store=store,
                                                                config=entry.config(m=3, corpus="class-captions")
                                                                )(tiny["query"], y)
    ranked = [r["sentence"] for r in validated.manifest["details"]["ranking"][:3]]
    assert [c.hypothesis for c in validated.candidates] == ranked
    ceis = [c.cei for c in validated.candidates]
    assert all(c is not None for c in ceis) and validated.selected_index == int(np.argmax(ceis))
    # The rewritten prompt (here: the sentence itself) replaced the true class's prompt only.
    assert validated.candidates[0].intervention == ranked[0]


def test_error_retrieval_with_a_separate_retrieval_model(tiny, models, store):
    clf = models["classifier"]
    y = wrong_label(clf, tiny["query"])
    result = get_method("error-retrieval").factory(clf, None, store=store,
                                                   embedder=models["open_clip"])(tiny["query"], y)
    # The default: a class-agnostic failure statement, ranked by plain image-sentence similarity.
    from nemo_desktop.core.methods.error_retrieval import load_corpus

    assert result.explanation in {s.text for s in load_corpus(include_user_dir=False).sentences} and result.cei is None
    assert result.manifest["details"]["contrast"] == "similarity"
    assert result.manifest["details"]["corpus"] == "failure-statements"
    assert result.manifest["models"]["embedder"]["family"] == "open_clip"


# -- the command line -------------------------------------------------------------------------------------------
def test_cli_explain_with_a_baseline_and_validate(tiny, models, tmp_path, capsys):
    from nemo_desktop.cli.main import main

    clf = models["classifier"]
    y = clf.class_names[wrong_label(clf, tiny["query"])]
    out = tmp_path / "result.json"
    base = ["explain", str(tiny["query"]), "--true-label", y, "--classifier", tiny["specs"]["classifier"],
            "--device", "cpu", "--max-new-tokens", "12"]
    argv = base + ["--mllm", tiny["specs"]["mllm"], "--editor", tiny["specs"]["editor"], "--method", "cam-mllm",
                   "--validate", "--m", "2", "--edit-steps", "2", "-o", str(out)]
    rc = main(argv)
    text = capsys.readouterr().out
    # Tiny random models write garbage: when no candidate can be tested there is no explanation (exit 3).
    no_explanation = "Nothing could be tested: " in text or "Tested, no cause found: " in text
    assert no_explanation == (rc == 3) and rc in (0, 1, 3)
    assert "Method:     cam-mllm-validated" in text and "Grad-CAM overlay: gradcam_overlay" in text
    data = json.loads(out.read_text())
    assert data["method"] == "cam-mllm-validated" and len(data["candidates"]) == 2

    # change-mllm needs --reference; error-retrieval --validate needs an MLLM.
    assert main(base + ["--mllm", tiny["specs"]["mllm"], "--method", "change-mllm"]) == 2
    assert "--reference is required for the method change-mllm" in capsys.readouterr().err
    assert main(base + ["--method", "error-retrieval", "--validate"]) == 2
    assert "--mllm is required for the method error-retrieval-validated" in capsys.readouterr().err


def test_cli_error_retrieval_needs_no_mllm(tiny, capsys):
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.models.catalog import resolve_model_ref

    spec = tiny["specs"]["clip"]
    clip = load_model(resolve_model_ref(spec, "classifier"), CPU)  # as the CLI loads it: ImageNet-1k classes
    label = clip.class_names[wrong_label(clip, tiny["query"])]
    argv = ["explain", str(tiny["query"]), "--true-label", label, "--classifier", spec, "--device", "cpu",
            "--method", "error-retrieval"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "Method:     error-retrieval" in text and "not scored with CEI" in text
    from nemo_desktop.core.methods.error_retrieval import load_corpus

    shown = text.split("Explanation")[1]
    assert any(s.text in shown for s in load_corpus(include_user_dir=False).sentences), text  # a failure statement


def test_method_names():
    from nemo_desktop.cli.commands.explain import method_name
    from nemo_desktop.core.base.errors import ConfigError

    assert method_name("scitx", True) == "scitx"
    assert method_name("cam-mllm", False) == "cam-mllm"
    assert method_name("change-mllm", True) == "change-mllm-validated"
    assert method_name("error-retrieval-validated", True) == "error-retrieval-validated"
    with pytest.raises(ConfigError):
        method_name("nope", True)
