"""Dataset browser pane: open and index a dataset, browse thumbnails, filter by prediction."""
