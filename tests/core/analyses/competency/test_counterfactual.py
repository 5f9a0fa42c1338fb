"""The per-image pipeline: scores, counterfactuals, the MLLM explanation with the seed's prompts and the
reference's composite, the results store, and LPIPS reported as unavailable when its weights are missing."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from fixtures_tiny.competency_world import RecordingMLLM

from nemo_desktop.core.analyses.competency import (CompetencyCounterfactual, CompetencyCounterfactualResult,
                                                   CounterfactualConfig)
from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.methods.prompts import load_prompt

B3 = ("In addition to the classification model, I trained a reconstruction-based competency estimator that "
      "estimates the probability that the classifier’s prediction is accurate for a given image.")
B4 = ("Here is an image for which the classifier is not confident. In a single sentence, explain what properties "
      "of the image itself might lead to the observed reduction in model confidence.")
B5 = ("Here are two images side-by-side. The first (on the left) is the original image, for which my classifier "
      "is not confident. The second image (on the right) is a similar image, for which my model is more confident. "
      "In a single sentence, explain what properties of the original image might have led to the observed "
      "reduction in model confidence.")
FAST = dict(max_iter=30)


@pytest.fixture
def store(tmp_path):
    from nemo_desktop.core.store import ResultsStore

    s = ResultsStore.open(db_path=tmp_path / "s.sqlite", artifacts_dir=tmp_path / "art")
    yield s
    s.close()


def test_pipeline_explains_with_the_papers_prompts_and_composite(fitted, low_batch, rand_lpips, store):
    _, est = fitted
    mllm = RecordingMLLM()
    pipe = CompetencyCounterfactual(est, mllm, CounterfactualConfig(**FAST, dataset_subject="handwritten digits"),
                                    lpips=rand_lpips, store=store)
    image = low_batch[0]
    result = pipe(image)

    assert result.original.competency < 0.9 and result.kind == "sample" and result.analysis == "competency-cf"
    assert [o.method for o in result.counterfactuals] == ["igd", "fgd", "reco", "lgd", "lnn"]
    for o in result.counterfactuals:
        assert o.error is None and o.competency_after > o.competency_before
        assert o.lpips is not None and 0 < o.feature_similarity <= 1 + 1e-9
    assert result.output("reco").iterations == 0

    description = ("I trained a CNN for image classification from a dataset of handwritten digits. The classifier "
                   "learns to distinguish between 9 different classes: zero, one, two, three, four, five, six, "
                   "seven, eight.")
    assert len(mllm.calls) == 4  # B.4 alone, then Reco, LGD and LNN
    first = mllm.calls[0]
    assert first["temperature"] == 0.0 and first["max_new_tokens"] == 100
    (msg,) = first["messages"]
    assert msg.role == "user" and isinstance(msg.content[0], Image.Image) and len(msg.content) == 2
    assert msg.content[1] == f"{description} {B3} {B4}"
    assert msg.content[0].size == (224, 224)  # 16 px upscaled (nearest) to a 224 shortest side
    (msg,) = mllm.calls[1]["messages"]
    assert msg.content[1] == f"{description} {B3} {B5}"
    canvas = msg.content[0]
    assert canvas.size == (224 + 224 + 30, 224 + 20)
    a = np.asarray(canvas)
    assert (a[:10] == 255).all() and (a[:, 234:244] == 255).all()  # white margins and gap
    orig = np.asarray(image.resize((224, 224), Image.Resampling.NEAREST))
    assert np.array_equal(a[10:234, 10:234], orig)  # original on the left at (10, 10)
    cf = pipe.last_artifacts["cf_reco"].resize((224, 224), Image.Resampling.NEAREST)
    assert np.array_equal(a[10:234, 244:468], np.asarray(cf))  # counterfactual at (w1 + 20, 10)
    assert result.explanation_without.startswith("Answer 1")
    assert result.output("lnn").explanation.startswith("Answer 4")

    # stored with its images; JSON round trip; a re-run makes no model call
    stored = store.get(result.result_key)
    assert {"input", "reconstruction", "cf_lgd", "diff_lgd"} <= set(stored.artifacts)
    assert stored.load_image("cf_reco").size == (16, 16) and stored.load_image("diff_reco").mode == "L"
    back = CompetencyCounterfactualResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back == result
    seen = []
    again = pipe(image, JobContext(on_progress=seen.append))
    assert again == result and len(mllm.calls) == 4
    assert [p.stage for p in seen] == ["Loaded from the results store"]
    m = result.manifest
    assert m["complete"] and m["prompts"]["competency_with_counterfactual"].startswith("competency_with_counterfactual/v1+")
    assert m["lpips"] == "lpips-alex" and m["estimator"]["weights_sha256"] == est.manifest["weights_sha256"]


def test_two_images_option_and_user_description(fitted, low_batch, rand_lpips):
    _, est = fitted
    mllm = RecordingMLLM()
    cfg = CounterfactualConfig(methods=("reco",), explain_methods=("reco",), composite=False,
                               dataset_description="Digits drawn in coloured ink.")
    CompetencyCounterfactual(est, mllm, cfg, lpips=rand_lpips)(low_batch[1])
    (msg,) = mllm.calls[1]["messages"]
    assert [type(p) for p in msg.content[:2]] == [Image.Image, Image.Image]
    assert msg.content[2].startswith("Digits drawn in coloured ink. In addition to the classification model")


def test_lpips_missing_is_reported_unavailable_never_zero(fitted, low_batch, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty-torch-home"))
    _, est = fitted
    pipe = CompetencyCounterfactual(est, None, CounterfactualConfig(methods=("igd", "reco"), **FAST))
    result = pipe(low_batch[2])
    igd, reco = result.counterfactuals
    assert igd.competency_after is None and "unavailable" in igd.error
    assert reco.error is None and reco.lpips is None and reco.competency_after is not None
    assert "unavailable" in result.manifest["lpips_unavailable"]
    assert any("No multimodal LLM" in n for n in result.notes)
    # with l2 as IGD's distance it runs without LPIPS
    ok = CompetencyCounterfactual(est, None, CounterfactualConfig(methods=("igd",), igd_distance="l2", **FAST))
    assert ok(low_batch[2]).output("igd").competency_after > igd.competency_before


def test_real_lpips_path_loads_planted_trunk_offline(tmp_path, monkeypatch):
    import lpips
    import torch
    import torchvision

    from nemo_desktop.core.analyses.competency import load_lpips

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    ckpt = tmp_path / "torch" / "hub" / "checkpoints" / "alexnet-owt-7be5be79.pth"
    ckpt.parent.mkdir(parents=True)
    torch.manual_seed(0)
    torch.save(torchvision.models.alexnet().state_dict(), ckpt)
    d = load_lpips("alex")
    x, y = torch.rand(2, 3, 16, 16), torch.rand(2, 3, 16, 16)
    ref = lpips.LPIPS(net="alex", verbose=False)  # the package's own path, same planted trunk
    up = torch.nn.functional.interpolate
    expect = ref(2 * up(x, size=(64, 64), mode="bilinear") - 1, 2 * up(y, size=(64, 64), mode="bilinear") - 1)
    torch.testing.assert_close(d(x, y), expect.flatten())
    assert torch.allclose(d(x, x), torch.zeros(2), atol=1e-7)


def test_cancel_stops_the_pipeline(fitted, low_batch, rand_lpips):
    _, est = fitted
    ctx = JobContext()
    ctx.cancel_token.cancel()
    with pytest.raises(JobCancelled):
        CompetencyCounterfactual(est, RecordingMLLM(), CounterfactualConfig(**FAST), lpips=rand_lpips)(low_batch[0], ctx)


def test_prompt_templates_carry_the_seed_text():
    assert B4 in load_prompt("competency_without_counterfactual").text
    assert B5 in load_prompt("competency_with_counterfactual").text
    assert B3 in load_prompt("competency_with_counterfactual").text


def test_both_halves_of_the_composite_show_the_classifiers_view(fitted, low_batch, rand_lpips, monkeypatch):
    """A classifier that centre-crops: the image has a wide magenta frame the classifier never sees. The left half
    must be the classifier's view of the original (no frame), like the counterfactual on the right, not the
    uncropped image beside a stretched crop."""
    from nemo_desktop.core.analyses.competency.counterfactual import to_pil
    from nemo_desktop.core.analyses.competency.explain import upscale

    _, est = fitted
    plain = est.classifier.unit_tensor

    def centre_crop(images):
        out = []
        for im in images:
            w, h = im.size
            out.append(im.crop(((w - 16) // 2, (h - 16) // 2, (w - 16) // 2 + 16, (h - 16) // 2 + 16)))
        return plain(out)

    monkeypatch.setattr(est.classifier, "unit_tensor", centre_crop)
    digit = low_batch[0].convert("RGB")
    framed = Image.new("RGB", (48, 32), (255, 0, 255))
    framed.paste(digit, (16, 8))
    mllm = RecordingMLLM()
    pipe = CompetencyCounterfactual(est, mllm, CounterfactualConfig(methods=("reco",), explain_methods=("reco",)),
                                    lpips=rand_lpips)
    result = pipe(framed)
    view = upscale(to_pil(est.unit([framed])[0]), 224)
    canvas = np.asarray(mllm.calls[1]["messages"][0].content[0])
    assert canvas.shape[:2] == (224 + 20, 224 + 224 + 30)  # two 224 x 224 halves: the same framing and size
    assert np.array_equal(canvas[10:234, 10:234], np.asarray(view))
    magenta = (canvas[..., 0] == 255) & (canvas[..., 1] == 0) & (canvas[..., 2] == 255)
    assert not magenta.any()  # the frame the classifier never saw is not shown
    assert np.asarray(mllm.calls[0]["messages"][0].content[0]).shape[:2] == (224, 224)  # B.4 alone: the same view
    assert result.manifest["mllm_view"] == "classifier input"
