"""The guides shown in empty panes: how to open a dataset (Dataset browser) and the steps to a first diagnosis
(Explanation workbench), each step ticked from the session's state by the FirstRun controller."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QFrame, QGridLayout, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QPushButton,
                               QSizePolicy, QVBoxLayout)

PATH_ROLE = Qt.ItemDataRole.UserRole + 1
TODO, DONE = "☐", "☑"
FRAME_STYLE = ("QFrame#{name} {{ background: #f3f6fa; border: 1px solid #c9d3df; border-radius: 6px; }}"
               " QFrame#{name} QLabel {{ color: #1b1b1b; background: transparent; border: none; }}")

DEMO_NOTE = ("<b>Try the demo</b> writes 360 real handwritten digits (one folder per class) and trains a tiny "
             "real classifier on 1,437 other digits, on this computer, in seconds. To explain its mistakes you "
             "still need a real multimodal LLM and a real image editor: the demo does not fake them. "
             "<a href='model_manager'>Choose them in the Model manager</a>.")


class _Guide(QFrame):
    sig_try_demo = Signal()
    sig_show_pane = Signal(str)

    def __init__(self, name: str, parent=None):
        super().__init__(parent)
        self.setObjectName(name)
        self.setStyleSheet(FRAME_STYLE.format(name=name))
        # Never widen the window: the guide's labels wrap to whatever width the pane has.
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.demo_button = QPushButton("Try the demo")
        self.demo_button.setObjectName("tryDemoButton")
        self.demo_button.setToolTip("Write a small digits dataset and train a small classifier (offline, seconds)")
        self.demo_button.clicked.connect(self.sig_try_demo)
        self.demo_note = QLabel(DEMO_NOTE)
        self.demo_note.setObjectName("demoNote")
        self.demo_note.setWordWrap(True)
        self.demo_note.setTextFormat(Qt.TextFormat.RichText)
        self.demo_note.linkActivated.connect(self.sig_show_pane)
        self.demo_status = QLabel("")
        self.demo_status.setObjectName("demoStatus")
        self.demo_status.setWordWrap(True)
        self.demo_status.hide()

    def set_demo_status(self, text: str, busy: bool) -> None:
        self.demo_status.setText(text)
        self.demo_status.setVisible(bool(text))
        self.demo_button.setEnabled(not busy)


class DatasetGuide(_Guide):
    """'Open a folder or drop images here', with buttons, the recent datasets and the demo."""

    sig_open_folder = Signal()
    sig_open_csv = Signal()
    sig_open_recent = Signal(str)

    def __init__(self, parent=None):
        super().__init__("datasetGuide", parent)
        title = QLabel("<h3>Open a folder or drop images here</h3>")
        title.setWordWrap(True)
        text = QLabel("A dataset is a folder with one sub-folder per class (the sub-folder names are the class "
                      "names), or a CSV manifest of <code>path,label</code> rows. Images dropped on the window are "
                      "diagnosed directly.")
        text.setWordWrap(True)
        self.open_folder_button = QPushButton("Open folder…")
        self.open_folder_button.setObjectName("guideOpenFolder")
        self.open_folder_button.clicked.connect(self.sig_open_folder)
        self.open_csv_button = QPushButton("Open CSV manifest…")
        self.open_csv_button.clicked.connect(self.sig_open_csv)
        buttons = QHBoxLayout()
        for b in (self.open_folder_button, self.open_csv_button, self.demo_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        self.recent_title = QLabel("<b>Recent datasets</b>")
        self.recent_list = QListWidget()
        self.recent_list.setObjectName("recentDatasets")
        self.recent_list.setMaximumHeight(120)
        self.recent_list.setToolTip("Click to open again")
        self.recent_list.itemClicked.connect(lambda item: self.sig_open_recent.emit(item.data(PATH_ROLE)))
        self.recent_list.itemActivated.connect(lambda item: self.sig_open_recent.emit(item.data(PATH_ROLE)))
        v = QVBoxLayout(self)
        for w in (title, text):
            v.addWidget(w)
        v.addLayout(buttons)
        v.addWidget(self.demo_note)
        v.addWidget(self.demo_status)
        v.addWidget(self.recent_title)
        v.addWidget(self.recent_list)
        self.set_recent([])

    def set_recent(self, paths: list[str]) -> None:
        self.recent_list.clear()
        for p in paths:
            item = QListWidgetItem(f"{Path(p).name} — {p}")
            item.setData(PATH_ROLE, p)
            item.setToolTip(p)
            self.recent_list.addItem(item)
        self.recent_title.setVisible(bool(paths))
        self.recent_list.setVisible(bool(paths))


STEPS = (
    ("classifier", "Load a classifier", "Model manager", "model_manager"),
    ("dataset", "Open a dataset and index it with the classifier", "Dataset browser", "dataset_browser"),
    ("sample", "Pick a misclassified image (Dataset browser ▸ Show: Misclassified ▸ Explain in the workbench)",
     None, None),
    ("diagnose", "Diagnose: press “Run on the samples” (needs a multimodal LLM and an image editor)", None, None),
)


class WorkbenchGuide(_Guide):
    """The four steps to a first diagnosis; each ticks when the session says it is done."""

    def __init__(self, parent=None, name: str = "workbenchGuide", demo_row: bool = True):
        super().__init__(name, parent)
        title = QLabel("<h3>Get started: four steps to a first diagnosis</h3>")
        title.setWordWrap(True)
        grid = QGridLayout()
        self.marks: dict[str, QLabel] = {}
        self.texts: dict[str, QLabel] = {}
        for row, (key, text, button_text, pane) in enumerate(STEPS):
            mark = QLabel(TODO)
            mark.setObjectName(f"step_{key}_mark")
            label = QLabel(f"{row + 1}. {text}")
            label.setWordWrap(True)
            self.marks[key], self.texts[key] = mark, label
            grid.addWidget(mark, row, 0, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(label, row, 1)
            if button_text:
                b = QPushButton(button_text)
                b.clicked.connect(lambda _c=False, p=pane: self.sig_show_pane.emit(p))
                grid.addWidget(b, row, 2, Qt.AlignmentFlag.AlignTop)
        grid.setColumnStretch(1, 1)
        self.note = QLabel("")
        self.note.setObjectName("restoreNote")
        self.note.setWordWrap(True)
        self.note.hide()
        demo = QHBoxLayout()
        if demo_row:
            demo.addWidget(self.demo_button)
        demo.addStretch(1)
        v = QVBoxLayout(self)
        v.addWidget(title)
        v.addLayout(grid)
        v.addWidget(self.note)
        if demo_row:  # the welcome page puts the demo button at its top instead
            v.addLayout(demo)
        v.addWidget(self.demo_note)
        v.addWidget(self.demo_status)

    def set_steps(self, done: dict[str, bool]) -> None:
        for key, mark in self.marks.items():
            ticked = bool(done.get(key))
            mark.setText(DONE if ticked else TODO)
            mark.setToolTip("done" if ticked else "to do")
            self.texts[key].setEnabled(not ticked)

    def done_steps(self) -> list[str]:
        return [k for k, m in self.marks.items() if m.text() == DONE]

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))


INTRO = ("NEMO Desktop explains why an image classifier got an image wrong and tests each explanation with a "
         "counterfactual image. ")
INTRO_EMPTY = INTRO + ("Nothing is on this computer yet: start with the offline demo, or bring your own dataset "
                       "and models.")
INTRO_SOMETHING = INTRO + ("A classifier or a dataset is ready on this computer: go on with the steps below, try the "
                           "Analyses pane, or bring your own dataset and models.")


class WelcomePage(QFrame):
    """The page a first launch opens on (no models, no datasets yet): what the app does, the checklist to a first
    diagnosis, and "Try the demo" as the main action; the other ways in are secondary buttons."""

    sig_try_demo = Signal()
    sig_show_pane = Signal(str)
    sig_open_dataset = Signal()
    sig_continue = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("welcomePage")
        title = QLabel("<h2>Welcome to NEMO Desktop</h2>")
        intro = QLabel(INTRO_EMPTY)
        intro.setObjectName("welcomeIntro")
        intro.setWordWrap(True)
        self.intro = intro
        self.guide = WorkbenchGuide(name="welcomeGuide", demo_row=False)
        self.guide.sig_try_demo.connect(self.sig_try_demo)
        self.guide.sig_show_pane.connect(self.sig_show_pane)
        self.demo_button = self.guide.demo_button  # the main action: first, large, the default button
        self.demo_button.setDefault(True)
        self.demo_button.setMinimumHeight(40)
        self.demo_button.setStyleSheet("QPushButton { font-weight: bold; padding: 6px 18px; }")
        self.open_button = QPushButton("Open a dataset…")
        self.open_button.setObjectName("welcomeOpenDataset")
        self.open_button.clicked.connect(self.sig_open_dataset)
        self.models_button = QPushButton("Model manager")
        self.models_button.clicked.connect(lambda: self.sig_show_pane.emit("model_manager"))
        self.continue_button = QPushButton("Go to the app")
        self.continue_button.setObjectName("welcomeContinue")
        self.continue_button.clicked.connect(self.sig_continue)
        # The demo button leads: move it from the guide's bottom row to the top of the page.
        actions = QHBoxLayout()
        actions.addWidget(self.demo_button)
        for b in (self.open_button, self.models_button, self.continue_button):
            actions.addWidget(b)
        actions.addStretch(1)
        self.next_step = QLabel("")
        self.next_step.setObjectName("welcomeNextStep")
        self.next_step.setWordWrap(True)
        self.next_step.setTextFormat(Qt.TextFormat.RichText)
        self.next_step.linkActivated.connect(self.sig_show_pane)
        self.next_step.hide()
        column = QVBoxLayout()
        column.addWidget(title)
        column.addWidget(intro)
        column.addLayout(actions)
        column.addWidget(self.next_step)
        column.addWidget(self.guide)
        column.addStretch(1)
        outer = QHBoxLayout(self)
        outer.addStretch(1)
        outer.addLayout(column, 6)
        outer.addStretch(1)

    def set_next_step(self, html: str) -> None:
        self.next_step.setText(html)
        self.next_step.setVisible(bool(html))

    def set_something_here(self, something: bool) -> None:
        """Whether a model or a dataset is on this computer (the demo's included): the intro says so."""
        self.intro.setText(INTRO_SOMETHING if something else INTRO_EMPTY)


class NextStepBar(QFrame):
    """After the demo, above the dataset it opened: the next step, and which MLLM and editor a real diagnosis
    needs (and whether they are on this computer). Closed with its × button."""

    sig_show_pane = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("nextStepBar")
        self.setStyleSheet(FRAME_STYLE.format(name="nextStepBar"))
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Maximum)
        self.text = QLabel("")
        self.text.setObjectName("nextStepText")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.linkActivated.connect(self.sig_show_pane)
        close = QPushButton("×")
        close.setObjectName("nextStepClose")
        close.setToolTip("Hide this note")
        close.setFlat(True)
        close.setFixedWidth(28)
        close.clicked.connect(self.hide)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 4, 4)
        row.addWidget(self.text, 1)
        row.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def set_text(self, html: str) -> None:
        self.text.setText(html)
        self.setVisible(bool(html))


def next_step_html(setup, needs: list[tuple[str, str | None, str]]) -> str:
    """The sentence shown after the demo: what it made, the next step, and the models a real diagnosis needs.
    `needs`: (kind, catalog id or None, status on this computer) of the multimodal LLM and the editor."""
    words = {"mllm": "a multimodal LLM", "editor": "an image editor"}
    parts = []
    for kind, ref, status in needs:
        if ref is None:
            parts.append(f"{words.get(kind, kind)} (none in the catalog)")
        else:
            where = "on this computer" if status in ("downloaded", "loaded", "in memory") else status
            parts.append(f"{words.get(kind, kind)}, <b>{ref}</b> ({where})")
    missing = any(status not in ("downloaded", "loaded", "in memory") for _k, _r, status in needs)
    made = (f"Demo ready: {setup.images} digits and the classifier <b>{setup.classifier_id}</b> "
            f"({100 * setup.holdout_accuracy:.1f}% on held-out digits). ")
    step = ("<b>Next step:</b> in the Dataset browser choose Show ▸ Misclassified, select a digit and “Explain in "
            "the workbench”. ")
    models = ("A real diagnosis also needs " + " and ".join(parts) + ("; download them in the "
              "<a href='model_manager'>Model manager</a>." if missing else "."))
    return made + step + models
