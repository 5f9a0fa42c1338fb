"""Rank a dataset's images (or one cluster's) by a sentence in the joint space: the seed's footnote-4 inspection
("which images does this sentence describe?"), for checking a finding by eye or for any sentence of the user's.
Uses the joint embeddings stored for (index, embedder), so nothing is embedded again after an analysis."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...base.errors import ConfigError
from ...base.job_context import JobContext
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


@dataclass(frozen=True)
class SentenceRanking:
    """Every image of an index ordered by cosine to one sentence in the joint space (the dataset browser shows
    it as a grid order). Images are named by path, as failure modes are (members.py): rows shift when an index
    grows."""

    sentence: str
    index_id: str | None
    dataset_root: str | None
    embedder_id: str
    paths: tuple[str, ...]  # images with a joint embedding, most similar first
    similarities: np.ndarray  # cosine of each, same order
    left_out: int = 0  # images without a joint embedding (unreadable when embedded): not ranked

    @property
    def caption(self) -> str:
        """What the grid shows, for the bar above it."""
        missing = f"; {self.left_out} without a joint embedding come last" if self.left_out else ""
        return (f"{len(self.paths):,} images ordered by similarity to the sentence (most similar first, "
                f"{self.embedder_id}{missing}): \u201c{self.sentence}\u201d")


def rank_index(index: Any, sentence: str, *, embedder: Any = None, classifier: Any = None, store: Any = None,
               ctx: JobContext | None = None) -> SentenceRanking:
    """All the index's images by similarity to `sentence`, from the joint embeddings stored for (index, embedder):
    only the sentence is embedded after an analysis."""
    if not sentence.strip():
        raise ConfigError("The sentence to rank the images by is empty.", hint="Type a sentence.")
    space = joint_space(classifier, embedder)
    joint = image_embeddings(index, space, store, ctx)
    emb, _ = text_embeddings([sentence], sha_text(sentence), space, store)
    rows, sims = images_by_sentence(np.asarray(joint.matrix, np.float32), emb[0])
    paths = index.entries.paths
    return SentenceRanking(sentence, index.index_id, getattr(index, "dataset_root", None), space.info.model_id,
                           tuple(str(paths[r]) for r in rows), sims, len(index) - len(rows))


def ranked_places(paths: Sequence[str] | np.ndarray, ranking: SentenceRanking) -> np.ndarray:
    """Each of `paths`' place in the ranking (0 = most similar); images the ranking lacks get len(ranking), so a
    stable sort by place puts them last in their own order."""
    place = {p: i for i, p in enumerate(ranking.paths)}
    last = len(ranking.paths)
    return np.fromiter((place.get(str(p), last) for p in paths), np.int64, len(paths))
