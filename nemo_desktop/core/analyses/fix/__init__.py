"""The fix loop (issue 29): explain -> try a fix -> measure it on the affected images and on everything else ->
keep it or not. Qt-free core: targeted data (data.py), training modes with early stopping and resumable
checkpoints (training.py), paired before/after figures and the regression guard (measure.py), the fixed model as
a user-catalog entry with its lineage (saving.py), the registry entry (pipeline.py)."""
from .config import AUGMENTATIONS, DATA, MODES, FixConfig
from .data import FixData
from .result import FixResult

__all__ = ["AUGMENTATIONS", "DATA", "MODES", "FixConfig", "FixData", "FixResult"]
