"""Which model process a test window uses (compute.model_process, read when a window is built)."""
from __future__ import annotations


def set_model_process(mode: str, paths=None) -> None:
    """Save `compute.model_process` ("worker", the app's default, or "in-process") in the test's settings."""
    from nemo_desktop.core.store.settings import load_settings, save_settings

    settings = load_settings(paths)
    settings.compute.model_process = mode
    save_settings(settings, paths)
