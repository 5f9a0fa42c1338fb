"""Widgets of the dataset browser (grid, per-class accuracy)."""
