"""A form for an analysis' settings, built from its config dataclass (core/registry/params.py: labels, help,
ranges and choices come from the config's field metadata), so every registered analysis gets its form for free.

Numbers, flags, choices, several names of a list (check boxes: at least one), text and an optional size are
editable; for optional fields the lowest value of the spin box
reads "default" and means None (the method or the editor decides). The most used settings are shown,
the rest under "More settings".
"""
from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QAbstractSpinBox, QCheckBox, QComboBox, QFormLayout, QLineEdit, QVBoxLayout,
                               QWidget)

from nemo_desktop.core.registry.params import ParamInfo, config_params

from ....widgets.multi_choice import MultiChoiceEditor
from ....widgets.wheel_guard import GuardedComboBox, GuardedDoubleSpinBox, GuardedSpinBox

PRIMARY = ("k", "m", "seed", "edit_steps", "edit_size")
INT_MAX = 1_000_000


MIN_FIELD_WIDTH = 120  # no settings field narrower than this (issue 28: fields ~50 px wide at 1200 px)


class MethodForm(QWidget):
    sig_changed = Signal()  # the user changed a setting (not emitted while the form is built)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._editors: dict[str, tuple[str, QWidget]] = {}
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._groups: list[QWidget] = []
        # The "More settings" rows are built when first shown or read: a method's form has ~20 of them, and
        # building them all took ~7 ms of the GUI thread in the turn a diagnosis run starts.
        self._more_pending: list[tuple[ParamInfo, Any]] = []
        self._more_layout: QFormLayout | None = None

    @property
    def editors(self) -> dict[str, tuple[str, QWidget]]:
        """Every setting's (kind, editor), the "More settings" ones built now if they were not yet."""
        self._build_more()
        return self._editors

    def set_config(self, config_cls, overrides: dict[str, Any] | None = None) -> None:
        for g in self._groups:
            g.setParent(None)
            g.deleteLater()
        self._groups, self._editors, self._more_pending = [], {}, []
        primary, self._more_layout = QFormLayout(), QFormLayout()
        for form in (primary, self._more_layout):  # a narrow column puts a field under its label, never squeezes it
            form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
            form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        for param in config_params(config_cls) if config_cls is not None else []:
            kind, name = param.form_kind, param.name
            if kind is None or kind.startswith("paths"):
                continue
            value = (overrides or {}).get(name, param.default)
            if name in PRIMARY:
                self._add_row(primary, param, value)
            else:
                self._more_pending.append((param, value))
        main = QWidget()
        main.setLayout(primary)
        main.setVisible(primary.rowCount() > 0)  # an empty box above "More settings" (competency-score) says nothing
        self._layout.addWidget(main)
        self._groups.append(main)
        if self._more_pending:
            toggle = QCheckBox("More settings")
            toggle.setObjectName("moreSettings")
            inner = QWidget()
            inner.setLayout(self._more_layout)
            inner.setVisible(False)
            toggle.toggled.connect(lambda on: (self._build_more(), inner.setVisible(on)))
            self._layout.addWidget(toggle)
            self._layout.addWidget(inner)
            self._groups += [toggle, inner]

    def _add_row(self, layout: QFormLayout, param: ParamInfo, value: Any) -> None:
        editor = self._editor(param.form_kind, value, param)
        editor.setToolTip(param.help)
        editor.setObjectName(f"setting_{param.name}")
        if not isinstance(editor, QCheckBox):
            editor.setMinimumWidth(MIN_FIELD_WIDTH)
        layout.addRow(param.label + ":", editor)
        self._editors[param.name] = (param.form_kind, editor)
        self._watch(editor)

    def _watch(self, editor: QWidget) -> None:
        """sig_changed when `editor`'s value changes (connected after its value was set: building is silent)."""
        changed = self.sig_changed.emit
        if isinstance(editor, MultiChoiceEditor):
            editor.sig_changed.connect(lambda _names: changed())
        elif isinstance(editor, QCheckBox):
            editor.toggled.connect(lambda _on: changed())
        elif isinstance(editor, QComboBox):
            editor.currentIndexChanged.connect(lambda _i: changed())
        elif isinstance(editor, QLineEdit):
            editor.textChanged.connect(lambda _t: changed())
        elif isinstance(editor, QAbstractSpinBox):
            editor.valueChanged.connect(lambda _v: changed())

    def _build_more(self) -> None:
        pending, self._more_pending = self._more_pending, []
        for param, value in pending:
            self._add_row(self._more_layout, param, value)

    @staticmethod
    def _editor(kind: str, value: Any, param: ParamInfo | None = None) -> QWidget:
        base, optional = kind.rstrip("?"), kind.endswith("?")
        lo = param.minimum if param is not None else None
        hi = param.maximum if param is not None else None
        if base == "bool":
            w = QCheckBox()
            w.setChecked(bool(value))
            return w
        if base == "choices":
            return MultiChoiceEditor(param.choices or (), () if value is None else value)
        if base == "choice":  # guarded: the wheel scrolls the form, it does not change the setting under it
            w = GuardedComboBox()
            if optional:
                w.addItem("default", None)
            for c in param.choices or ():
                w.addItem(str(c), c)
            w.setCurrentIndex(max(0, w.findData(value)))
            return w
        if base == "str":
            w = QLineEdit("" if value is None else str(value))
            w.setPlaceholderText("default" if optional else "")
            return w
        if base == "float":
            w = GuardedDoubleSpinBox()
            # Enough decimals for the default and the minimum (a learning rate of 1e-3 must not show as 0.00);
            # set before the range, which Qt rounds to the decimals.
            small = [abs(float(x)) for x in (value, lo) if x and 0 < abs(float(x)) < 1]
            decimals = max([2] + [min(10, 1 - math.floor(math.log10(x))) for x in small])
            w.setDecimals(decimals)
            w.setRange(-1.0 if optional else (-1e6 if lo is None else float(lo)), 1e6 if hi is None else float(hi))
            w.setSingleStep(0.1 if decimals == 2 else 10.0 ** (2 - decimals))
            if optional:
                w.setMinimum(0.0)
                w.setSpecialValueText("default")
            w.setValue(0.0 if value is None else float(value))
            return w
        w = GuardedSpinBox()
        if base == "size":
            w.setRange(0, 4096)
            w.setSingleStep(64)
            w.setSuffix(" px")
            value = None if value is None else int(value[0])
        else:
            w.setRange(0 if lo is None else int(lo) - (1 if optional and lo else 0), INT_MAX if hi is None else int(hi))
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
            if base == "choice":
                out[name] = w.currentData()
                continue
            if base == "choices":  # empty when none is checked: the config refuses it, naming the setting
                out[name] = w.chosen()
                continue
            if base == "str":
                out[name] = w.text().strip() or (None if optional else "")
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
        elif kind.startswith("choices"):
            w.set_chosen(value)  # unknown names raise ValueError
        elif kind.startswith("choice"):
            w.setCurrentIndex(max(0, w.findData(value)))
        elif kind.startswith("str"):
            w.setText("" if value is None else str(value))
        elif value is None:
            w.setValue(w.minimum())
        else:
            w.setValue(value[0] if kind.startswith("size") else value)
