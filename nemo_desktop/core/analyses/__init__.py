"""Analyses that share one shape: a frozen config, a pipeline with injected components and a JobContext,
and a result with `kind`, `analysis`, `manifest` and `to_dict`/`from_dict`."""
