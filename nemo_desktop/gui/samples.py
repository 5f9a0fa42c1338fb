"""Moved to `nemo_desktop.core.samples` (samples travel to the model worker process); kept for imports."""
from nemo_desktop.core.samples import Sample  # noqa: F401
