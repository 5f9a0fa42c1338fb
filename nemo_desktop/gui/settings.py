"""The GUI's own settings (window layout, pane state): an INI file in the app's config directory.

Kept apart from the core's settings.json because it holds Qt-specific blobs (saveGeometry/saveState)
that only the GUI can read. Layout is disposable: a file from another layout version is reset, not
migrated. The path follows get_paths(), so NEMO_HOME isolates it (tests rely on that).
"""
from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings

from nemo_desktop.core.store.atomic import atomic_write_text
from nemo_desktop.core.store.paths import AppPaths, get_paths

log = logging.getLogger(__name__)

FILE_NAME = "gui.ini"
STATE_FILE_NAME = "gui-state.json"  # BackgroundSettings
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



class BackgroundSettings:
    """Values the window sets while in use (recent datasets, the last models), kept in `gui-state.json` beside
    gui.ini: `value` sees every `setValue` at once, and a thread of its own writes the file (atomically, in order).

    Not QSettings: its sync() locks gui.ini and fdatasyncs twice, and PySide keeps the GIL through it, so even
    on another thread it holds up the window. Written on the GUI thread as an indexing in the model worker ended
    (a dataset shown, models changed), it stalled the window ~400 ms behind the worker's store writes
    (benchmarks/gui_event_loop.py). Keys not in the file yet are read from gui.ini, where earlier versions kept them.
    """

    def __init__(self, path: Path, legacy: QSettings | None = None):
        self.path = Path(path)
        self._legacy = legacy
        self._values: dict[str, Any] = {}
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            self._values = loaded if isinstance(loaded, dict) else {}
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:  # unreadable: start empty (a disposable memory, like the layout)
            log.warning("could not read %s (%s): starting without it", self.path, exc)
        self._lock = threading.Lock()
        self._version = self._written = 0
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nemo-gui-state")
        self._last: Future | None = None

    def value(self, key: str, default: Any = None) -> Any:
        with self._lock:
            if key in self._values:
                return self._values[key]
        return self._legacy.value(key, default) if self._legacy is not None else default

    def setValue(self, key: str, value: Any) -> None:  # noqa: N802 - QSettings' name: first_run/memory.py takes either
        with self._lock:
            self._values[key] = value
            self._version += 1
        try:
            self._last = self._writer.submit(self._write)
        except RuntimeError:  # closed (a job that ended after the window): nothing is drawn any more
            self._write()

    def sync(self) -> None:
        """Returns at once: every value set is already on its way to the disk (`flush` waits for it)."""

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait (bounded) until everything set is written; True when it was."""
        last = self._last
        if last is None:
            return True
        try:
            last.result(timeout_s)
            return True
        except Exception:  # noqa: BLE001 - a timeout or a failed write: said in the log, the window closes anyway
            log.warning("%s was not written in %.0f s", self.path, timeout_s, exc_info=True)
            return False

    def close(self, timeout_s: float = 5.0) -> bool:
        written = self.flush(timeout_s)
        self._writer.shutdown(wait=False)
        return written

    def _write(self) -> None:  # the writer thread; file I/O releases the GIL
        with self._lock:
            if self._written == self._version:  # an earlier write took these values along
                return
            version, text = self._version, json.dumps(self._values, indent=1, sort_keys=True)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, text)
        except OSError as exc:  # the values stay readable for this session
            log.warning("could not write %s: %s", self.path, exc)
            return
        with self._lock:
            self._written = max(self._written, version)
