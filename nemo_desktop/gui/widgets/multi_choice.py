"""Several names from a fixed list (the explainers or generators to run): one check box per choice, in the
choices' order. At least one must stay chosen: with none, the editor says so in red and `chosen()` is empty, which
the config then refuses with a message naming the setting. Plain check boxes rather than a QListWidget: they do
not take the wheel, so the settings form around them scrolls as usual."""
from __future__ import annotations

from typing import Iterable, Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

PER_ROW = 3  # check boxes per row: short names (tops, pdiff, ...) fit three across a settings column


class MultiChoiceEditor(QWidget):
    sig_changed = Signal(tuple)  # the chosen names, in the choices' order

    def __init__(self, choices: Sequence[str], chosen: Iterable[str] = (), parent: QWidget | None = None):
        super().__init__(parent)
        if not choices:
            raise ValueError("a multiple-choice setting needs at least one choice")
        self.choices = tuple(str(c) for c in choices)
        self.boxes: dict[str, QCheckBox] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row: QHBoxLayout | None = None
        for i, name in enumerate(self.choices):
            if i % PER_ROW == 0:
                row = QHBoxLayout()
                layout.addLayout(row)
            box = QCheckBox(name)
            box.setObjectName(f"choice_{name}")
            box.toggled.connect(lambda _on: self._changed())
            row.addWidget(box)
            self.boxes[name] = box
        row.addStretch(1)
        self.warning = QLabel("Choose at least one.")
        self.warning.setObjectName("multiChoiceWarning")
        self.warning.setStyleSheet("QLabel { color: #b3261e; }")
        layout.addWidget(self.warning)
        self.set_chosen(chosen)

    def chosen(self) -> tuple[str, ...]:
        return tuple(c for c in self.choices if self.boxes[c].isChecked())

    def set_chosen(self, names: Iterable[str] | str | None) -> None:
        """Check exactly `names` (a tuple, or "a,b" as a file or the CLI writes it); unknown names are refused,
        naming them, and nothing changes."""
        if names is None:
            names = ()
        elif isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        names = list(names)
        unknown = [n for n in names if n not in self.boxes]
        if unknown:
            raise ValueError(f"unknown choice(s) {', '.join(map(str, unknown))}; choose from {', '.join(self.choices)}")
        for name, box in self.boxes.items():
            box.blockSignals(True)
            box.setChecked(name in names)
            box.blockSignals(False)
        self._changed()

    def _changed(self) -> None:
        chosen = self.chosen()
        self.warning.setVisible(not chosen)
        self.sig_changed.emit(chosen)

    def setToolTip(self, text: str) -> None:  # noqa: N802 - Qt's name; each box shows the setting's help
        super().setToolTip(text)
        for box in self.boxes.values():
            box.setToolTip(text)
