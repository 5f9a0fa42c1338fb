"""An honest placeholder for a pane whose engine is not part of this build yet: it says what the pane
will show and why it cannot show it now. It never displays invented data."""
from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget


class PlaceholderView(QFrame):
    def __init__(self, title: str, summary: str, planned: list[str], status: str,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("placeholder")
        heading = QLabel(f"<h2>{html.escape(title)}</h2><p>{html.escape(summary)}</p>")
        heading.setWordWrap(True)
        items = "".join(f"<li>{html.escape(p)}</li>" for p in planned)
        plan = QLabel(f"<p><b>What this pane will show</b></p><ul>{items}</ul>")
        plan.setWordWrap(True)
        self.status_label = QLabel(status)
        self.status_label.setObjectName("placeholderStatus")
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.status_label.setFrameShape(QFrame.Shape.StyledPanel)
        self.status_label.setMargin(8)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 16, 24, 16)
        layout.addWidget(heading)
        layout.addWidget(plan)
        layout.addWidget(self.status_label)
        layout.addStretch(1)
