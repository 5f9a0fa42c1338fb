"""Dialogs opened from the menu or by drag-and-drop (diagnosis, about)."""
