"""Tiny random models for benchmarks that time the application's plumbing, not model quality.

Each builder makes a model with the real architecture and tiny sizes, saves it with the library's own save
function, and returns the folder, which the application then loads through its real loaders
(`nemo_desktop.core.models.families.load_model`). Weights are random: replies are nonsense and edits are
noise. The recipes follow tests/fixtures_tiny/ (which benchmarks must not import: that is test code).
"""
from __future__ import annotations

from pathlib import Path

CLASSES = ["cat", "dog", "car", "tree", "boat", "house", "bird", "fish", "cup", "shoe"]

_TEXT = [
    "The classifier predicted a dog but the image shows a cat sitting on a sandy beach.",
    "Describe the image. What is the main object and what is in the background?",
    "A red car parked next to a green tree under a blue sky. make the dog a cat",
    "Hypothesis: the model relies on the snowy background instead of the animal's shape.",
    "change the color of the car to red, remove the person, add a hat, turn the background into snow",
]
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]
QWEN_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_timm_classifier(folder: Path, *, seed: int = 0, side: int = 64) -> Path:
    """A random timm `test_resnet` with 10 named classes (save_for_hf: config.json + model.safetensors)."""
    import timm
    import torch

    torch.manual_seed(seed)
    model = timm.create_model("test_resnet", pretrained=False, num_classes=len(CLASSES))
    timm.models.save_for_hf(model, str(folder), model_config={"label_names": CLASSES}, safe_serialization=True,
                            data_config={"input_size": (3, side, side), "crop_pct": 1.0})
    return Path(folder)


def _bpe(specials: list[str], vocab: int, **tokenizer_kw):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_TEXT * 4, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, **tokenizer_kw)


def build_qwen2_vl(folder: Path, *, seed: int = 0) -> Path:
    """A random Qwen2-VL (2 text layers of width 64, 2 vision blocks) with its processor."""
    import torch
    import transformers as tf

    tokenizer = _bpe(QWEN_SPECIALS, 320, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                     chat_template=QWEN_TEMPLATE, padding_side="left")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}
    text = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<|endoftext|>"],
                tie_word_embeddings=False,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]})
    vision = dict(depth=2, embed_dim=32, hidden_size=64, mlp_ratio=2, num_heads=2, patch_size=8,
                  spatial_merge_size=2, temporal_patch_size=2)
    config = tf.Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
                              video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                              vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = tf.AutoModelForImageTextToText.from_config(config)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(folder, safe_serialization=True)
    common = dict(patch_size=8, merge_size=2, temporal_patch_size=2)
    processor = tf.Qwen2VLProcessor(
        image_processor=tf.Qwen2VLImageProcessor(size={"shortest_edge": 16 * 16, "longest_edge": 64 * 64}, **common),
        tokenizer=tokenizer, video_processor=tf.Qwen2VLVideoProcessor(**common), chat_template=QWEN_TEMPLATE)
    processor.save_pretrained(folder)
    return Path(folder)


def _clip_tokenizer():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import CLIPTokenizer

    tok = Tokenizer(models.BPE(unk_token="<|endoftext|>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    trainer = trainers.BpeTrainer(vocab_size=256, special_tokens=["<|startoftext|>", "<|endoftext|>"],
                                  end_of_word_suffix="</w>", show_progress=False)
    tok.train_from_iterator(_TEXT * 4, trainer=trainer)
    return CLIPTokenizer(tokenizer_object=tok, model_max_length=77)


def build_instruct_pix2pix(folder: Path, *, seed: int = 0) -> Path:
    """A random StableDiffusionInstructPix2PixPipeline (UNet with 8 input channels, 8x VAE, 2-layer CLIP)."""
    import torch
    from diffusers import (AutoencoderKL, EulerAncestralDiscreteScheduler, StableDiffusionInstructPix2PixPipeline,
                           UNet2DConditionModel)
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(seed)
    tokenizer = _clip_tokenizer()
    text_encoder = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=77, projection_dim=32, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))
    unet = UNet2DConditionModel(sample_size=8, in_channels=8, out_channels=4, layers_per_block=1,
                                block_out_channels=(16, 32), norm_num_groups=8,
                                down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
                                cross_attention_dim=32, attention_head_dim=8)
    vae = AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(8, 8, 8, 8),
                        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
                        layers_per_block=1, latent_channels=4, norm_num_groups=4, sample_size=64)
    scheduler = EulerAncestralDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                                num_train_timesteps=1000)
    pipe = StableDiffusionInstructPix2PixPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                                  scheduler=scheduler, safety_checker=None, feature_extractor=None,
                                                  requires_safety_checker=False)
    pipe.save_pretrained(folder, safe_serialization=True)
    return Path(folder)


def write_image_folder(root: Path, per_class: int, side: int = 64, seed: int = 0,
                       classes: list[str] | None = None) -> Path:
    """root/<class>/<n>.png: smooth random colour fields (decodable images of a realistic small size)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for c in classes or CLASSES:
        (root / c).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            small = rng.integers(0, 255, (4, 4, 3), dtype=np.uint8)
            Image.fromarray(small).resize((side, side), Image.BILINEAR).save(root / c / f"{i:05d}.png")
    return root
