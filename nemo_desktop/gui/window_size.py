"""The first window's size and place, chosen from the screen it opens on (issue 43 §3).

A fixed 1200×800 window was taller than an 800-px screen once the window manager added its title bar, so the
status bar stayed hidden until the window was maximised. Before the window is shown its frame is unknown, so a
title bar's height is reserved: the window frame then fits the screen's available geometry (the screen less
its panels and docks).
"""
from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QGuiApplication

PREFERRED = QSize(1200, 800)  # on a large screen: the size the panes are designed for
TITLE_BAR_RESERVE = 36  # px above the window for the window manager's title bar (about 24-35 px)
BORDER_RESERVE = 4  # px for the frame's border on each of the other sides


def initial_geometry(available: QRect) -> QRect:
    """The window's client area (what QWidget.setGeometry takes) for a screen whose available area is
    `available`: the preferred size when it fits with its frame, else as large as fits, centred."""
    width = max(320, min(PREFERRED.width(), available.width() - 2 * BORDER_RESERVE))
    height = max(240, min(PREFERRED.height(), available.height() - TITLE_BAR_RESERVE - BORDER_RESERVE))
    x = available.x() + (available.width() - width) // 2
    spare = available.height() - TITLE_BAR_RESERVE - BORDER_RESERVE - height
    y = available.y() + TITLE_BAR_RESERVE + max(0, spare // 2)
    return QRect(x, y, width, height)


def place_first_window(window) -> None:
    """Size and place `window` for the primary screen (a restored geometry replaces this later)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        window.resize(PREFERRED)
        return
    window.setGeometry(initial_geometry(screen.availableGeometry()))
