"""Moved to `nemo_desktop.core.session` (the model worker process holds a ModelSession and never imports the
GUI); kept so that existing imports go on working."""
from nemo_desktop.core.session import (ENDPOINT_PREFIX, KIND_TEXT, ZERO_SHOT_FAMILIES, LoadedModel,  # noqa: F401
                                       ModelSession, leave_a_core_for_the_gui, warm_up_imports)
