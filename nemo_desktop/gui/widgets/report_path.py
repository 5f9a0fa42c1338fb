"""Where to write a report: the save dialog every export shares (HTML or PDF, the suffix following the
chosen filter when the user typed none)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

REPORT_FILTERS = "HTML report (*.html);;PDF report (*.pdf)"


JSON_FILTER = "JSON rows (*.json)"


def ask_report_path(parent: QWidget, caption: str, suggested: str, allow_json: bool = False) -> Path | None:
    """The file the user chose, with a .html or .pdf suffix (or .json with `allow_json`); None when they
    cancelled."""
    filters = REPORT_FILTERS + (f";;{JSON_FILTER}" if allow_json else "")
    path, chosen = QFileDialog.getSaveFileName(parent, caption, suggested, filters)
    if not path:
        return None
    target = Path(path)
    suffixes = (".html", ".pdf", ".json") if allow_json else (".html", ".pdf")
    if target.suffix.lower() not in suffixes:
        target = target.with_suffix(".pdf" if "pdf" in chosen.lower() else
                                    ".json" if allow_json and "json" in chosen.lower() else ".html")
    return target


def report_format(target: Path) -> str:
    suffix = Path(target).suffix.lower()
    return "pdf" if suffix == ".pdf" else "json" if suffix == ".json" else "html"
