"""Tiny random diffusers editing pipelines (InstructPix2Pix, FLUX.1 Kontext, Qwen-Image-Edit) built offline.

Each `build_tiny_*(tmp_dir)` builds the same component classes as the real checkpoint with tiny configs and
tokenizers trained in milliseconds, and saves the pipeline with `save_pretrained`, so the directory loads
through `DiffusionPipeline.from_pretrained` exactly like a Hub snapshot. The VAEs downsample by 8 like the
real ones, so the pipelines' size multiples (8 for InstructPix2Pix, 16 for the flow-matching editors) are
the real ones too. Outputs are noise: tests check sizes, plumbing, determinism and cancellation.
"""
from __future__ import annotations

from pathlib import Path

_CORPUS = [
    "make the dog a cat", "turn the background into snow", "a photo of a bird on a branch",
    "change the color of the car to red", "remove the person from the beach", "add a hat",
    "describe the key features of the input image color shape size texture objects background",
]


def _clip_tokenizer():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import CLIPTokenizer

    tok = Tokenizer(models.BPE(unk_token="<|endoftext|>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    trainer = trainers.BpeTrainer(vocab_size=256, special_tokens=["<|startoftext|>", "<|endoftext|>"],
                                  end_of_word_suffix="</w>", show_progress=False)
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    return CLIPTokenizer(tokenizer_object=tok, model_max_length=77)


def _t5_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import T5TokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=128, special_tokens=["<pad>", "</s>", "<unk>"],
                                      unk_token="<unk>", show_progress=False)
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    return T5TokenizerFast(tokenizer_object=tok, extra_ids=0, pad_token="<pad>", eos_token="</s>",
                           unk_token="<unk>", model_max_length=512)


def _clip_text_encoder(tokenizer, hidden: int = 32):
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                            num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=77,
                            projection_dim=hidden, bos_token_id=tokenizer.bos_token_id,
                            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return CLIPTextModel(config)


def _vae_kl(latent_channels: int = 4, **extra):
    """AutoencoderKL with 4 blocks (downsampling 8x, like SD/FLUX) and 8 channels per block."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(8, 8, 8, 8),
                         down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
                         layers_per_block=1, latent_channels=latent_channels, norm_num_groups=4, sample_size=64,
                         **extra)


def build_tiny_instruct_pix2pix(tmp_dir, *, seed: int = 0) -> Path:
    """StableDiffusionInstructPix2PixPipeline: UNet with 8 input channels (noise + image latents)."""
    import torch
    from diffusers import EulerAncestralDiscreteScheduler, StableDiffusionInstructPix2PixPipeline, UNet2DConditionModel

    out = Path(tmp_dir) / "tiny-instruct-pix2pix"
    torch.manual_seed(seed)
    tokenizer = _clip_tokenizer()
    unet = UNet2DConditionModel(sample_size=8, in_channels=8, out_channels=4, layers_per_block=1,
                                block_out_channels=(16, 32), norm_num_groups=8,
                                down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
                                cross_attention_dim=32, attention_head_dim=8)
    # The scheduler of timbrooks/instruct-pix2pix.
    scheduler = EulerAncestralDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                                num_train_timesteps=1000)
    pipe = StableDiffusionInstructPix2PixPipeline(
        vae=_vae_kl(), text_encoder=_clip_text_encoder(tokenizer), tokenizer=tokenizer, unet=unet,
        scheduler=scheduler, safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(out, safe_serialization=True)
    return out


def build_tiny_flux_kontext(tmp_dir, *, seed: int = 0) -> Path:
    """FluxKontextPipeline: 1 double + 1 single transformer block, CLIP and T5 text encoders."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxKontextPipeline, FluxTransformer2DModel
    from transformers import T5Config, T5EncoderModel

    out = Path(tmp_dir) / "tiny-flux-kontext"
    torch.manual_seed(seed)
    tokenizer, tokenizer_2 = _clip_tokenizer(), _t5_tokenizer()
    t5 = T5EncoderModel(T5Config(vocab_size=len(tokenizer_2), d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                 num_heads=4, pad_token_id=tokenizer_2.pad_token_id,
                                 eos_token_id=tokenizer_2.eos_token_id))
    transformer = FluxTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                         attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                         pooled_projection_dim=32, guidance_embeds=True, axes_dims_rope=(4, 4, 8))
    # FLUX.1-Kontext-dev's scheduler config (dynamic shifting).
    scheduler = FlowMatchEulerDiscreteScheduler(base_image_seq_len=256, base_shift=0.5, max_image_seq_len=4096,
                                                max_shift=1.15, shift=3.0, use_dynamic_shifting=True)
    pipe = FluxKontextPipeline(
        scheduler=scheduler, vae=_vae_kl(shift_factor=0.1159, scaling_factor=0.3611),
        text_encoder=_clip_text_encoder(tokenizer), tokenizer=tokenizer, text_encoder_2=t5, tokenizer_2=tokenizer_2,
        transformer=transformer, image_encoder=None, feature_extractor=None)
    pipe.save_pretrained(out, safe_serialization=True)
    return out


def build_tiny_qwen_image_edit(tmp_dir, *, seed: int = 0, plus: bool = False) -> Path:
    """QwenImageEditPipeline (or ...PlusPipeline): tiny Qwen2.5-VL text encoder, Qwen-Image VAE and DiT.

    The tiny Qwen2.5-VL comes from the MLLM fixtures (same tokenizer, config and processor recipe)."""
    import torch
    from diffusers import (AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImageEditPipeline,
                           QwenImageEditPlusPipeline, QwenImageTransformer2DModel)
    from transformers import Qwen2_5_VLForConditionalGeneration

    from .mllm import SPECIAL_TOKENS, _configs, _processor, _tokenizer

    out = Path(tmp_dir) / ("tiny-qwen-image-edit-plus" if plus else "tiny-qwen-image-edit")
    torch.manual_seed(seed)
    tokenizer = _tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text_encoder = Qwen2_5_VLForConditionalGeneration(_configs("qwen2_5_vl", len(tokenizer), ids))
    z_dim = 4
    # Three temporal-downsample flags -> spatial factor 8, as in the real Qwen-Image VAE.
    vae = AutoencoderKLQwenImage(base_dim=4, z_dim=z_dim, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                                 temperal_downsample=[False, True, True], latents_mean=[0.0] * z_dim,
                                 latents_std=[1.0] * z_dim)
    transformer = QwenImageTransformer2DModel(patch_size=2, in_channels=4 * z_dim, out_channels=z_dim, num_layers=1,
                                              attention_head_dim=16, num_attention_heads=2,
                                              joint_attention_dim=text_encoder.config.text_config.hidden_size,
                                              guidance_embeds=False, axes_dims_rope=(4, 6, 6))
    scheduler = FlowMatchEulerDiscreteScheduler(base_image_seq_len=256, base_shift=0.5, max_image_seq_len=8192,
                                                max_shift=0.9, shift=1.0, use_dynamic_shifting=True,
                                                time_shift_type="exponential")
    cls = QwenImageEditPlusPipeline if plus else QwenImageEditPipeline
    pipe = cls(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer,
               processor=_processor("qwen2_vl", tokenizer), transformer=transformer)
    pipe.save_pretrained(out, safe_serialization=True)
    return out
