"""Widgets of the model manager pane."""
