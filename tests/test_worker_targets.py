"""Every model job the GUI submits as a `JobSpec` names a function the model worker can import without Qt.

The worker process imports each job's module by name; a module under nemo_desktop/gui would pull in PySide6
(the panes' package imports Qt widgets) and a typo would only fail when a user runs the job. Checked in a fresh
interpreter, as the spawned worker starts.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = re.compile(r'JobSpec\(\s*f?"([\w.]+|\{MODEL_JOBS\}):(\w+)"')


def gui_targets() -> set[str]:
    found = set()
    for path in (ROOT / "nemo_desktop" / "gui").rglob("*.py"):
        for module, name in TARGET.findall(path.read_text(encoding="utf-8")):
            module = "nemo_desktop.core.app.jobs.models" if module == "{MODEL_JOBS}" else module
            found.add(f"{module}:{name}")
    return found


def test_gui_job_specs_resolve_in_the_core_without_qt():
    targets = sorted(gui_targets())
    # The converted paths: model load / unload and start-up restore, the demo, the diagnosis (prediction and
    # run), the workbench's run, indexing, the analyses page, failure-mode ranking and CEI, competency scoring.
    assert len(targets) >= 12, targets
    assert all(t.startswith("nemo_desktop.core.") for t in targets), targets
    code = ("import sys\nfrom nemo_desktop.core.app.worker.protocol import JobSpec\n"
            f"for t in {targets!r}:\n    assert callable(JobSpec(t).resolve()), t\n"
            "bad = [m for m in sys.modules if m.startswith(('PySide6', 'shiboken6', 'nemo_desktop.gui'))]\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
