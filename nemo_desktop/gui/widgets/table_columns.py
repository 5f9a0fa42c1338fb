"""No table squeezes a column below its header's longest word: the table scrolls horizontally instead.

Two kinds of tables are shown in the app:

- item views (QTableView, QTableWidget): `keep_header_words_whole(view)` gives each column a minimum width, the
  widest word of its header text plus the header's margins (and sort arrow). Interactive, fixed and
  size-to-contents columns are widened to it when they would be narrower; a stretching column stretches while
  the view has room for every column's minimum and is pinned at its minimum when it has not, so the view
  scrolls horizontally rather than cut or wrap a header word.
- rich text (QTextBrowser showing a report's HTML tables): Qt's default wrapping breaks a word anywhere when a
  cell is narrower than the word, which made the competency-cf table's headers and cells one letter per line
  at 1200 px. `keep_words_whole(browser)` wraps at word boundaries only, so a table keeps its columns at their
  longest word and the browser scrolls horizontally.
"""
from __future__ import annotations

import shiboken6
from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QFont, QFontMetrics, QTextOption
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QStyle, QTableView, QTextEdit

_STRETCH = QHeaderView.ResizeMode.Stretch
_INTERACTIVE = QHeaderView.ResizeMode.Interactive


def longest_word_px(text: str, font: QFont) -> int:
    """The advance width of the widest whitespace-separated word of `text` in `font`."""
    fm = QFontMetrics(font)
    return max((fm.horizontalAdvance(w) for w in str(text or "").split()), default=0)


def header_word_min(view: QTableView, column: int) -> int:
    """The narrowest a column may be: its header's longest word, with the header's margins and sort arrow."""
    header = view.horizontalHeader()
    model = view.model()
    if model is None:
        return 0
    text = model.headerData(column, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole)
    font = model.headerData(column, Qt.Orientation.Horizontal, Qt.ItemDataRole.FontRole)
    font = font if isinstance(font, QFont) else header.font()
    style = header.style()
    margin = 2 * style.pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
    if view.isSortingEnabled() or header.isSortIndicatorShown():
        margin += style.pixelMetric(QStyle.PixelMetric.PM_HeaderMarkSize, None, header) + margin // 2
    word = longest_word_px(str(text or ""), font)
    return word + margin + 2 if word else 0  # + the grid line


class HeaderWordGuard(QObject):
    """Keeps a table's columns at least as wide as their header's longest word (see the module)."""

    def __init__(self, view: QTableView):
        super().__init__(view)
        self.view = view
        self.header = view.horizontalHeader()
        self._stretch: set[int] = set()  # columns created as Stretch (pinned while there is no room)
        self._busy = False
        self._mins: list[int] | None = None  # per column; measured again when the headers change
        view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        view.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.header.sectionResized.connect(lambda *_: self.enforce())
        self.header.geometriesChanged.connect(self.enforce)
        view.viewport().installEventFilter(self)
        self._watched_model = None
        self._watch_model()
        self.enforce()

    def _watch_model(self) -> None:
        model = self.view.model()
        if model is None or model is self._watched_model:
            return
        self._watched_model, self._mins = model, None
        for sig in (model.headerDataChanged, model.modelReset, model.columnsInserted, model.layoutChanged):
            sig.connect(self._soon)

    def _soon(self, *_args) -> None:
        self._mins = None
        QTimer.singleShot(0, self.enforce)

    def eventFilter(self, obj, event) -> bool:
        if event.type() in (QEvent.Type.Resize, QEvent.Type.Show):
            self.enforce()
        elif event.type() == QEvent.Type.FontChange:
            self._mins = None
            self.enforce()
        return False

    def enforce(self) -> None:
        if self._busy or not shiboken6.isValid(self) or not shiboken6.isValid(self.view):
            return
        self._busy = True
        try:
            self._enforce()
        except RuntimeError:  # the view is being torn down (its header still signals): nothing to keep
            pass
        finally:
            self._busy = False

    def _enforce(self) -> None:
        self._watch_model()
        model = self.view.model()
        columns = model.columnCount() if model is not None else 0
        if self._mins is None or len(self._mins) != columns:
            self._mins = [header_word_min(self.view, c) for c in range(columns)]
        mins = self._mins
        for c in range(columns):
            if self.header.sectionResizeMode(c) == _STRETCH:
                self._stretch.add(c)
        stretch = [c for c in sorted(self._stretch) if c < columns and not self.header.isSectionHidden(c)]
        if stretch:
            fixed = sum(self.header.sectionSize(c) for c in range(columns)
                        if c not in stretch and not self.header.isSectionHidden(c))
            room = self.view.viewport().width() - fixed
            fits = all(room / len(stretch) >= mins[c] for c in stretch)  # Qt shares the room equally
            for c in stretch:
                if fits:
                    if self.header.sectionResizeMode(c) != _STRETCH:
                        self.header.setSectionResizeMode(c, _STRETCH)
                else:
                    if self.header.sectionResizeMode(c) != _INTERACTIVE:
                        self.header.setSectionResizeMode(c, _INTERACTIVE)
                    self.header.resizeSection(c, max(mins[c], self.header.sectionSize(c)))
        for c in range(columns):
            if c in stretch and self.header.sectionResizeMode(c) == _STRETCH:
                continue
            if self.header.sectionSize(c) < mins[c] and not self.header.isSectionHidden(c):
                self.header.resizeSection(c, mins[c])


def keep_header_words_whole(view: QTableView) -> HeaderWordGuard:
    """Install the guard on `view` (kept alive by the view); returns it."""
    existing = view.findChild(HeaderWordGuard)
    if existing is not None:
        return existing
    return HeaderWordGuard(view)


def keep_words_whole(browser: QTextEdit) -> None:
    """Wrap a rich-text view's text at word boundaries only: a table too wide for the view scrolls
    horizontally instead of breaking its words letter by letter."""
    browser.setWordWrapMode(QTextOption.WrapMode.WordWrap)
    browser.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
