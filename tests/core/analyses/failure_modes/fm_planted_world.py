"""PlantedFactors: a constructed joint space whose images and sentences are sums of known factor directions
(test code, never shipped; an honest analogue of tests/core/methods/baseline_doubles.PlantedSpace).

D = 32 orthonormal directions, one per factor value plus an "image" and a "text" offset (a modality gap:
image-sentence cosines are small, as in CLIP). Image = 1.0*object + 0.8*condition + 0.8*place +
1.5*image offset + 0.35*noise. Sentence = the sum of its keywords' directions + 1.5*text offset. Which
images the model gets wrong is planted by the test, so the method's answer is known in advance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OBJECTS = ("dog", "cat", "car")
PLACES = ("beach", "street")
CONDITIONS = ("day", "night", "fog")
_FACTORS = [*OBJECTS, *PLACES, *CONDITIONS, "<image>", "<text>"]

SENTENCES = ([("a photo of a " + o, {"object": o}) for o in OBJECTS]
             + [("taken at " + c if c != "fog" else "taken in fog", {"condition": c}) for c in CONDITIONS]
             + [("taken on a " + p, {"place": p}) for p in PLACES]
             + [(f"a {o} on a {p}", {"object": o, "place": p}) for o in OBJECTS for p in PLACES])


@dataclass
class PlantedWorld:
    features: np.ndarray  # (M, D) unit image embeddings
    attrs: list[dict]  # per image: object, place, condition
    sentence_emb: np.ndarray  # (N, D) unit
    texts: list[str]
    requires: list[dict]

    def relevance(self) -> np.ndarray:
        return np.array([[all(a[k] == v for k, v in req.items()) for req in self.requires] for a in self.attrs])

    def where(self, **kw) -> np.ndarray:
        return np.array([all(a[k] == v for k, v in kw.items()) for a in self.attrs])


def build(n: int = 1200, seed: int = 0, noise: float = 0.35) -> PlantedWorld:
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((32, 32)))[0]  # orthonormal columns
    direction = {f: basis[:, i] for i, f in enumerate(_FACTORS)}
    attrs, feats = [], []
    for _ in range(n):
        a = {"object": OBJECTS[rng.integers(3)], "place": PLACES[rng.integers(2)],
             "condition": CONDITIONS[rng.integers(3)]}
        v = (1.0 * direction[a["object"]] + 0.8 * direction[a["condition"]] + 0.8 * direction[a["place"]]
             + 1.5 * direction["<image>"] + noise * rng.standard_normal(32))
        attrs.append(a)
        feats.append(v / np.linalg.norm(v))
    texts, requires, sent = [], [], []
    for text, req in SENTENCES:
        v = sum(direction[val] for val in req.values()) + 1.5 * direction["<text>"]
        texts.append(text)
        requires.append(req)
        sent.append(v / np.linalg.norm(v))
    return PlantedWorld(np.array(feats, np.float32), attrs, np.array(sent, np.float32), texts, requires)
