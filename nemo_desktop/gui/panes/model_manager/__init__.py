"""Model manager pane: the model catalog, downloads, loading, settings for tokens and endpoints."""
