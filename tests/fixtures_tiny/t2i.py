"""Tiny random diffusers text-to-image pipelines (FLUX.1 [schnell], Stable Diffusion 3.5 Medium) built offline.

Same component classes as the real checkpoints with tiny configs (the editors' tokenizers and VAE), each
checkpoint's own scheduler config planted, saved with `save_pretrained` so they load through
`DiffusionPipeline.from_pretrained` like a Hub snapshot. Outputs are noise: tests check plumbing, sizes,
determinism, the settings passed and cancellation.
"""
from __future__ import annotations

from pathlib import Path

from .editors import _clip_tokenizer, _t5_tokenizer, _vae_kl

# scheduler/scheduler_config.json of the real repositories.
FLUX_SCHNELL_SCHEDULER = {"base_image_seq_len": 256, "base_shift": 0.5, "max_image_seq_len": 4096,
                          "max_shift": 1.15, "num_train_timesteps": 1000, "shift": 1.0,
                          "use_dynamic_shifting": False}
SD35_MEDIUM_SCHEDULER = {"num_train_timesteps": 1000, "shift": 3.0}


def _t5(tokenizer):
    from transformers import T5Config, T5EncoderModel

    return T5EncoderModel(T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                   num_heads=4, pad_token_id=tokenizer.pad_token_id,
                                   eos_token_id=tokenizer.eos_token_id))


def build_tiny_flux_schnell(tmp_dir, *, seed: int = 0) -> Path:
    """FluxPipeline without guidance embedding (schnell is timestep-distilled)."""
    import torch
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        FluxPipeline,
        FluxTransformer2DModel,
    )

    from .editors import _clip_text_encoder

    out = Path(tmp_dir) / "tiny-flux-schnell"
    torch.manual_seed(seed)
    tokenizer, tokenizer_2 = _clip_tokenizer(), _t5_tokenizer()
    transformer = FluxTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                         attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                         pooled_projection_dim=32, guidance_embeds=False, axes_dims_rope=(4, 4, 8))
    pipe = FluxPipeline(scheduler=FlowMatchEulerDiscreteScheduler(**FLUX_SCHNELL_SCHEDULER),
                        vae=_vae_kl(shift_factor=0.1159, scaling_factor=0.3611),
                        text_encoder=_clip_text_encoder(tokenizer), tokenizer=tokenizer, text_encoder_2=_t5(tokenizer_2),
                        tokenizer_2=tokenizer_2, transformer=transformer)
    pipe.save_pretrained(out, safe_serialization=True)
    return out


def build_tiny_sd35(tmp_dir, *, seed: int = 0) -> Path:
    """StableDiffusion3Pipeline: two CLIP text encoders with projections, a T5, a 1-layer SD3 transformer."""
    import torch
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        SD3Transformer2DModel,
        StableDiffusion3Pipeline,
    )
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    out = Path(tmp_dir) / "tiny-sd35"
    torch.manual_seed(seed)
    tok, tok_3 = _clip_tokenizer(), _t5_tokenizer()

    def clip():
        return CLIPTextModelWithProjection(CLIPTextConfig(
            vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            max_position_embeddings=77, projection_dim=32, bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))

    transformer = SD3Transformer2DModel(sample_size=32, patch_size=1, in_channels=4, num_layers=1,
                                        attention_head_dim=8, num_attention_heads=4, caption_projection_dim=32,
                                        joint_attention_dim=32, pooled_projection_dim=64, out_channels=4)
    pipe = StableDiffusion3Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(**SD35_MEDIUM_SCHEDULER),
                                    vae=_vae_kl(shift_factor=0.0609, scaling_factor=1.5305),
                                    text_encoder=clip(), tokenizer=tok, text_encoder_2=clip(), tokenizer_2=tok,
                                    text_encoder_3=_t5(tok_3), tokenizer_3=tok_3, transformer=transformer)
    pipe.save_pretrained(out, safe_serialization=True)
    return out
