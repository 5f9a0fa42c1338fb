"""Analyses beyond one image: dataset-level (global explanation, failure modes), model-level (model differences)
and fitted estimators (competency). Each lives in its own module or folder and registers itself in the
analysis registry (core/registry) with one line; they sit above the per-sample methods, whose pieces they use.
They share one shape: a frozen config, a pipeline with injected components and a JobContext, and a result with
`kind`, `analysis`, `manifest` and `to_dict`/`from_dict`."""
