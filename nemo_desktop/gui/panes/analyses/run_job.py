"""Moved to `nemo_desktop.core.app_jobs.analyses` (the model worker process runs these jobs and never imports
the GUI); kept so that existing imports go on working."""
from nemo_desktop.core.app_jobs.analyses import (  # noqa: F401
    NONE,
    PAGE_KINDS,
    PageData,
    SESSION_KINDS,
    _NOT_ON_DISK,
    _condition_source,
    _implied,
    _model_facts,
    classifier_zero_shot,
    effective_need,
    export_result,
    image_analyses,
    list_page_analyses,
    on_page,
    page_data,
    resolved_ref,
    result_html,
    run_page_analysis,
    run_problem,
    stored_page_result,
)
