"""Analyses pane: every registered dataset, model and fit analysis, one page shape for all."""
