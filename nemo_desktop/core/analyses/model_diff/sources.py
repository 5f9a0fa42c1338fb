"""Condition sources by name, as the CLI and the app offer them:

    digits             the coloured, rotated digits of the shipped CMNIST grid (background colour, 28 px)
    digits-ink         the same grid with coloured strokes on black
    dataset:FILE.csv   the user's labelled images with attribute columns (attribute_dataset.py)
    t2i:MODEL          a text-to-image model over the shipped open conditions (gender captions), or
    t2i:MODEL@FILE     over the user's own conditions file (conditions.load_open_conditions' format)

A T2I model is loaded by the caller (with its device, dtype and offload options) through `load_t2i(model)`.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...base.errors import ConfigError

SOURCES = ("digits", "digits-ink", "dataset:FILE.csv", "t2i:MODEL[@FILE]")


def open_condition_source(ref: str, load_t2i: Callable[[str], Any] | None = None, **digits_options: Any) -> Any:
    ref = (ref or "").strip()
    if ref in ("digits", "digits-ink"):
        from .synthetic_digits import SyntheticDigits

        return SyntheticDigits(colour_target="ink" if ref == "digits-ink" else "background", **digits_options)
    kind, sep, rest = ref.partition(":")
    if sep and kind == "dataset" and rest:
        from .attribute_dataset import AttributeDataset

        return AttributeDataset(rest)
    if sep and kind == "t2i" and rest:
        from .text_to_image import TextToImageConditions, load_condition_file

        if load_t2i is None:
            raise ConfigError("Text-to-image conditions need a generator model loaded by the caller.")
        model, _, conditions_file = rest.partition("@")
        space = load_condition_file(Path(conditions_file)) if conditions_file else None
        return TextToImageConditions(load_t2i(model), space=space)
    raise ConfigError(f"Unknown condition source '{ref}'.", hint=f"Use one of: {', '.join(SOURCES)}.")
