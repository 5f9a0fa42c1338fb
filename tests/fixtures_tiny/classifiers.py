"""Tiny random classifiers saved with their libraries' own save functions, for offline loader tests.

Each builder writes a folder (or files) that the real NEMO loaders read exactly like a downloaded
checkpoint: timm (`save_for_hf`), transformers CLIP / SigLIP (`save_pretrained` of model and processor,
with a byte-level BPE tokenizer trained here in milliseconds) and open_clip (a JSON model config plus a
safetensors checkpoint, both as a config dir for `open_clip.add_model_config` and as a `local-dir:`).
Weights are random: tests check shapes, normalisation, gradients and plumbing, not accuracy.
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path

TINY_CLASSES = ["cat", "dog", "car", "tree", "boat", "house", "bird", "fish", "cup", "shoe"]

_CORPUS = [
    "a photo of a cat.", "a photo of a dog on a sandy beach.", "This is a photo of a red car.",
    "a photo of a green tree under a blue sky.", "a small boat on the water", "a house with a garden",
    "a bird in the snow", "a fish in a bowl", "a cup of tea on a table", "a shoe on the floor",
    "a drawing of a class name", "a sculpture, a painting, a cartoon, a sketch",
]


def build_tiny_timm(folder: str | Path, *, arch: str = "test_resnet", num_classes: int = 10,
                    label_names: list[str] | None = None, input_size: int | None = 64, seed: int = 0) -> Path:
    """A random timm model saved with save_for_hf (config.json + model.safetensors)."""
    import timm
    import torch

    torch.manual_seed(seed)
    model = timm.create_model(arch, pretrained=False, num_classes=num_classes)
    data_config = {"input_size": (3, input_size, input_size), "crop_pct": 1.0} if input_size else None
    model_config = {"label_names": list(label_names)} if label_names else None
    if "data_config" in inspect.signature(timm.models.save_for_hf).parameters:  # timm >= 1.0.31
        timm.models.save_for_hf(model, str(folder), model_config=model_config, safe_serialization=True,
                                data_config=data_config)
    else:  # older timm (the lowest-versions check): write the same pretrained_cfg fields into config.json
        timm.models.save_for_hf(model, str(folder), model_config=model_config, safe_serialization=True)
        if data_config:
            cfg_path = Path(folder) / "config.json"
            cfg = json.loads(cfg_path.read_text())
            cfg["pretrained_cfg"].update({k: list(v) if isinstance(v, tuple) else v for k, v in data_config.items()})
            cfg_path.write_text(json.dumps(cfg, indent=2))
    return Path(folder)


def build_tiny_tokenizer(max_length: int = 16, lowercase: bool = True):
    """A byte-level BPE tokenizer (vocab ~300) with <bos>/<eos>/<pad>; every text ends in <eos>.

    <eos> gets id 1, not 2: CLIPTextTransformer treats eos_token_id == 2 as a legacy config and pools at
    the highest token id instead of at <eos>, which would make prompts with a common prefix collide."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    if lowercase:
        tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<eos>", "<bos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    bos, eos = tok.token_to_id("<bos>"), tok.token_to_id("<eos>")
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A <eos>", special_tokens=[("<bos>", bos),
                                                                                                ("<eos>", eos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                   model_max_length=max_length)


def _vl_configs(tokenizer, image_size: int, text_len: int):
    text = dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=2, max_position_embeddings=text_len, pad_token_id=tokenizer.pad_token_id,
                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                  image_size=image_size, patch_size=8)
    return text, vision


def build_tiny_clip(folder: str | Path, *, image_size: int = 32, seed: int = 0) -> Path:
    """A random CLIPModel + CLIPProcessor saved with save_pretrained."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    torch.manual_seed(seed)
    tokenizer = build_tiny_tokenizer(max_length=16)
    text, vision = _vl_configs(tokenizer, image_size, 16)
    model = CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=24))
    image_processor = CLIPImageProcessor(size={"shortest_edge": image_size},
                                         crop_size={"height": image_size, "width": image_size})
    model.save_pretrained(folder)
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)
    return Path(folder)


def build_tiny_siglip(folder: str | Path, *, image_size: int = 32, seed: int = 0) -> Path:
    """A random SiglipModel + SiglipProcessor saved with save_pretrained."""
    import torch
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipProcessor

    torch.manual_seed(seed)
    tokenizer = build_tiny_tokenizer(max_length=16)
    text, vision = _vl_configs(tokenizer, image_size, 16)
    text["projection_size"] = 32
    model = SiglipModel(SiglipConfig(text_config=text, vision_config=vision))
    with torch.no_grad():  # a visible bias, so tests can check that it cancels in the softmax
        model.logit_bias.fill_(-3.0)
    image_processor = SiglipImageProcessor(size={"height": image_size, "width": image_size})
    model.save_pretrained(folder)
    SiglipProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)
    return Path(folder)


OPEN_CLIP_TINY_NAME = "nemo-tiny-clip"
OPEN_CLIP_TINY_CFG = {
    "embed_dim": 24,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}


def build_tiny_open_clip(folder: str | Path, *, seed: int = 0) -> dict[str, Path]:
    """A random open_clip model in two layouts: `config_dir` (model config JSON for add_model_config) +
    `checkpoint` (safetensors), and `local_dir` (open_clip_config.json + open_clip_model.safetensors)."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    config_dir, local_dir = folder / "configs", folder / "local"
    config_dir.mkdir(parents=True, exist_ok=True)
    local_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / f"{OPEN_CLIP_TINY_NAME}.json").write_text(json.dumps(OPEN_CLIP_TINY_CFG))
    open_clip.add_model_config(config_dir)
    torch.manual_seed(seed)
    model = open_clip.create_model(OPEN_CLIP_TINY_NAME, pretrained=None)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    checkpoint = folder / "tiny_open_clip.safetensors"
    save_file(state, str(checkpoint))
    save_file(state, str(local_dir / "open_clip_model.safetensors"))
    preprocess = {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711],
                  "interpolation": "bicubic", "resize_mode": "shortest"}
    (local_dir / "open_clip_config.json").write_text(json.dumps({"model_cfg": OPEN_CLIP_TINY_CFG,
                                                                  "preprocess_cfg": preprocess}))
    return {"config_dir": config_dir, "checkpoint": checkpoint, "local_dir": local_dir}


def write_class_file(path: str | Path, names: list[str]) -> Path:
    Path(path).write_text("\n".join(names) + "\n", encoding="utf-8")
    return Path(path)


def install_in_hf_cache(cache_dir: str | Path, repo_id: str, folder: str | Path, *,
                        commit: str = "0123456789abcdef0123456789abcdef01234567", ref: str = "main") -> Path:
    """Lay `folder`'s files out as huggingface_hub's cache does (blobs + snapshot symlinks + refs/<ref>), so
    offline `hf_hub_download` / `from_pretrained` find them as if downloaded. Returns the snapshot folder."""
    import hashlib
    import os
    import shutil

    repo_dir = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / commit
    (repo_dir / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for src in Path(folder).iterdir():
        if not src.is_file():
            continue
        blob = repo_dir / "blobs" / hashlib.sha256(src.read_bytes()).hexdigest()
        shutil.copyfile(src, blob)
        link = snapshot / src.name
        if link.exists() or link.is_symlink():
            link.unlink()
        os.symlink(os.path.relpath(blob, snapshot), link)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / ref).write_text(commit)
    return snapshot
