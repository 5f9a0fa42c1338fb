"""A tiny random Llama chat model (text only) saved with `save_pretrained`, for the transformers-llm family:
the real classes (LlamaForCausalLM, a fast BPE tokenizer) with a Llama-3-style chat template, a generation
config with the sampling fields the real Llama 3.1 Instruct ships (temperature 0.6, top_p 0.9) planted."""
from __future__ import annotations

from pathlib import Path

LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


def build_tiny_llama(tmp_dir, *, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(tmp_dir) / "tiny-llama"
    specials = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<pad>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["You are a machine learning researcher. Model A and Model B are classifying digit images.",
              "Explanation: Model A is worse than model B for the digits 0 and 1. Options: [1] Model A, [2] Model B",
              '{"explanation": "Model B is worse on blue digits."} user assistant system']
    tok.train_from_iterator(corpus * 8, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                             show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                        pad_token="<pad>")
    tokenizer.chat_template = LLAMA3_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                               do_sample=True, temperature=0.6, top_p=0.9)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out
