"""Counts behind the dataset browser's charts (Qt-free): confusion matrix, per-class accuracy, confidence order,
and the CEI distribution of a stored run."""
