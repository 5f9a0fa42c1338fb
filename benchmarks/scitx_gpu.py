"""SciTX on one sample with real-size random-weight models built from their configurations (no download).

    .venv/bin/python benchmarks/scitx_gpu.py --device cuda [--sizes 512 1024] [--steps N] [--editor flux-kontext]
    .venv/bin/python benchmarks/scitx_gpu.py --tiny          # the same code path at toy sizes on the CPU (tests)

Models (bf16 on a GPU), each built from its published configuration with random weights and wrapped in NEMO's
own adapters, so the profile is the application's, not a hand-written loop:
  * MLLM: Qwen2.5-VL-7B-Instruct's architecture (28 x 3584 text layers, 32-block ViT, vocab 152,064);
  * editor: FLUX.1-Kontext-dev's (19 double + 38 single blocks, T5-XXL and CLIP-L text encoders, 16-channel
    VAE), or InstructPix2Pix's (SD 1.5 UNet with 8 input channels, CLIP-L) with --editor instruct-pix2pix;
  * classifier: ViT-B/16 (timm vit_base_patch16_224).
Tokenizers are small BPE/Unigram models trained here (only their ids reach the networks, so the compute per
token is the real one). Random weights write no JSON, so the hypothesis and edit-instruction replies are
replaced by fixed valid answers AFTER the MLLM has generated its full reply (its cost is measured, as in
scitx_stages.py). The MLLM never emits end-of-sequence, so every reply runs to its token cap: an upper
bound of the generation time for the configured caps.

Printed per size: seconds per stage (classify, retrieve, caption, hypothesis, intervention, edit, score,
total) and the memory peak per progress stage (CUDA: torch.cuda.max_memory_allocated; CPU: the process's
peak RSS), then the same sample with the speed settings (--caption-batch, --edit-batch) if given. Loading
happens once; every size reuses the loaded pipelines (what the GUI session and the benchmark runner's model
pool do), and the load time is printed separately. The effect of fewer editor steps on CEI is unknown until
real weights run: random weights say nothing about edit quality.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The tiny models' tokenizer recipes: only their ids reach the networks.
from _tiny_models import QWEN_SPECIALS, QWEN_TEMPLATE, _bpe, _clip_tokenizer  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CORPUS = ["describe the image what is the main object and what is in the background",
          "the classifier predicted a dog but the image shows a cat on a sandy beach",
          "change the color of the background to red remove the person add a hat turn the sky into snow",
          "hypothesis the model relies on the snowy background instead of the animal shape"]
# Published configurations (config.json of each repository); "tiny" keeps every structural feature.
QWEN25_VL_7B = {
    "text": dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                 num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=128000, rms_norm_eps=1e-6,
                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}),
    "vision": dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
                   patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                   fullatt_block_indexes=[7, 15, 23, 31], tokens_per_second=2),
    "pixels": dict(min_pixels=3136, max_pixels=1280 * 28 * 28),
}
QWEN_TINY = {
    "text": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=4096,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}),
    "vision": dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=8,
                   spatial_merge_size=2, temporal_patch_size=2, window_size=32, fullatt_block_indexes=[1]),
    "pixels": dict(min_pixels=16 * 16, max_pixels=64 * 64),
}
FLUX_KONTEXT_DEV = {
    "transformer": dict(patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
                        num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768,
                        guidance_embeds=True, axes_dims_rope=(16, 56, 56)),
    "vae": dict(block_out_channels=(128, 256, 512, 512), layers_per_block=2, latent_channels=16, norm_num_groups=32,
                scaling_factor=0.3611, shift_factor=0.1159, use_quant_conv=False, use_post_quant_conv=False),
    "t5": dict(vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
               feed_forward_proj="gated-gelu"),
    "clip": dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                 num_attention_heads=12, projection_dim=768, hidden_act="quick_gelu"),
}
FLUX_TINY = {
    "transformer": dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
                        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32,
                        guidance_embeds=True, axes_dims_rope=(4, 4, 8)),
    "vae": dict(block_out_channels=(8, 8, 8, 8), layers_per_block=1, latent_channels=4, norm_num_groups=4,
                scaling_factor=0.3611, shift_factor=0.1159),
    "t5": dict(vocab_size=256, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4),
    "clip": dict(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 projection_dim=32),
}
PIX2PIX = {  # timbrooks/instruct-pix2pix (Stable Diffusion 1.5 with an 8-channel UNet input)
    "unet": dict(sample_size=64, in_channels=8, out_channels=4, layers_per_block=2,
                 block_out_channels=(320, 640, 1280, 1280), cross_attention_dim=768, attention_head_dim=8,
                 down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
                 up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3),
    "vae": dict(block_out_channels=(128, 256, 512, 512), layers_per_block=2, latent_channels=4, norm_num_groups=32,
                scaling_factor=0.18215),
    "clip": FLUX_KONTEXT_DEV["clip"],
}
PIX2PIX_TINY = {
    "unet": dict(sample_size=8, in_channels=8, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
                 norm_num_groups=8, cross_attention_dim=32, attention_head_dim=8,
                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                 up_block_types=("CrossAttnUpBlock2D", "UpBlock2D")),
    "vae": dict(block_out_channels=(8, 8, 8, 8), layers_per_block=1, latent_channels=4, norm_num_groups=4),
    "clip": FLUX_TINY["clip"],
}


# -- tokenizers (trained here: only their ids reach the networks) -------------------------------------------
def _t5_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import T5TokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(CORPUS * 4, trainer=trainers.UnigramTrainer(
        vocab_size=128, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>", show_progress=False))
    return T5TokenizerFast(tokenizer_object=tok, extra_ids=0, pad_token="<pad>", eos_token="</s>",
                           unk_token="<unk>", model_max_length=512)


# -- models ------------------------------------------------------------------------------------------------
class _Built:
    """Random init straight in the target dtype on the target device (a 12B model never exists in fp32)."""

    def __init__(self, device: str, dtype) -> None:
        self.device, self.dtype = device, dtype

    def __enter__(self):
        import torch

        self._old = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)
        self._dev = torch.device(self.device)
        self._dev.__enter__()
        return self

    def __exit__(self, *exc):
        import torch

        self._dev.__exit__(*exc)
        torch.set_default_dtype(self._old)


def build_mllm(cfg: dict, device: str, dtype):
    import transformers as tf

    from nemo_desktop.core.models.adapters.transformers_mllm import TransformersMLLM
    from nemo_desktop.core.models.protocols import ModelInfo

    tok = _bpe(QWEN_SPECIALS, 300, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=QWEN_TEMPLATE,
               padding_side="left")
    ids = {t: tok.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}
    text = dict(cfg["text"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
                bos_token_id=ids["<|endoftext|>"], tie_word_embeddings=False)
    config = tf.Qwen2_5_VLConfig(text_config=text, vision_config=dict(cfg["vision"]),
                                 image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                                 vision_start_token_id=ids["<|vision_start|>"],
                                 vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=False)
    v = cfg["vision"]
    common = dict(patch_size=v["patch_size"], merge_size=v["spatial_merge_size"], temporal_patch_size=2)
    processor = tf.Qwen2_5_VLProcessor(
        image_processor=tf.Qwen2VLImageProcessor(size={"shortest_edge": cfg["pixels"]["min_pixels"],
                                                       "longest_edge": cfg["pixels"]["max_pixels"]}, **common),
        video_processor=tf.Qwen2VLVideoProcessor(**common), tokenizer=tok, chat_template=QWEN_TEMPLATE)
    with _Built(device, dtype):
        model = tf.Qwen2_5_VLForConditionalGeneration(config).eval()
    # random weights must not stop early: no end-of-sequence, every reply runs to its cap
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    info = ModelInfo("bench:qwen2.5-vl-7b-architecture", "transformers-mllm", f"random-{cfg['text']['hidden_size']}",
                     extra={"attn_implementation": model.config._attn_implementation})
    return TransformersMLLM(model, processor, info)


def build_flux_kontext(cfg: dict, device: str, dtype):
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxKontextPipeline, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    from nemo_desktop.core.models.adapters.diffusers_editor import FluxKontextEditor
    from nemo_desktop.core.models.protocols import ModelInfo

    tok, tok2 = _clip_tokenizer(), _t5_tokenizer()
    with _Built(device, dtype):
        t5 = T5EncoderModel(T5Config(**cfg["t5"], pad_token_id=tok2.pad_token_id, eos_token_id=tok2.eos_token_id))
        clip = CLIPTextModel(CLIPTextConfig(**cfg["clip"], max_position_embeddings=77, bos_token_id=tok.bos_token_id,
                                            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
        vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 4,
                            up_block_types=("UpDecoderBlock2D",) * 4, **cfg["vae"])
        transformer = FluxTransformer2DModel(**cfg["transformer"])
    scheduler = FlowMatchEulerDiscreteScheduler(base_image_seq_len=256, base_shift=0.5, max_image_seq_len=4096,
                                                max_shift=1.15, shift=3.0, use_dynamic_shifting=True)
    pipe = FluxKontextPipeline(scheduler=scheduler, vae=vae, text_encoder=clip, tokenizer=tok, text_encoder_2=t5,
                               tokenizer_2=tok2, transformer=transformer, image_encoder=None, feature_extractor=None)
    return FluxKontextEditor(pipe, ModelInfo("bench:flux.1-kontext-dev-architecture", FluxKontextEditor.family,
                                             "random"))


def build_pix2pix(cfg: dict, device: str, dtype):
    from diffusers import (AutoencoderKL, EulerAncestralDiscreteScheduler, StableDiffusionInstructPix2PixPipeline,
                           UNet2DConditionModel)
    from transformers import CLIPTextConfig, CLIPTextModel

    from nemo_desktop.core.models.adapters.diffusers_editor import InstructPix2PixEditor
    from nemo_desktop.core.models.protocols import ModelInfo

    tok = _clip_tokenizer()
    with _Built(device, dtype):
        clip = CLIPTextModel(CLIPTextConfig(**cfg["clip"], max_position_embeddings=77, bos_token_id=tok.bos_token_id,
                                            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
        vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 4,
                            up_block_types=("UpDecoderBlock2D",) * 4, **cfg["vae"])
        unet = UNet2DConditionModel(**cfg["unet"])
    scheduler = EulerAncestralDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                                num_train_timesteps=1000)
    pipe = StableDiffusionInstructPix2PixPipeline(vae=vae, text_encoder=clip, tokenizer=tok, unet=unet,
                                                  scheduler=scheduler, safety_checker=None, feature_extractor=None,
                                                  requires_safety_checker=False)
    return InstructPix2PixEditor(pipe, ModelInfo("bench:instruct-pix2pix-architecture", InstructPix2PixEditor.family,
                                                 "random"))


def build_classifier(arch: str, device: str, dtype, n_classes: int = 1000):
    import timm

    from nemo_desktop.core.models.adapters.timm_classifier import TimmClassifier
    from nemo_desktop.core.models.protocols import ModelInfo

    model = timm.create_model(arch, pretrained=False, num_classes=n_classes)
    names = [f"class_{i:03d}" for i in range(n_classes)]
    return TimmClassifier(model, names, ModelInfo(f"bench:{arch}", "timm", "random"), device=device, dtype=dtype)


class JsonAfterGenerating:
    """Runs the MLLM for every call, then substitutes valid JSON for the prompts that need it."""

    def __init__(self, inner) -> None:
        self.inner, self.info, self.calls = inner, inner.info, 0

    def _fix(self, text: str, reply: str, seed) -> str:
        if "cause_of_error" in text:
            return json.dumps({"cause_of_error": f"The background misleads the model (draw {seed})."})
        if "editing prompt" in text:
            colour = ("red", "green", "blue", "white", "black")[sum(map(ord, text)) % 5]
            return json.dumps({"reasoning": "-", "solution": f"change the color of the background to {colour}"})
        return reply

    @staticmethod
    def _text(messages) -> str:
        return "\n".join(p for m in messages for p in m.content if isinstance(p, str))

    def chat(self, messages, **kw):
        self.calls += 1
        return self._fix(self._text(messages), self.inner.chat(messages, **kw), kw.get("seed"))

    def chat_batch(self, conversations, **kw):
        self.calls += len(conversations)
        replies = self.inner.chat_batch(conversations, **kw)
        return [self._fix(self._text(c), r, kw.get("seed")) for c, r in zip(conversations, replies)]


# -- the run -------------------------------------------------------------------------------------------------
class MemoryByStage:
    """Peak memory per progress stage: CUDA allocator peak (reset at each stage change), or peak RSS on CPU."""

    def __init__(self, cuda: bool) -> None:
        self.cuda, self.stage, self.peaks = cuda, None, {}

    def _peak(self) -> float:
        import torch

        if self.cuda:
            return torch.cuda.max_memory_allocated() / 2**30
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB

    def __call__(self, p) -> None:
        import torch

        stage = p.stage.split(" image")[0] if p.stage.startswith("Editing") else p.stage
        if stage != self.stage:
            self.close()
            self.stage = stage
            if self.cuda:
                torch.cuda.reset_peak_memory_stats()

    def close(self) -> None:
        if self.stage is not None:
            self.peaks[self.stage] = max(self.peaks.get(self.stage, 0.0), self._peak())


def reference_world(root: Path, clf, side: int, n: int, seed: int = 0):
    """Random images filed under the class the classifier predicts for them (so every reference is correct),
    a query, its prediction and a true label that has references too."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    images = [Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8)) for _ in range(n + 1)]
    probs, _ = clf.predict_with_embeddings(images)
    preds = probs.argmax(1)
    for i, (im, p) in enumerate(zip(images[1:], preds[1:])):
        folder = root / "ref" / clf.class_names[int(p)]
        folder.mkdir(parents=True, exist_ok=True)
        im.save(folder / f"{i}.png")
    query = root / "query.png"
    images[0].save(query)
    pred = int(preds[0])
    counts = np.bincount(preds[1:], minlength=len(clf.class_names))
    counts[pred] = -1
    return query, pred, int(counts.argmax())


def profile(args) -> dict:
    import torch

    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.base.job_context import JobContext
    from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline
    from nemo_desktop.core.store import ResultsStore

    cuda = args.device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    loads = {}
    t = time.perf_counter()
    clf = build_classifier("test_vit" if args.tiny else "vit_base_patch16_224", args.device, dtype,
                           n_classes=10 if args.tiny else 1000)
    loads["classifier"] = time.perf_counter() - t
    t = time.perf_counter()
    mllm = build_mllm(QWEN_TINY if args.tiny else QWEN25_VL_7B, args.device, dtype)
    loads["mllm"] = time.perf_counter() - t
    t = time.perf_counter()
    if args.editor == "flux-kontext":
        editor = build_flux_kontext(FLUX_TINY if args.tiny else FLUX_KONTEXT_DEV, args.device, dtype)
    else:
        editor = build_pix2pix(PIX2PIX_TINY if args.tiny else PIX2PIX, args.device, dtype)
    if args.attention_backend:  # the editor option `attention_backend`, applied as its loader does
        from nemo_desktop.core.models.adapters.diffusers_editor import _set_attention_backend

        _set_attention_backend(editor.pipe, args.attention_backend, editor.info.model_id)
    loads["editor"] = time.perf_counter() - t
    if cuda:
        torch.cuda.synchronize()
    out = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "dtype": str(dtype).replace("torch.", ""),
           "editor": args.editor, "tiny": args.tiny, "build_seconds": loads,
           "attention_backend": args.attention_backend or "diffusers default (PyTorch SDPA)",
           "attention": {"mllm": mllm.info.extra.get("attn_implementation"),
                         "editor": sorted({type(p).__name__ for p in editor.pipe.components.get(
                             "transformer", editor.pipe.components.get("unet")).attn_processors.values()})},
           "models_gib": torch.cuda.memory_allocated() / 2**30 if cuda else None, "runs": []}
    steps = args.steps or None
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for side in args.sizes:
            query, pred, y = reference_world(tmp / f"s{side}", clf, side, n=args.references)
            for label, speed in (("default", {}), ("speed", {"caption_batch_size": args.caption_batch,
                                                          "edit_batch_size": args.edit_batch})):
                if label == "speed" and args.caption_batch == 1 and args.edit_batch == 1:
                    continue
                # a fresh store per run: nothing is answered from the cache
                with ResultsStore.open(db_path=tmp / f"store-{side}-{label}" / "results.sqlite") as store:
                    index = build_index(tmp / f"s{side}" / "ref", clf, store)
                    cfg = SciTXConfig(k=args.k, m=args.m, edit_steps=steps, edit_size=(side, side),
                                      caption_max_new_tokens=args.tokens, hypothesis_max_new_tokens=args.tokens,
                                      intervention_max_new_tokens=args.tokens, **speed)
                    memory = MemoryByStage(cuda)
                    wrapped = JsonAfterGenerating(mllm)
                    t = time.perf_counter()
                    result = SciTXPipeline(clf, wrapped, editor, store=store, reference=index, config=cfg)(
                        query, y, JobContext(memory))
                    if cuda:
                        torch.cuda.synchronize()
                    wall = time.perf_counter() - t
                    memory.close()
                out["runs"].append({
                    "size": side, "settings": label, **speed, "steps": steps or editor.steps_for_pipeline(),
                    "k": args.k, "m": args.m, "max_new_tokens": args.tokens, "observations": len(result.observations),
                    "mllm_calls": wrapped.calls, "edits": sum(1 for c in result.candidates if c.edited_artifact),
                    "seconds": {k: round(v, 3) for k, v in result.timings.items()}, "wall_seconds": round(wall, 3),
                    "memory_peak_gib_by_stage": {k: round(v, 3) for k, v in memory.peaks.items()},
                    "memory_peak_gib": round(max(memory.peaks.values(), default=0.0), 3),
                    "errors": [c.error for c in result.candidates if c.error]})
                if getattr(args, "out", None):
                    args.out.write_text(json.dumps(out, indent=2))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="toy sizes of the same architectures (CPU tests)")
    ap.add_argument("--editor", default="flux-kontext", choices=("flux-kontext", "instruct-pix2pix"))
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="edit sizes (default 512 1024; tiny: 32)")
    ap.add_argument("--steps", type=int, default=0, help="editor steps (0 = the editor's default: 28 FLUX, 20 IP2P)")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--m", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=None, help="max new tokens per reply (default 160; tiny: 8)")
    ap.add_argument("--references", type=int, default=None, help="reference images (default 60; tiny: 12)")
    ap.add_argument("--caption-batch", type=int, default=1, help="a second run with caption_batch_size")
    ap.add_argument("--edit-batch", type=int, default=1, help="a second run with edit_batch_size")
    ap.add_argument("--attention-backend", default=None,
                    help="the editor's attention backend, e.g. _native_flash, _native_cudnn, flash (default: SDPA)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", type=Path, default=None,
                    help="also write the figures as JSON here after every run (a run cut short keeps the earlier)")
    args = ap.parse_args(argv)
    if args.tiny:
        args.device = "cpu" if args.device == "cuda" else args.device
    args.sizes = args.sizes or ([32] if args.tiny else [512, 1024])
    args.tokens = args.tokens or (8 if args.tiny else 160)
    args.references = args.references or (12 if args.tiny else 60)
    figures = profile(args)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"SciTX, one sample, random weights from the published configurations; device {figures['device']}, "
          f"{figures['dtype']}, editor {figures['editor']}{' (tiny)' if figures['tiny'] else ''}")
    print("  built: " + ", ".join(f"{k} {v:.1f} s" for k, v in figures["build_seconds"].items())
          + (f"; weights {figures['models_gib']:.1f} GiB" if figures["models_gib"] is not None else ""))
    print(f"  attention: MLLM {figures['attention']['mllm']}, editor {', '.join(figures['attention']['editor'])} "
          f"({figures['attention_backend']})")
    for run in figures["runs"]:
        extra = "" if run["settings"] == "default" else \
            f", caption batch {run['caption_batch_size']}, edit batch {run['edit_batch_size']}"
        print(f"\n  {run['size']}x{run['size']}, {run['steps']} steps, k={run['k']}, m={run['m']}, "
              f"{run['max_new_tokens']} tokens/reply{extra}: {run['observations']} observations, "
              f"{run['mllm_calls']} MLLM calls, {run['edits']} edits, peak {run['memory_peak_gib']:.2f} GiB")
        for stage, sec in run["seconds"].items():
            print(f"    {stage:<13} {sec:9.2f} s")
        for stage, gib in run["memory_peak_gib_by_stage"].items():
            print(f"    peak {stage:<32} {gib:7.2f} GiB")
        for err in run["errors"]:
            print(f"    error: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
