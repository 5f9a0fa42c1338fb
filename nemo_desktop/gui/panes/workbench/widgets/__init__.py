"""Widgets of the explanation workbench (method settings, result view)."""
