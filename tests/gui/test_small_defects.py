"""Small defects of issue 19, one test each."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QScrollArea, QSpinBox

pytestmark = pytest.mark.gui


def wheel(widget, steps: int = -3) -> None:
    pos = QPointF(widget.rect().center())
    event = QWheelEvent(pos, QPointF(widget.mapToGlobal(pos.toPoint())), QPoint(0, 0), QPoint(0, 120 * steps),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_wheel_over_settings_scrolls_the_form_and_leaves_values_alone(qtbot):
    from nemo_desktop.core.methods.scitx import SciTXConfig
    from nemo_desktop.gui.panes.workbench.widgets.method_form import MethodForm

    form = MethodForm()
    form.set_config(SciTXConfig)
    area = QScrollArea()
    area.setWidget(form)
    area.setWidgetResizable(True)
    area.resize(300, 120)  # shorter than the form: it scrolls
    qtbot.addWidget(area)
    area.show()
    qtbot.waitExposed(area)
    spin = form.editors["k"][1]
    assert isinstance(spin, QSpinBox) and spin.focusPolicy() == Qt.FocusPolicy.StrongFocus
    before, bar = spin.value(), area.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    wheel(spin)
    assert spin.value() == before  # not focused: the value stays
    assert bar.value() > 0  # the form scrolled instead
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus, timeout=2000)
    wheel(spin, steps=1)
    assert spin.value() != before  # a focused spin box still takes the wheel
