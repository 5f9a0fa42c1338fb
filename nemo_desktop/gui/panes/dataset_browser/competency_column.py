"""Moved to `nemo_desktop.core.app_jobs.competency_column` (the model worker process runs these jobs and never imports
the GUI); kept so that existing imports go on working."""
from nemo_desktop.core.app_jobs.competency_column import (  # noqa: F401
    CompetencyColumn,
    ESTIMATOR_ANALYSIS,
    SCORE_ANALYSIS,
    _score_analysis,
    estimators_for,
    find_estimators,
    score_column,
    stored_column,
)
