"""Analyses beyond one image: dataset-level (global explanation, failure modes), model-level (model differences)
and fitted estimators (competency). Each lives in its own module or folder and registers itself in the
analysis registry (core/registry) with one line; they sit above the per-sample methods, whose pieces they use."""
