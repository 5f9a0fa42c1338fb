"""Hand-built ExplanationResults stored in a real ResultsStore, with real PNG artifacts and hostile text."""
from __future__ import annotations

import itertools

import numpy as np
from PIL import Image, ImageDraw

from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, Observation, SampleInfo
from nemo_desktop.core.store import content_hash, result_key

SCRIPT = "<script>alert(1)</script>"
IMG_ONERROR = "<img src=x onerror=alert(1)>"
JS_LINK = "[click me](javascript:alert(1)) <a href=\"javascript:alert(1)\">link</a> javascript:alert(1)"
QUOTE_BREAK = "\" onmouseover=\"alert(1)\" x=\""
LONG_WORD = ("Pneumonoultramicroscopic" * 209)[:4997] + "END"  # 5,000 characters, no break opportunity
ARABIC = "القطة تجلس على السجادة الحمراء"
HEBREW = "החתול יושב על השטיח האדום"
EMOJI = "🐱🐶🔥 👩‍🔬"
HOSTILE = [SCRIPT, IMG_ONERROR, JS_LINK, QUOTE_BREAK, LONG_WORD, ARABIC, HEBREW, EMOJI]
assert len(LONG_WORD) == 5000


def picture(seed: int, size: int = 96) -> Image.Image:
    """A real, varied RGB image: a gradient background with a coloured shape."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size] / size
    c = rng.uniform(0.2, 1.0, 3)
    arr = np.stack([x * c[0], y * c[1], (1 - x) * c[2]], axis=-1) * 255
    im = Image.fromarray(arr.astype(np.uint8), "RGB")
    d = ImageDraw.Draw(im)
    x0, y0 = rng.integers(5, size // 2, 2)
    d.ellipse([int(x0), int(y0), int(x0) + size // 3, int(y0) + size // 3], fill=tuple(rng.integers(0, 255, 3).tolist()))
    return im


def make_result(i: int, method: str, *, hostile: bool = False, n_candidates: int = 3,
                image_seed: int | None = None) -> tuple[ExplanationResult, dict]:
    """An ExplanationResult and its artifacts (name -> PIL image / array) for sample `i`."""
    seed = i if image_seed is None else image_seed
    inp = picture(seed)
    h = content_hash(inp)
    # Hostile mode: every text field gets one hostile string (in rotation); the explanation gets them all.
    rotation = itertools.cycle(HOSTILE)
    text = (lambda s: f"{s} {next(rotation)}") if hostile else (lambda s: s)
    arts: dict = {"input": inp, "gradcam": picture(seed + 1000)}
    cands = []
    for j in range(n_candidates):
        before = 0.10 + 0.01 * i
        after = min(1.0, max(0.0, before + 0.15 * (j - 1) + 0.01 * i))
        c = Candidate(hypothesis=text(f"Hypothesis {j + 1} for sample {i}: the background is unusual."),
                      intervention_kind="image", intervention=text(f"Replace the background of image {i}."),
                      edited_artifact=f"edit{j}", prob_true_before=before, prob_true_after=after,
                      cei=100 * (after - before),
                      top5_before=[ClassScore(3, text("tabby cat"), 0.6), ClassScore(7, "tiger", 0.2)],
                      top5_after=[ClassScore(7, "tiger", 0.5), ClassScore(3, "tabby cat", 0.3)])
        arts[f"edit{j}"] = picture(seed + 100 * (j + 1))
        cands.append(c)
    if n_candidates:
        cands[-1].error = text("The editor ran out of memory.") if hostile else None
    best = max(range(len(cands)), key=lambda j: cands[j].cei) if cands else None
    obs = []
    for k, set_name in enumerate("AABBC"):
        arts[f"obs{k}"] = picture(seed + 500 + k, 64)
        obs.append(Observation(set_name=set_name, image_path=f"/refs/{set_name}/ref_{k}.jpg",
                               image_sha256="0" * 64, label_index=k, label_name=text(f"class {k}"),
                               similarity=0.9 - 0.1 * k, caption=text(f"A photo of thing {k}."),
                               thumbnail_artifact=f"obs{k}"))
    image_path = f"/data/{SCRIPT}/img_{i}{QUOTE_BREAK}.png" if hostile else f"/data/imagenet-r/img_{i:04d}.png"
    r = ExplanationResult(
        method=method,
        sample=SampleInfo(image_path=image_path, image_sha256=h, true_index=3, true_name=text("tabby cat"),
                          pred_index=7, pred_name=text("tiger"), prob_true=0.1 + 0.01 * i, prob_pred=0.7,
                          top5=[ClassScore(7, "tiger", 0.7), ClassScore(3, "tabby cat", 0.1)],
                          image_artifact="input"),
        explanation=f"The model saw stripes in sample {i}. " + " ".join(HOSTILE) if hostile
        else f"The model saw stripes in sample {i}.",
        selected_index=best, cei=cands[best].cei if cands else None, candidates=cands, observations=obs,
        evidence={"gradcam": "gradcam"},
        timings={"observation": 0.5, "hypothesis": 1.25, "experiment": 3.0},
        manifest={"models": {"mllm": {"id": text("qwen2.5-vl-7b"), "revision": "abc123"},
                             "classifier": {"id": "vit_b16", "revision": "def456"}},
                  "prompt_versions": {"hypothesis": "scitx-hypothesis/1"}, "seed": 1234 + i,
                  "date": "2026-11-21T12:00:00+00:00"},
        notes=[text("No correct reference of the predicted class.")] if hostile else [],
    )
    return r, arts


def store_result(store, r: ExplanationResult, arts: dict, **extra_payload) -> str:
    key = result_key("explanation", image_sha256=r.sample.image_sha256, method=r.method,
                     nonce=extra_payload.pop("nonce", ""))
    r.result_key = key
    store.put(key, "explanation", {**r.to_dict(), **extra_payload}, arts)
    return key


def make_run(store, n_samples: int = 5, methods=("scitx", "cam-mllm"), *, hostile: bool = False,
             failed_items: int = 1, config: dict | None = None) -> str:
    cfg = {"dataset": "imagenet-r", "classifier": {"id": "vit_b16"},
           "global_explanation": {"text": "Renditions (sketches, cartoons) confuse the model.", "cei": 12.5}}
    run_id = store.create_run("bench", cfg if config is None else config)
    for i in range(n_samples):
        for m, method in enumerate(methods):
            r, arts = make_result(i, method, hostile=hostile, image_seed=i)
            for c in r.candidates:  # give methods different CEI distributions
                c.cei = (c.cei or 0) + 10 * m
            r.cei = r.candidates[r.selected_index].cei
            key = store_result(store, r, arts, llm_match=[1.0, 0.5, 0.0][(i + m) % 3] if m == 0 else None)
            store.add_run_item(run_id, f"{method}/{i}", key, "done")
    for k in range(failed_items):
        store.add_run_item(run_id, f"scitx/failed{k}", None, "error",
                           {"type": "ModelError", "message": SCRIPT if hostile else "The MLLM crashed."})
    return run_id
