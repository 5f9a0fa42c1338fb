"""The coloured-digits world for model-difference tests (test code, never shipped; shared by the analysis,
contract and CLI tests).

Two small CNNs are trained here, in seconds on the CPU, on digits drawn by the product's own renderer
(`SyntheticDigits`' `train` glyph pool) with a planted colour bias, exactly like the seed's CMNIST models:
  * paper world: A sees digits 0-4 only on red, 5-9 on every colour; B sees 0-4 on every colour, 5-9 only on
    blue. A's accuracy drops on non-red 0-4, B's on non-blue 5-9; angle is irrelevant.
  * split world (the team note's): A sees digits 0-4 only on five of the ten colours; B sees everything.
    Here a digit-only explanation is clearly worse than the digit-and-colour one.
`require_bias` makes a fixture fail loudly when a planted bias was not learnt.
"""
from __future__ import annotations

import numpy as np

from nemo_desktop.core.analyses.model_diff import Condition, SyntheticDigits, load_grid
# The product's demo CNN and its training (the seed's biased models) serve the tests too.
from nemo_desktop.core.analyses.model_diff.demo import DigitCNNClassifier as CNNClassifier  # noqa: F401
from nemo_desktop.core.analyses.model_diff.demo import train_cnn  # noqa: F401

SIDE = 16
COLOURS = ("red", "green", "blue", "yellow", "magenta", "cyan", "orange", "pink", "purple", "grey")
SPLIT_SEEN = ("red", "green", "blue", "yellow", "magenta")
CLASS_NAMES = [str(d) for d in range(10)]


def paper_bias(model: str) -> dict[int, tuple[str, ...]]:
    if model == "A":
        return {d: ("red",) if d < 5 else COLOURS for d in range(10)}
    return {d: COLOURS if d < 5 else ("blue",) for d in range(10)}


def split_bias(model: str) -> dict[int, tuple[str, ...]]:
    if model == "A":
        return {d: SPLIT_SEEN if d < 5 else COLOURS for d in range(10)}
    return {d: COLOURS for d in range(10)}


def generator():
    return SyntheticDigits(size=SIDE)


def accuracy(clf, digit: int, colour: str, m: int = 40) -> float:
    gen = generator()
    cond = gen.space.make({"digit": digit, "color": colour, "angle": 0})
    pairs = gen.sample(cond, m, seed=123)
    pred = clf.predict_proba([p[0] for p in pairs]).argmax(1)
    return float(np.mean(pred == digit))


def require_bias(clf, low: list[tuple[int, str]], high: list[tuple[int, str]]):
    import pytest

    lows = [accuracy(clf, d, c) for d, c in low]
    highs = [accuracy(clf, d, c) for d, c in high]
    if max(lows) > 0.5 or min(highs) < 0.7:
        pytest.fail(f"{clf.info.model_id}: planted bias not learnt (biased cells {lows}, normal cells {highs})")


def condition(digit: int, colour: str, angle: int = 0) -> Condition:
    return load_grid().make({"digit": digit, "color": colour, "angle": angle})
