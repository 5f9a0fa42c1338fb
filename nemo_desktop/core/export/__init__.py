"""Handing NEMO's findings to the tools users already work in: the per-image table (Parquet, CSV, JSON Lines,
pandas; schema.py documents its columns) and a FiftyOne dataset (fiftyone_export.py, the `fiftyone` extra)."""
