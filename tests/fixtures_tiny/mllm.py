"""Tiny random Qwen-VL checkpoints (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3-VL-MoE) built offline.

`build_tiny_qwen_vl(tmp_dir, variant)` trains a byte-level BPE tokenizer on a few sentences, builds a
random model with a tiny config, and saves model + processor with `save_pretrained`, so that the directory
loads through `AutoModelForImageTextToText` / `AutoProcessor` exactly like a real Hub checkpoint.
Outputs are random text; tests check shapes, determinism and plumbing, not content.
"""
from __future__ import annotations

from pathlib import Path

VARIANTS = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")
PATCH_SIZE = 8
MERGE_SIZE = 2

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"]

# The public Qwen2-VL chat template (images/videos as vision_start + pad + vision_end), shortened.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = [
    "The classifier predicted a dog but the image shows a cat sitting on a sandy beach.",
    "Describe the image. What is the main object and what is in the background?",
    "A red car parked next to a green tree under a blue sky.",
    "The painting of a bird is rendered in a cartoon style with thick outlines.",
    "Hypothesis: the model relies on the snowy background instead of the animal's shape.",
    "0 1 2 3 4 5 6 7 8 9 yes no maybe because however therefore",
]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=CHAT_TEMPLATE, padding_side="left")


def _configs(variant: str, vocab_size: int, ids: dict[str, int]):
    import transformers as tf

    text = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
                bos_token_id=ids["<|endoftext|>"], tie_word_embeddings=False,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]})
    vision = dict(depth=2, hidden_size=32, num_heads=2, patch_size=PATCH_SIZE, spatial_merge_size=MERGE_SIZE,
                  temporal_patch_size=2)
    top = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
               vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
               tie_word_embeddings=False)
    if variant == "qwen2_vl":
        # Qwen2-VL: embed_dim is the ViT width, hidden_size the merger output (= text hidden size).
        vision.update(embed_dim=32, hidden_size=64, mlp_ratio=2)
        return tf.Qwen2VLConfig(text_config=text, vision_config=vision, **top)
    if variant == "qwen2_5_vl":
        vision.update(intermediate_size=64, out_hidden_size=64, window_size=32, fullatt_block_indexes=[1])
        return tf.Qwen2_5_VLConfig(text_config=text, vision_config=vision, **top)
    text.update(head_dim=16)
    text["rope_parameters"]["mrope_interleaved"] = True
    vision.update(intermediate_size=64, out_hidden_size=64, num_position_embeddings=64,
                  deepstack_visual_indexes=[1])
    if variant == "qwen3_vl":
        return tf.Qwen3VLConfig(text_config=text, vision_config=vision, **top)
    if variant == "qwen3_vl_moe":
        text.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1)
        return tf.Qwen3VLMoeConfig(text_config=text, vision_config=vision, **top)
    raise ValueError(f"unknown variant {variant!r}; choose one of {VARIANTS}")


def _processor(variant: str, tokenizer):
    import transformers as tf

    common = dict(patch_size=PATCH_SIZE, merge_size=MERGE_SIZE, temporal_patch_size=2)
    # Small default pixel budget so that tests run fast; callers override it per load.
    image_processor = tf.Qwen2VLImageProcessor(size={"shortest_edge": 16 * 16, "longest_edge": 64 * 64}, **common)
    if variant.startswith("qwen3"):
        video_processor = tf.Qwen3VLVideoProcessor(**common)
        cls = tf.Qwen3VLProcessor
    else:
        video_processor = tf.Qwen2VLVideoProcessor(**common)
        cls = tf.Qwen2_5_VLProcessor if variant == "qwen2_5_vl" else tf.Qwen2VLProcessor
    return cls(image_processor=image_processor, tokenizer=tokenizer, video_processor=video_processor,
               chat_template=CHAT_TEMPLATE)


def build_tiny_qwen_vl(tmp_dir, variant: str = "qwen2_vl", *, seed: int = 0) -> Path:
    """Build, save and return the directory of a tiny random Qwen-VL checkpoint of the given variant."""
    import torch
    from transformers import AutoModelForImageTextToText

    out = Path(tmp_dir) / f"tiny-{variant}"
    tokenizer = _tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = _configs(variant, len(tokenizer), ids)
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out, safe_serialization=True)
    _processor(variant, tokenizer).save_pretrained(out)
    return out


# The sampling fields Qwen2.5-VL-Instruct ships in generation_config.json (Qwen2-VL-Instruct: the same with
# temperature 0.01 too): with top_k=1 every "sampled" draw is the greedy one unless a call overrides it.
QWEN2_5_VL_INSTRUCT_GENERATION = {"do_sample": True, "top_k": 1, "top_p": 0.001, "temperature": 0.01,
                                  "repetition_penalty": 1.05}
JSON_OPEN = '{"cause_of_error": "'
JSON_CLOSE = '", "solution": "make it plain"}'
JSON_WORDS = tuple(f" {w}" for w in ("snowy", "background", "cartoon", "style", "texture", "shape", "colour",
                                     "outlines", "painting", "beach"))


def plant_generation_config(model_dir, fields: dict) -> None:
    """Write a real checkpoint's generation_config fields into a saved tiny model (eos/pad ids kept)."""
    from transformers import GenerationConfig

    cfg = GenerationConfig.from_pretrained(model_dir)
    for name, value in fields.items():
        setattr(cfg, name, value)
    cfg.save_pretrained(model_dir)


def build_tiny_json_qwen_vl(tmp_dir, *, generation: dict | None = None) -> Path:
    """A tiny Qwen2-VL whose weights are set (not trained) to a known token chain, whatever the prompt:

        <generation prompt> -> JSON_OPEN -> word (JSON_WORDS[i] with logit -0.1 i)
        word -> another word (the same logits) or JSON_CLOSE (logit 1) ;  JSON_CLOSE -> <|im_end|>

    Every attention output and MLP is zeroed, so each position's logits depend on its own token only; the
    embeddings of the chain's tokens are basis vectors and lm_head holds the transition logits. Greedy
    decoding therefore writes `{"cause_of_error": " snowy", "solution": "make it plain"}` every time,
    while sampling writes different readable hypotheses of a few words: what SciTX's candidate draws need
    to be tested on. Real architecture, real loader, real `generate` with its real sampling warpers.
    `generation` plants a checkpoint's generation_config fields (e.g. QWEN2_5_VL_INSTRUCT_GENERATION)."""
    import torch
    from transformers import AutoModelForImageTextToText

    out = Path(tmp_dir) / "tiny-json-qwen2_vl"
    tokenizer = _tokenizer()
    tokenizer.add_tokens([JSON_OPEN, JSON_CLOSE, *JSON_WORDS])
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = _configs("qwen2_vl", len(tokenizer), ids)
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(config)
    processor = _processor("qwen2_vl", tokenizer)
    prompt_end = processor.apply_chat_template([{"role": "user", "content": [{"type": "text", "text": "x"}]}],
                                               add_generation_prompt=True, tokenize=True)[-1]
    if isinstance(prompt_end, list):
        prompt_end = prompt_end[-1]
    tok = tokenizer.convert_tokens_to_ids
    states = [prompt_end, tok(JSON_OPEN), tok(JSON_CLOSE), *[tok(w) for w in JSON_WORDS]]
    words = [tok(w) for w in JSON_WORDS]
    hidden = config.text_config.hidden_size
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("o_proj.weight", "o_proj.bias", "down_proj.weight", "down_proj.bias")):
                p.zero_()
        emb = model.get_input_embeddings().weight
        head = model.get_output_embeddings().weight
        model.model.language_model.norm.weight.fill_(1.0)
        scale = hidden ** 0.5  # RMSNorm turns a basis vector into sqrt(hidden) times it
        head.fill_(-30.0 / scale)
        for j, state in enumerate(states):
            emb[state] = 0.0
            emb[state, j] = 1.0
        head[tok(JSON_OPEN), 0] = 20.0 / scale
        ranked = torch.arange(len(words), dtype=head.dtype).unsqueeze(1) * (-0.1 / scale)  # no ties: one argmax
        head[words, 1:2] = ranked
        head[words, 3:3 + len(words)] = ranked
        head[tok(JSON_CLOSE), 3:3 + len(words)] = 1.0 / scale
        head[ids["<|im_end|>"], 2] = 20.0 / scale
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    if generation:
        plant_generation_config(out, generation)
    return out
