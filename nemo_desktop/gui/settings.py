"""The GUI's own settings (window layout, pane state): an INI file in the app's config directory.

Kept apart from the core's settings.json because it holds Qt-specific blobs (saveGeometry/saveState)
that only the GUI can read. Layout is disposable: a file from another layout version is reset, not
migrated. The path follows get_paths(), so NEMO_HOME isolates it (tests rely on that).
"""
from __future__ import annotations

import logging

from PySide6.QtCore import QSettings

from nemo_desktop.core.store.paths import AppPaths, get_paths

log = logging.getLogger(__name__)

FILE_NAME = "gui.ini"
LAYOUT_VERSION = 1


def gui_settings(paths: AppPaths | None = None) -> QSettings:
    paths = paths or get_paths()
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    settings = QSettings(str(paths.config_dir / FILE_NAME), QSettings.Format.IniFormat)
    version = settings.value("meta/layout_version")
    if version is not None and str(version) != str(LAYOUT_VERSION):
        log.info("GUI layout file %s has version %s, this build writes %d: starting with a fresh layout",
                 settings.fileName(), version, LAYOUT_VERSION)
        settings.clear()
    settings.setValue("meta/layout_version", LAYOUT_VERSION)
    return settings
