"""The bar above the grid while a failure mode filters it or a sentence orders it: what is shown (the mode's
sentence with its evidence, or the ranking's sentence), "Try a fix…" for a failure mode, and the way back to every
image in dataset order."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget


class FailureModeBar(QWidget):
    sig_cleared = Signal()
    sig_fix = Signal()  # "Try a fix…" for the failure mode shown
    sig_fiftyone = Signal()  # "Open in FiftyOne" on the failure mode's saved view

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = QLabel("")
        self.label.setObjectName("failureModeFilter")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # the sentence quotes text from files or an LLM
        self.label.setStyleSheet("QLabel { background: #eef4fb; border-left: 4px solid #2b6cb0; "
                                 "padding: 4px 8px; color: #1b1b1b; }")
        self.fix_button = QPushButton("Try a fix…")
        self.fix_button.setObjectName("tryFixFromModeBarButton")
        self.fix_button.setToolTip("Fine-tune the classifier with this failure mode's images (their true labels) as "
                                   "targeted data, measure it and keep it only if it helps (the fix page)")
        self.fix_button.clicked.connect(self.sig_fix)
        from ..fiftyone_link import fiftyone_button

        self.fiftyone_button = fiftyone_button(self, "openModeInFiftyOneButton")
        self.fiftyone_button.clicked.connect(self.sig_fiftyone)
        self.clear_button = QPushButton("Show all images")
        self.clear_button.setObjectName("clearFailureModeButton")
        self.clear_button.clicked.connect(self.sig_cleared)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label, 1)
        row.addWidget(self.fix_button)
        row.addWidget(self.fiftyone_button)
        row.addWidget(self.clear_button)
        self.hide()

    def set_mode(self, mode) -> None:
        """`mode`: a failure_modes.members.ModeRef, a failure_modes.by_sentence.SentenceRanking, or None to hide
        the bar."""
        caption = getattr(mode, "caption", None)  # a ranking says what orders the grid
        self.label.setText("" if mode is None else caption or f"{mode.title}. {mode.sentence}")
        self.fix_button.setVisible(mode is not None and caption is None)  # a ranking is no finding to fix
        self.fiftyone_button.setVisible(mode is not None and caption is None)  # nor a saved view
        self.setVisible(mode is not None)
