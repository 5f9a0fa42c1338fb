"""Candidate draws really differ on the configuration users load (issue 12 §1).

A tiny Qwen2-VL is saved with the sampling fields Qwen2.5-VL-Instruct ships in generation_config.json
(do_sample, top_k=1, top_p=0.001, temperature=0.01, repetition_penalty=1.05) and loaded through the real
loader. Its weights are set to a known token chain that writes readable JSON whatever the prompt
(fixtures_tiny.mllm.build_tiny_json_qwen_vl), so SciTX can be run end to end on it with the real timm
classifier and InstructPix2Pix editor loaders.
"""
from __future__ import annotations

import pytest
from PIL import Image

from fixtures_tiny.mllm import JSON_OPEN, QWEN2_5_VL_INSTRUCT_GENERATION, build_tiny_json_qwen_vl
from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline
from nemo_desktop.core.models.protocols import ChatMessage
from nemo_desktop.core.models.registry import LoadOptions, ModelSpec, load_model
from nemo_desktop.core.models.sampling import Sampling

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

CPU = LoadOptions(device="cpu")
GREEDY_REPLY = '{"cause_of_error": " snowy", "solution": "make it plain"}'


@pytest.fixture(scope="module")
def json_mllm(tmp_path_factory):
    folder = build_tiny_json_qwen_vl(tmp_path_factory.mktemp("json-qwen"), generation=QWEN2_5_VL_INSTRUCT_GENERATION)
    return load_model(ModelSpec("mllm", "transformers-mllm", str(folder)), CPU)


def _ask(image_seed: int = 0):
    import numpy as np

    img = Image.fromarray(np.random.default_rng(image_seed).integers(0, 256, (48, 64, 3), dtype=np.uint8))
    return [ChatMessage.user(img, "Why was this image misclassified? Answer in JSON.")]


def _token_ids(mllm, messages, cfg, seed):
    inputs = mllm._encode([messages])
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = mllm.model.generate(**inputs, generation_config=cfg)
    return out[0, inputs["input_ids"].shape[1]:].tolist()


def test_the_checkpoint_config_really_is_planted_and_collapses_sampling(json_mllm):
    """The trap the adapter must avoid: the checkpoint's own fields plus do_sample at temperature 0.7."""
    gen = json_mllm.model.generation_config
    assert (gen.do_sample, gen.top_k, gen.top_p, gen.temperature, gen.repetition_penalty) == (True, 1, 0.001, 0.01,
                                                                                             1.05)
    cfg = json_mllm._generation_config(12, None)
    cfg.do_sample, cfg.temperature, cfg.top_k, cfg.top_p = True, 0.7, 1, 0.001  # only temperature changed
    draws = {tuple(_token_ids(json_mllm, _ask(), cfg, seed)) for seed in (1, 2, 3, 4)}
    assert len(draws) == 1


def test_seeded_draws_differ_and_greedy_is_the_checkpoint_independent_answer(json_mllm):
    msgs = _ask()
    assert json_mllm.chat(msgs, max_new_tokens=12) == GREEDY_REPLY
    sampled = [json_mllm.chat(msgs, max_new_tokens=12, temperature=0.7, seed=s) for s in (1, 2, 3, 4, 5)]
    assert len(set(sampled)) >= 4 and all(r.startswith(JSON_OPEN) for r in sampled)
    assert json_mllm.chat(msgs, max_new_tokens=12, temperature=0.7, seed=3) == sampled[2]  # reproducible
    # The explicit fields are applied: top_k=1 passed by the caller makes the draw greedy again.
    assert json_mllm.chat(msgs, max_new_tokens=12, temperature=0.7, top_k=1, seed=3) == GREEDY_REPLY


def test_generation_config_of_a_draw_sets_every_field(json_mllm):
    cfg = json_mllm._generation_config(8, Sampling(0.7, 0.9, 5, 0.05))
    assert (cfg.do_sample, cfg.temperature, cfg.top_p, cfg.top_k, cfg.min_p) == (True, 0.7, 0.9, 5, 0.05)
    greedy = json_mllm._generation_config(8, None)
    assert greedy.do_sample is False and greedy.top_k != 1 and greedy.top_p == 1.0
    assert greedy.repetition_penalty == 1.05  # not a sampling field: the checkpoint's value stays


@pytest.fixture(scope="module")
def scitx_parts(tmp_path_factory, json_mllm):
    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
    from fixtures_tiny.editors import build_tiny_instruct_pix2pix
    from fixtures_tiny.images import write_random_reference

    root = tmp_path_factory.mktemp("scitx-sampling")
    clf = load_model(ModelSpec("classifier", "timm",
                               f"local-dir:{build_tiny_timm(root / 'timm', label_names=TINY_CLASSES, input_size=32)}"),
                     CPU)
    editor = load_model(ModelSpec("editor", "diffusers-instruct-pix2pix", str(build_tiny_instruct_pix2pix(root))), CPU)
    ref, query = write_random_reference(root, TINY_CLASSES)
    pred = int(clf.predict_proba([Image.open(query).convert("RGB")])[0].argmax())
    return {"classifier": clf, "editor": editor, "reference": ref, "query": query,
            "wrong": (pred + 1) % len(clf.class_names)}


SMALL = {"k": 1, "m": 3, "caption_max_new_tokens": 12, "hypothesis_max_new_tokens": 16,
         "intervention_max_new_tokens": 16, "edit_steps": 2}


def test_scitx_m3_scores_three_distinct_candidates(scitx_parts, json_mllm, store):
    from nemo_desktop.core.data.reference_index import build_index

    p = scitx_parts
    index = build_index(p["reference"], p["classifier"], store)
    result = SciTXPipeline(p["classifier"], json_mllm, p["editor"], store=store, reference=index,
                           config=SciTXConfig(**SMALL))(p["query"], p["wrong"])
    hypotheses = [c.hypothesis for c in result.candidates]
    assert len(set(hypotheses)) == 3 and all(c.cei is not None for c in result.candidates), \
        [(c.hypothesis, c.error) for c in result.candidates]
    assert hypotheses[0] == "snowy"  # draw 0 is greedy: the paper's decoding
    counts = result.manifest["candidate_counts"]
    assert counts == {"candidates": 3, "distinct_scored": 3, "duplicates": 0, "no_hypothesis": 0, "cut_off": 0,
                      "not_tested": 0}
    assert result.manifest["sampling"]["draws_1_on"] == {"temperature": 0.7, "top_p": 0.95, "top_k": 0,
                                                         "min_p": 0.0}
    assert not any("distinct and scored" in n for n in result.notes)

    # The sampling fields are in the draws' keys: top_k=1 (the checkpoint's value, now asked for explicitly)
    # is a new computation, whose collapsed draws are counted and explained.
    collapsed = SciTXPipeline(p["classifier"], json_mllm, p["editor"], store=store, reference=index,
                              config=SciTXConfig(**SMALL, sampling_top_k=1))(p["query"], p["wrong"])
    assert collapsed.manifest["units"]["computed"] > 0
    c = collapsed.manifest["candidate_counts"]
    assert (c["distinct_scored"], c["duplicates"]) == (1, 2)
    assert any("Only 1 of 3 candidates were distinct and scored (2 repeated an earlier candidate)" in n
               for n in collapsed.notes)
