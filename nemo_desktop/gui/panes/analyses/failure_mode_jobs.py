"""Moved to `nemo_desktop.core.app_jobs.failure_modes` (the model worker process runs these jobs and never imports
the GUI); kept so that existing imports go on working."""
from nemo_desktop.core.app_jobs.failure_modes import (  # noqa: F401
    cei_models,
    rank_images,
    result_embedder,
    validate_with_cei,
)
