"""Baselines: Grad-CAM latency on real-size architectures, ErrorRetrieval's cost, and a cached re-run.

    .venv/bin/python benchmarks/baselines_bench.py [--device cpu|cuda] [--repeats 3] [--classes 100]

1. Grad-CAM per image (forward + backward + map) against a plain prediction, for timm ResNet-50 and
   ViT-B/16 (224 px) and the image towers of CLIP ViT-B/32 and SigLIP B/16-224 (Hugging Face configs of the
   paper's checkpoints), all with RANDOM weights (nothing is downloaded; the cost does not depend on them).
   The zero-shot models get `--classes` prompts (embedded once, outside the timing).
2. ErrorRetrieval with the CLIP ViT-B/32 text tower: embedding the 155-sentence corpus for one class, ranking,
   and the same sample again from the results store.
3. CamMLLM on tiny models (timm + Qwen2-VL from the test fixtures): first run vs re-run from the store.

Medians of `--repeats` runs after one warm-up.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # fixtures_tiny builders
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def timed(fn, repeats: int) -> float:
    fn()  # warm-up
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def real_size_classifiers(device: str, n_classes: int):
    import timm
    import torch
    from transformers import (CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, SiglipConfig,
                              SiglipImageProcessor, SiglipModel, SiglipProcessor)

    from fixtures_tiny.classifiers import build_tiny_tokenizer
    from nemo_desktop.core.models.adapters.hf_zero_shot import HFZeroShotClassifier
    from nemo_desktop.core.models.adapters.timm_classifier import TimmClassifier
    from nemo_desktop.core.models.protocols import ModelInfo
    from nemo_desktop.core.models.vocab import load_vocabulary

    names = list(load_vocabulary("imagenet-1k").names)
    dtype = torch.float32
    torch.manual_seed(0)
    out = {}
    for arch in ("resnet50", "vit_base_patch16_224"):
        model = timm.create_model(arch, pretrained=False)
        out[f"timm {arch}"] = TimmClassifier(model, names, ModelInfo(f"bench:{arch}", "timm"), device=device,
                                             dtype=dtype)
    tok = build_tiny_tokenizer(max_length=77)  # ids < 300: inside the real vocabularies; text cost is excluded
    clip = CLIPModel(CLIPConfig())  # defaults = openai/clip-vit-base-patch32
    out["CLIP ViT-B/32"] = HFZeroShotClassifier(
        clip, CLIPProcessor(image_processor=CLIPImageProcessor(), tokenizer=tok), names[:n_classes],
        ModelInfo("bench:clip-b32", "hf-clip"), device=device, dtype=dtype, template="a photo of a {}.", siglip=False)
    siglip = SiglipModel(SiglipConfig())  # defaults = google/siglip-base-patch16-224
    proc = SiglipProcessor(image_processor=SiglipImageProcessor(size={"height": 224, "width": 224}), tokenizer=tok)
    out["SigLIP B/16-224"] = HFZeroShotClassifier(siglip, proc, names[:n_classes], ModelInfo("bench:siglip", "hf-siglip"),
                                                  device=device, dtype=dtype, template="This is a photo of {}.",
                                                  siglip=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--classes", type=int, default=100)
    args = ap.parse_args()

    import numpy as np
    import torch
    from PIL import Image

    from nemo_desktop.core.methods.gradcam import gradcam, model_view, render_overlay

    print(f"torch {torch.__version__}, device {args.device}, threads {torch.get_num_threads()}")
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 255, (480, 640, 3), dtype=np.uint8))

    print("\n1. Grad-CAM per image (random weights, 224 px input)")
    print(f"   {'model':<28}{'predict':>10}{'Grad-CAM':>11}{'overlay':>10}  layer / grid")
    classifiers = real_size_classifiers(args.device, args.classes)
    for name, clf in classifiers.items():
        t_pred = timed(lambda: clf.predict_proba([image]), args.repeats)
        t_cam = timed(lambda: gradcam(clf, image), args.repeats)
        cam = gradcam(clf, image)
        t_overlay = timed(lambda: render_overlay(model_view(clf, image), cam.heatmap, min_side=336), args.repeats)
        print(f"   {name:<28}{t_pred * 1000:>8.0f}ms{t_cam * 1000:>9.0f}ms{t_overlay * 1000:>8.0f}ms  "
              f"{cam.layer} {cam.grid[0]}x{cam.grid[1]}")

    print("\n2. ErrorRetrieval in the CLIP ViT-B/32 space")
    from nemo_desktop.core.methods.error_retrieval import ErrorRetrievalPipeline, load_corpus
    from nemo_desktop.core.store import ResultsStore

    clip = classifiers["CLIP ViT-B/32"]
    corpus = load_corpus(include_user_dir=False)
    texts = [s.fill("goldfish") for s in corpus.sentences]
    clip.clear_text_cache()
    t = time.perf_counter()
    clip.embed_texts(texts)
    t_embed = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        store = ResultsStore.open(db_path=Path(d) / "r.sqlite", artifacts_dir=Path(d) / "a")
        y = (int(clip.predict_proba([image])[0].argmax()) + 1) % len(clip.class_names)
        clip.clear_text_cache()
        t = time.perf_counter()
        first = ErrorRetrievalPipeline(clip, None, store=store, corpus=corpus)(image, y)
        t_first = time.perf_counter() - t
        t_again = timed(lambda: ErrorRetrievalPipeline(clip, None, store=store, corpus=corpus)(image, y), args.repeats)
        store.close()
    lengths = [len(clip.processor.tokenizer(t)["input_ids"]) for t in texts]
    print(f"   corpus of {len(texts)} sentences embedded once: {t_embed * 1000:.0f} ms (stand-in tokenizer: "
          f"{statistics.mean(lengths):.0f} tokens per sentence, padded to {max(lengths)}; CLIP's own BPE gives ~10)")
    print(f"   first diagnosis (classify, embed image + corpus, rank): {t_first * 1000:.0f} ms "
          f"(propose {first.timings['propose'] * 1000:.0f} ms)")
    print(f"   re-run from the store: {t_again * 1000:.1f} ms ({t_first / t_again:.0f}x faster)")

    print("\n3. CamMLLM on tiny models (timm 32 px + Qwen2-VL), first run vs re-run")
    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
    from fixtures_tiny.mllm import build_tiny_qwen_vl
    from nemo_desktop.core.methods.cam_mllm import CamMLLMConfig, CamMLLMPipeline
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        opts = LoadOptions(device="cpu")
        clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{build_tiny_timm(root / 't', label_names=TINY_CLASSES, input_size=32)}"), opts)
        mllm = load_model(ModelSpec("mllm", "transformers-mllm", str(build_tiny_qwen_vl(root, "qwen2_vl"))), opts)
        store = ResultsStore.open(db_path=root / "r.sqlite", artifacts_dir=root / "a")
        small = Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8))
        y = (int(clf.predict_proba([small])[0].argmax()) + 1) % len(clf.class_names)
        cfg = CamMLLMConfig(hypothesis_max_new_tokens=32)
        t = time.perf_counter()
        r = CamMLLMPipeline(clf, mllm, store=store, config=cfg)(small, y)
        t_first = time.perf_counter() - t
        t_again = timed(lambda: CamMLLMPipeline(clf, mllm, store=store, config=cfg)(small, y), args.repeats)
        store.close()
    stages = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in r.timings.items())
    print(f"   first run {t_first * 1000:.0f} ms ({stages})")
    print(f"   re-run from the store {t_again * 1000:.1f} ms ({t_first / t_again:.0f}x faster)")


if __name__ == "__main__":
    main()
