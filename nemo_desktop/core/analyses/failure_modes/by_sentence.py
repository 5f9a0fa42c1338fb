"""Rank a dataset's images (or one cluster's) by a sentence in the joint space: the seed's footnote-4 inspection
("which images does this sentence describe?"), for checking a finding by eye or for any sentence of the user's.
Uses the joint embeddings stored for (index, embedder), so nothing is embedded again after an analysis."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...jobs import JobContext
from ...methods.intervention import sha_text
from .embeddings import image_embeddings, text_embeddings
from .pipeline import joint_space
from .ranking import images_by_sentence


def rank_by_sentence(index: Any, sentence: str, *, embedder: Any = None, classifier: Any = None, store: Any = None,
                     rows: Sequence[int] | None = None, top: int = 12, ctx: JobContext | None = None) -> list[dict]:
    """The `top` images nearest the sentence, best first: row, path, cosine, true and predicted class, correct."""
    space = joint_space(classifier, embedder)
    joint = image_embeddings(index, space, store, ctx)
    emb, _ = text_embeddings([sentence], sha_text(sentence), space, store)
    picked, sims = images_by_sentence(np.asarray(joint.matrix, np.float32), emb[0],
                                      None if rows is None else np.asarray(rows, np.int64), top)
    e, names = index.entries, list(index.class_names)

    def name(i: int) -> str:
        return names[i] if 0 <= i < len(names) else str(i)

    return [{"row": int(r), "path": str(e.paths[r]), "similarity": float(s), "true": name(int(e.labels[r])),
             "pred": name(int(e.preds[r])), "correct": bool(e.correct[r])} for r, s in zip(picked, sims)]
