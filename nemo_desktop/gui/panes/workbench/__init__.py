"""Explanation workbench pane: run an explanation method on samples and inspect its result."""
