"""The result view: one column per method on the same image, side by side.

A column shows the original image with the prediction and top-5, the selected explanation (highlighted),
the observations grouped as Sets A/B/C with their captions, and every candidate hypothesis with its CEI:
the counterfactual image beside the original with P(true class) before and after, or the rewritten prompt
for zero-shot classifiers. Images are decoded and scaled off the GUI thread (`load_bundles`, a job).
"""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from datetime import datetime

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import (QFrame, QGridLayout, QGroupBox, QHBoxLayout, QLabel, QPushButton, QScrollArea,
                               QSizePolicy, QSplitter, QVBoxLayout, QWidget)

from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.metrics.edit_distance import describe

from ....widgets.compare_view import CompareDialog
from ....widgets.image_viewer import ClickableImage, read_image
from ..run_job import results_for_sample

IMAGE_SIDE = 224  # original and counterfactual images
THUMB_SIDE = 96  # observation thumbnails
SET_ORDER = ("A", "B", "C", "S")


@dataclass
class ResultBundle:
    key: str | None
    created_at: float | None
    result: object  # ExplanationResult
    images: dict[str, QImage] = field(default_factory=dict)  # reduced copies for the column
    paths: dict[str, str] = field(default_factory=dict)  # artifact files, read at full size when zoomed


def _scaled(path, side: int) -> QImage | None:
    image = QImage(str(path))
    if image.isNull():
        return None
    if max(image.width(), image.height()) > side:
        image = image.scaled(side, side, Qt.AspectRatioMode.KeepAspectRatio,
                             Qt.TransformationMode.SmoothTransformation)
    return image


def bundle_from_stored(stored) -> ResultBundle:
    from nemo_desktop.core.base.records import ExplanationResult

    result = ExplanationResult.from_dict(stored.payload)
    result.result_key = stored.key
    images, paths = {}, {}
    for name, path in stored.artifacts.items():
        if str(path).lower().endswith((".png", ".jpg", ".jpeg", ".webp")):
            img = _scaled(path, THUMB_SIDE if name.startswith("obs_") else IMAGE_SIDE)
            if img is not None:
                images[name], paths[name] = img, str(path)
    return ResultBundle(stored.key, stored.created_at, result, images, paths)


def load_bundles(store, key: str, ctx: JobContext) -> list[ResultBundle]:
    """The result `key` and the latest result of each other method on the same image, images included."""
    ctx.progress("Reading the result", 0, None)
    return [bundle_from_stored(s) for s in results_for_sample(store, key)]


def _pct(p: float | None) -> str:
    return "—" if p is None or (isinstance(p, float) and math.isnan(p)) else f"{p:.3f}"


def _cei(v: float | None) -> str:
    return "—" if v is None else f"{v:+.1f}"


_UNBROKEN = re.compile(r"\S{24,}")
ZWSP = "\u200b"


def breakable(text: str, every: int = 12) -> str:
    """Plain text whose long runs without a space (a caption of one 80-letter "word", a path) may wrap: a
    zero-width space every `every` characters of such a run. QLabel wraps at spaces only, so such a run
    widened its column past the window (issue 28)."""
    return _UNBROKEN.sub(lambda m: ZWSP.join(m.group(0)[i:i + every] for i in range(0, len(m.group(0)), every)),
                         text)


def _label(text: str, *, rich: bool = False, wrap: bool = True, name: str | None = None) -> QLabel:
    label = QLabel(text if rich or not wrap else breakable(text))
    label.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if name:
        label.setObjectName(name)
    return label


def _image(bundle: "ResultBundle", name: str | None, side: int, title: str = "Image", caption: str = "") -> QLabel:
    """The artifact `name` in a `side` box; a click opens it zoomable at full resolution."""
    label = ClickableImage(side)
    image = bundle.images.get(name) if name else None
    label.set_image(image, path=bundle.paths.get(name) if name else None, title=title, caption=caption)
    if image is not None:
        label.setObjectName(f"image_{name}")
    return label


def _full_image(bundle: "ResultBundle", name: str | None) -> QImage | None:
    """The artifact at full resolution (the bundle holds reduced copies), or the reduced copy."""
    if not name:
        return None
    path = bundle.paths.get(name)
    full = read_image(path) if path else None
    return full if full is not None else bundle.images.get(name)


class ResultColumn(QScrollArea):
    """One ExplanationResult, top to bottom. Built one section per event-loop turn (`build_step`), so that
    a result with many observations and candidates never freezes the window while it appears."""

    def __init__(self, bundle: ResultBundle, parent: QWidget | None = None):
        super().__init__(parent)
        self.bundle = bundle
        self.setObjectName(f"resultColumn_{bundle.result.method}")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        inner = QWidget()
        self.body = QVBoxLayout(inner)
        r = bundle.result
        self._steps = [lambda: self._header(r), lambda: self._explanation(r)]
        self._steps += [lambda n=n: self._observation_set(r, n) for n in SET_ORDER
                        if any(o.set_name == n for o in r.observations)]
        if r.candidates:
            self._steps.append(lambda: self.body.addWidget(_label(
                "<b>Candidate hypotheses</b>, the selected one first, then by CEI.<br>"
                "CEI = 100 × (P(true | edited) − P(true | original)): how many percentage points removing the "
                "hypothesised cause raised the classifier's probability of the true class. Positive: the "
                "hypothesis names something that pushed the model away from the truth.", rich=True,
                name="ceiExplained")))
        self._steps += [lambda j=j: self._candidate(r, j) for j in r.candidate_order()]
        self._steps += [lambda: self._notes(r), lambda: self.body.addStretch(1)]
        self.setWidget(inner)

    @property
    def built(self) -> bool:
        return not self._steps

    def build_step(self) -> bool:
        """Add the next section; False when the column is complete."""
        if self._steps:
            self._steps.pop(0)()
        return bool(self._steps)

    def _header(self, r) -> None:
        s = r.sample
        when = datetime.fromtimestamp(self.bundle.created_at).strftime("%Y-%m-%d %H:%M") \
            if self.bundle.created_at else ""
        title = _label(f"<h3>{html.escape(r.method)}</h3><span style='color:gray'>{html.escape(when)}</span>",
                       rich=True, name="resultMethod")
        self.body.addWidget(title)
        row = QHBoxLayout()
        name = s.image_path.rsplit('/', 1)[-1] or "image"
        row.addWidget(_image(self.bundle, s.image_artifact or "input", IMAGE_SIDE, f"Input image: {name}",
                             f"True class {s.true_name}, predicted {s.pred_name} (p = {s.prob_pred:.3f})"))
        top5 = "".join(f"<tr><td>{html.escape(c.name)}</td><td align='right'>{c.prob:.3f}</td></tr>"
                       for c in s.top5)
        facts = (f"<b>{html.escape(s.image_path.rsplit('/', 1)[-1] or 'image')}</b><br>"
                 f"True class: <b>{html.escape(s.true_name)}</b> (p = {s.prob_true:.3f})<br>"
                 f"Predicted: <b style='color:#c62828'>{html.escape(s.pred_name)}</b> (p = {s.prob_pred:.3f})"
                 f"<br><br>Top-5:<table>{top5}</table>")
        row.addWidget(_label(facts, rich=True, name="sampleFacts"), 1)
        self.body.addLayout(row)

    def _explanation(self, r) -> None:
        box = QFrame()
        box.setObjectName("selectedExplanation")
        none_found = r.no_cause_found()
        # Green only for a finding; a selection that did not raise P(true) is shown in a neutral grey.
        colours = ("#9e9e9e", "#f3f3f3") if none_found or not r.explanation else ("#2e7d32", "#eef7ee")
        box.setProperty("finding", bool(r.explanation) and not none_found)
        box.setStyleSheet(f"#selectedExplanation {{ border: 2px solid {colours[0]}; border-radius: 4px; "
                          f"background: {colours[1]}; }} QLabel {{ background: transparent; color: #1b1b1b; }}")
        v = QVBoxLayout(box)
        if none_found:
            v.addWidget(_label(f"<b>{html.escape(none_found)}.</b> The least harmful candidate, which may not "
                               "name the cause:", rich=True, name="explanationTitle"))
            v.addWidget(_label(r.explanation, name="explanationText"))
        elif r.explanation:
            v.addWidget(_label(f"<b>Explanation</b> (CEI {_cei(r.cei)})", rich=True, name="explanationTitle"))
            v.addWidget(_label(r.explanation, name="explanationText"))
        else:  # tested but none selected, or nothing could be tested: the outcome and its reason
            outcome, why = r.outcome()
            head = ("Tested, no cause found" if outcome == "no cause found" else "Nothing could be tested")
            v.addWidget(_label(f"<b>{head}.</b> {html.escape(why or '')}", rich=True, name="explanationText"))
        self.body.addWidget(box)

    def _observation_set(self, r, set_name: str) -> None:
        s = r.sample
        titles = {"A": f"Set A — correctly classified '{s.true_name}' (the true class)",
                  "B": f"Set B — correctly classified '{s.pred_name}' (the predicted class)",
                  "C": "Set C — correctly classified images of other classes",
                  "S": "Nearest correctly classified neighbours (any class)"}
        obs = [o for o in r.observations if o.set_name == set_name]
        box = QGroupBox(titles[set_name])
        box.setObjectName(f"set{set_name}")
        grid = QGridLayout(box)
        for i, o in enumerate(obs):
            cell = QVBoxLayout()
            cell.addWidget(_image(self.bundle, o.thumbnail_artifact, THUMB_SIDE,
                                  f"Set {set_name} reference: {o.label_name}", o.caption or ""),
                           0, Qt.AlignmentFlag.AlignHCenter)
            sim = f", similarity {o.similarity:.2f}" if o.similarity is not None else ""
            caption = _label(o.caption or "(no caption)", name=f"caption{set_name}{i}")
            caption.setMinimumWidth(150)
            caption.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
            cell.addWidget(_label(f"{o.label_name}{sim}"))
            cell.addWidget(caption)
            cell.addStretch(1)
            grid.addLayout(cell, i // 3, i % 3)
        self.body.addWidget(box)

    def _candidate(self, r, j: int) -> None:
        c = r.candidates[j]
        chosen = j == r.selected_index
        frame = QFrame()
        frame.setObjectName("selectedCandidate" if chosen else f"candidate{j}")
        frame.setFrameShape(QFrame.Shape.StyledPanel)
        if chosen:
            frame.setStyleSheet("#selectedCandidate { border: 2px solid #2e7d32; border-radius: 4px; }")
        v = QVBoxLayout(frame)
        mark = (" ★ selected" if chosen else "") + (" ⚠ whole image changed" if c.edit_flagged else "")
        v.addWidget(_label(f"<b>#{j + 1}</b> CEI <b>{_cei(c.cei)}</b>{mark}", rich=True))
        v.addWidget(_label(c.hypothesis or "(no hypothesis)", name=f"hypothesis{j}"))
        if c.intervention:
            what = "Edit instruction" if c.intervention_kind == "image" else "Rewritten prompt"
            v.addWidget(_label(f"{what}: {c.intervention}", name=f"intervention{j}"))
        probs = f"P(true class): {_pct(c.prob_true_before)} → {_pct(c.prob_true_after)}"
        if c.intervention_kind == "image" or c.edited_artifact:
            pair = QHBoxLayout()
            original = r.sample.image_artifact or "input"
            for name, caption in ((original, "original"), (c.edited_artifact, "counterfactual")):
                col = QVBoxLayout()
                col.addWidget(_image(self.bundle, name, IMAGE_SIDE * 3 // 4, f"#{j + 1} {caption}",
                                     c.intervention or ""))
                col.addWidget(_label(caption), 0, Qt.AlignmentFlag.AlignHCenter)
                pair.addLayout(col)
            if original in self.bundle.images and c.edited_artifact in self.bundle.images:
                compare = QPushButton("Compare…")
                compare.setObjectName(f"compare{j}")
                compare.setToolTip("Original and counterfactual with a before/after split and a difference map")
                compare.clicked.connect(lambda _=False, j=j: self.open_compare(j))
                pair.addWidget(compare, 0, Qt.AlignmentFlag.AlignVCenter)
            pair.addStretch(1)
            v.addLayout(pair)
        v.addWidget(_label(probs, name=f"probs{j}"))
        if c.edit_distance is not None:
            moved = describe(c.edit_distance, c.edit_distance_metric, c.edit_flagged, structure=c.edit_structure,
                             verdict=c.edit_verdict)
            dist = _label("Distance from the original: " + moved, name=f"distance{j}")
            if c.edit_flagged:
                dist.setText(dist.text() + " — its CEI may come from destroying the image, not from the hypothesis")
                dist.setStyleSheet("color: #b45309; font-weight: bold")
            v.addWidget(dist)
            if c.edit_verdict_reason:  # which test decided the verdict (issue 45)
                v.addWidget(_label("Verdict: " + c.edit_verdict_reason, name=f"verdict{j}"))
        if c.top5_after:
            v.addWidget(_label("Top-1 after: " + f"{c.top5_after[0].name} ({c.top5_after[0].prob:.3f})"))
        if c.error:
            err = _label(f"Error: {c.error}", name=f"error{j}")
            err.setStyleSheet("color: #c62828")
            v.addWidget(err)
        self.body.addWidget(frame)

    def open_compare(self, j: int) -> CompareDialog | None:
        r = self.bundle.result
        c = r.candidates[j]
        before = _full_image(self.bundle, r.sample.image_artifact or "input")
        after = _full_image(self.bundle, c.edited_artifact)
        if before is None or after is None:
            return None
        dialog = CompareDialog(before, after, f"Candidate #{j + 1}: original vs counterfactual",
                               f"Edit: {c.intervention}" if c.intervention else "", self.window())
        dialog.show()
        return dialog

    def _notes(self, r) -> None:
        if r.notes:
            items = "".join(f"<li>{html.escape(n)}</li>" for n in r.notes)
            self.body.addWidget(_label(f"<b>Notes</b><ul>{items}</ul>", rich=True, name="resultNotes"))


class ResultView(QWidget):
    """Columns side by side (one per method on the shown image), or a hint when there is nothing to show."""

    sig_built = Signal()  # every column is complete

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self._build_more)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("resultColumns")
        self.splitter.setChildrenCollapsible(False)
        self.empty = _label("Run a method on a sample, or open a past result, to see it here.", name="resultEmpty")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setEnabled(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.empty)
        layout.addWidget(self.splitter, 1)
        self.columns: list[ResultColumn] = []
        self.splitter.hide()

    def show_bundles(self, bundles: list[ResultBundle]) -> None:
        for col in self.columns:
            col.setParent(None)
            col.deleteLater()
        self.columns = [ResultColumn(b) for b in bundles]
        for col in self.columns:
            self.splitter.addWidget(col)
        self.splitter.setVisible(bool(self.columns))
        self.empty.setVisible(not self.columns)
        self._build_more()

    @property
    def built(self) -> bool:
        return all(c.built for c in self.columns)

    def _build_more(self) -> None:
        """One section of each unfinished column per event-loop turn (the columns grow side by side)."""
        pending = False
        for col in self.columns:
            pending |= col.build_step()
        if pending:
            self._timer.start()
        else:
            self.sig_built.emit()

    def results(self) -> list:
        return [c.bundle.result for c in self.columns]
