"""Where to write a report: the save dialog every export shares (HTML or PDF, the suffix following the
chosen filter when the user typed none)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

REPORT_FILTERS = "HTML report (*.html);;PDF report (*.pdf)"


def ask_report_path(parent: QWidget, caption: str, suggested: str) -> Path | None:
    """The file the user chose, with a .html or .pdf suffix; None when they cancelled."""
    path, chosen = QFileDialog.getSaveFileName(parent, caption, suggested, REPORT_FILTERS)
    if not path:
        return None
    target = Path(path)
    if target.suffix.lower() not in (".html", ".pdf"):
        target = target.with_suffix(".pdf" if "pdf" in chosen.lower() else ".html")
    return target


def report_format(target: Path) -> str:
    return "pdf" if target.suffix.lower() == ".pdf" else "html"
