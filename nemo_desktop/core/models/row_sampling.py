"""Sampling with one seed per row, so a batch of draws gives each draw what it would get alone.

transformers' `generate` samples every row of a batch from one random generator, so a draw's tokens depend
on which other draws share its batch. SciTX sends its M hypothesis draws (draw 0 greedy, draw d seeded with
`seed * 1000 + d`) as one batch, and each must stay reproducible on its own. `RowSampler` is a logits
processor that does the sampling step itself: for a sampled row it applies that row's temperature, top-k,
top-p and min-p (transformers' own warpers, in transformers' order), draws the next token from the row's own
`torch.Generator`, and leaves only that token possible; generate() then runs greedy, which picks it. Greedy
rows pass through untouched. The checkpoint's other processors (repetition penalty) run before it, as they
do before transformers' own sampling step.
"""
from __future__ import annotations

from typing import Any, Sequence

from .sampling import Sampling


def _warpers(sampling: Sampling) -> list[Any]:
    from transformers.generation.logits_process import (MinPLogitsWarper, TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)

    warpers: list[Any] = []
    if sampling.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k:
        warpers.append(TopKLogitsWarper(top_k=sampling.top_k))
    if sampling.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=sampling.top_p))
    if sampling.min_p > 0.0:
        warpers.append(MinPLogitsWarper(min_p=sampling.min_p))
    return warpers


class RowSampler:
    """A transformers LogitsProcessor: row i is sampled with `rows[i]` = (Sampling, seed), or greedy if None."""

    def __init__(self, rows: Sequence[tuple[Sampling, int | None] | None], device: Any) -> None:
        import torch

        self.rows = []
        for row in rows:
            if row is None:
                self.rows.append(None)
                continue
            sampling, seed = row
            gen = torch.Generator(device=device)
            if seed is None:
                gen.seed()  # unseeded draw: fresh entropy, as transformers would without a seed
            else:
                gen.manual_seed(int(seed))
            self.rows.append((_warpers(sampling), gen))

    @property
    def samples(self) -> bool:
        return any(r is not None for r in self.rows)

    def __call__(self, input_ids, scores):
        import torch

        out = scores
        for i, row in enumerate(self.rows):
            if row is None:
                continue
            warpers, gen = row
            ids, logits = input_ids[i:i + 1], scores[i:i + 1].float()
            for warp in warpers:
                logits = warp(ids, logits)
            probs = torch.softmax(logits, dim=-1)
            token = torch.multinomial(probs, num_samples=1, generator=gen)[0, 0]
            if out is scores:
                out = scores.clone()
            out[i] = float("-inf")
            out[i, token] = 0.0
        return out
