"""The reference index as the explanation methods use it (SciTX's survey, ChangeMLLM's reference image).

The reference is duck-typed: a `ReferenceIndex`, or any object with its attributes (`classifier_id`,
`classifier_revision`, `class_names`, `index_id`, `fingerprint`, `dataset_root`). The query's embedding is
one cached unit ("embedding") shared by every method that retrieves with the same classifier.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ..base.errors import ConfigError
from .intervention import UnitCache, jsonable, unit_key
from ..base.records import Observation


def check_reference(reference: Any, classifier: Any) -> None:
    """Retrieval compares embeddings, so the index must come from this very classifier."""
    if reference is None:
        return
    info = classifier.info
    ref_id, ref_rev = getattr(reference, "classifier_id", None), getattr(reference, "classifier_revision", None)
    same_model = ref_id is None or (ref_id == info.model_id and
                                    (ref_rev is None or info.revision is None or ref_rev == info.revision))
    names = getattr(reference, "class_names", None)
    if not same_model or (names is not None and list(names) != list(classifier.class_names)):
        raise ConfigError(f"The reference index {getattr(reference, 'index_id', '')} was built with "
                          f"{ref_id or 'another classifier'}, not with {info.model_id}.",
                          hint="Index the reference dataset with the classifier being explained "
                               "(`nemo index DATASET --classifier ID`), or pass the dataset itself.")


def reference_part(reference: Any) -> dict[str, Any] | None:
    """The reference index in cache keys: its id and a fingerprint of its rows."""
    if reference is None:
        return None
    fp = getattr(reference, "fingerprint", None)
    if callable(fp):
        fp = fp()
    if fp is None:  # the index's write counter changes whenever its rows do
        fp = {"version": (getattr(reference, "meta", None) or {}).get("version"), "entries": len(reference)}
    return {"index_id": getattr(reference, "index_id", None), "fingerprint": jsonable(fp)}


def embed_query(units: UnitCache, classifier: Any, img: Image.Image, image_sha: str, clf: dict) -> np.ndarray:
    """The query image's embedding in the classifier's feature space: normally stored by the classification of
    the query (one forward pass, `classify_query(..., with_embedding=True)`); computed here only when a
    stored classification from an earlier run came without it."""
    key = unit_key("embedding", image_sha256=image_sha, classifier=clf)
    hit = units.get(key)
    if hit is not None:
        return np.asarray(hit.load_array("embedding"), dtype=np.float32)
    emb = np.asarray(classifier.embed([img]), dtype=np.float32).reshape(1, -1)[0]
    store_query_embedding(units, emb, image_sha, clf)
    return emb


def store_query_embedding(units: UnitCache, emb: np.ndarray, image_sha: str, clf: dict) -> None:
    emb = np.asarray(emb, dtype=np.float32).reshape(-1)
    key = unit_key("embedding", image_sha256=image_sha, classifier=clf)
    units.put(key, "embedding", {"image_sha256": image_sha, "classifier": clf, "dim": int(emb.shape[0])},
              {"embedding": emb})


def load_reference_image(reference: Any, obs: Observation) -> Image.Image:
    """The image of an observation; relative paths are relative to the indexed dataset's root."""
    from ..base.images import load_image

    path = Path(obs.image_path)
    root = getattr(reference, "dataset_root", None)
    if not path.is_absolute() and root:
        path = Path(root) / path
    return load_image(path)
