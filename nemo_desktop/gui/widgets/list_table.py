"""A read-only table of rows (endpoints, downloaded models, report items): the one setup they share."""
from __future__ import annotations

from typing import Sequence

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget

from .table_columns import keep_header_words_whole


def list_table(headers: Sequence[str], name: str, *, selection: QAbstractItemView.SelectionMode | None = None,
               stretch: int | None = None) -> QTableWidget:
    """Not editable, no row numbers; columns sized to their contents and one stretching (`stretch`, else the
    last); header words never cut (keep_header_words_whole). `selection`: whole rows, in that mode."""
    table = QTableWidget(0, len(headers))
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(headers))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    if selection is not None:
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(selection)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    if stretch is None:
        header.setStretchLastSection(True)
    else:
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    keep_header_words_whole(table)
    return table
