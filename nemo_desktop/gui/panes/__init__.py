"""The panes, in tab order. Each `panes/<name>/plugin.py` exposes `PANE`, a `Pane` subclass."""
from __future__ import annotations

import importlib

from .base import Pane, PaneHost

PANE_NAMES = ("model_manager", "dataset_browser", "workbench", "analyses", "report_exporter")


def pane_classes() -> list[type[Pane]]:
    return [importlib.import_module(f"{__name__}.{name}.plugin").PANE for name in PANE_NAMES]


__all__ = ["PANE_NAMES", "Pane", "PaneHost", "pane_classes"]
