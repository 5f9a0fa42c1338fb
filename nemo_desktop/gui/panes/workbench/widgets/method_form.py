"""A form for a method's settings, built from its config dataclass (so baselines get theirs for free).

Numbers, flags and an optional size are editable; for optional fields the lowest value of the spin box
reads "default" and means None (the method or the editor decides). The most used settings are shown,
the rest under "More settings".
"""
from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QFormLayout, QSpinBox, QVBoxLayout, QWidget

from ..run_job import config_fields, field_kind

PRIMARY = ("k", "m", "seed", "edit_steps", "edit_size")
LABELS = {
    "k": ("Observations per set (k)", "Reference images of the true class (Set A) and, as many again, of the "
                                      "predicted class (Set B)"),
    "k_random": ("Random observations", "Set C: random references of other classes (default: k; 0 = the "
                                        "paper's Algorithm 1, true and predicted classes only)"),
    "m": ("Hypotheses (m)", "Candidate explanations generated and each tested by a counterfactual"),
    "seed": ("Seed", "Seed of sampling, retrieval and image edits: the same seed gives the same result"),
    "edit_steps": ("Editor steps", "Diffusion steps of the image editor (default: the editor's own)"),
    "edit_size": ("Editor resolution", "Size the image is edited at (default: the editor's preferred working "
                                       "resolution, aspect ratio kept; the result is resized back to the image's "
                                       "size)"),
    "edit_guidance": ("Editor guidance", "Guidance scale of the image editor (default: the editor's own)"),
    "class_relevance": ("Class-relevant observations", "Off: retrieve by similarity only (the paper's Table 5 "
                                                       "ablation)"),
    "sampling_temperature": ("Sampling temperature", "For hypotheses 2..m (the first is greedy)"),
}
INT_MAX = 1_000_000


class MethodForm(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.editors: dict[str, tuple[str, QWidget]] = {}
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._groups: list[QWidget] = []

    def set_config(self, config_cls, overrides: dict[str, Any] | None = None) -> None:
        for g in self._groups:
            g.setParent(None)
            g.deleteLater()
        self._groups, self.editors = [], {}
        primary, more = QFormLayout(), QFormLayout()
        for name, default, annotation in config_fields(config_cls):
            kind = field_kind(annotation)
            if kind is None:
                continue
            value = (overrides or {}).get(name, default)
            editor = self._editor(kind, value)
            label, tip = LABELS.get(name, (name.replace("_", " ").capitalize(), ""))
            editor.setToolTip(tip)
            editor.setObjectName(f"setting_{name}")
            (primary if name in PRIMARY else more).addRow(label + ":", editor)
            self.editors[name] = (kind, editor)
        main = QWidget()
        main.setLayout(primary)
        self._layout.addWidget(main)
        self._groups.append(main)
        if more.rowCount():
            toggle = QCheckBox("More settings")
            toggle.setObjectName("moreSettings")
            inner = QWidget()
            inner.setLayout(more)
            inner.setVisible(False)
            toggle.toggled.connect(inner.setVisible)
            self._layout.addWidget(toggle)
            self._layout.addWidget(inner)
            self._groups += [toggle, inner]

    @staticmethod
    def _editor(kind: str, value: Any) -> QWidget:
        base, optional = kind.rstrip("?"), kind.endswith("?")
        if base == "bool":
            w = QCheckBox()
            w.setChecked(bool(value))
            return w
        if base == "float":
            w = QDoubleSpinBox()
            w.setRange(-1.0 if optional else -1e6, 1e6)
            w.setDecimals(2)
            w.setSingleStep(0.1)
            if optional:
                w.setMinimum(0.0)
                w.setSpecialValueText("default")
            w.setValue(0.0 if value is None else float(value))
            return w
        w = QSpinBox()
        if base == "size":
            w.setRange(0, 4096)
            w.setSingleStep(64)
            w.setSuffix(" px")
            value = None if value is None else int(value[0])
        else:
            w.setRange(0, INT_MAX)
        if optional:
            w.setSpecialValueText("default")
        w.setValue(0 if value is None else int(value))
        return w

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, (kind, w) in self.editors.items():
            base, optional = kind.rstrip("?"), kind.endswith("?")
            if base == "bool":
                out[name] = w.isChecked()
                continue
            v = w.value()
            if optional and v == w.minimum():
                out[name] = None
            elif base == "size":
                out[name] = (int(v), int(v))
            else:
                out[name] = v
        return out

    def set_value(self, name: str, value: Any) -> None:
        kind, w = self.editors[name]
        if kind.startswith("bool"):
            w.setChecked(bool(value))
        elif value is None:
            w.setValue(w.minimum())
        else:
            w.setValue(value[0] if kind.startswith("size") else value)
