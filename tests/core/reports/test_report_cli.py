"""`nemo report`: result keys, prefixes and run ids; formats; clear errors; headless without Qt."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nemo_desktop.cli.main import main
from nemo_desktop.core.store import ResultsStore, get_paths
from report_fixtures import make_result, make_run, store_result


@pytest.fixture
def home_store():
    s = ResultsStore.open(get_paths().ensure())  # the store the CLI opens (NEMO_HOME of this test)
    yield s
    s.close()


def test_report_by_key_prefix_as_html(home_store, tmp_path, capsys):
    r, arts = make_result(1, "scitx")
    key = store_result(home_store, r, arts)
    out = tmp_path / "diag.html"
    assert main(["report", key[:10], "--format", "html", "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "The model saw stripes in sample 1." in html
    assert f"wrote diagnosis report {out}" in capsys.readouterr().out


def test_report_format_follows_the_extension(home_store, tmp_path):
    run_id = make_run(home_store, n_samples=2, methods=("scitx",))
    out = tmp_path / "run.pdf"
    assert main(["report", run_id, "-o", str(out)]) == 0
    assert out.read_bytes().startswith(b"%PDF-")


def test_report_json_says_what_was_written(home_store, tmp_path, capsys):
    run_id = make_run(home_store, n_samples=2, methods=("scitx",))
    out = tmp_path / "run.html"
    assert main(["report", run_id, "-o", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == {"kind": "run", "id": run_id, "format": "html", "path": str(out), "bytes": out.stat().st_size}


def test_report_shows_progress_stages(home_store, tmp_path, monkeypatch):
    """The run report reports its stages to the command's bar (drawn on terminals only)."""
    from nemo_desktop.cli.progress import StageBars

    seen = []
    monkeypatch.setattr(StageBars, "__call__", lambda self, p: seen.append(p.stage))
    run_id = make_run(home_store, n_samples=2, methods=("scitx",))
    assert main(["report", run_id, "-o", str(tmp_path / "run.pdf")]) == 0
    assert "Reading results" in seen and len(seen) > 2


def test_report_errors_are_clear(home_store, tmp_path, capsys):
    assert main(["report", "nothing-like-this", "-o", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert "error: No run or stored result matches 'nothing-like-this'." in err and "hint:" in err
    r, arts = make_result(1, "scitx")
    key = store_result(home_store, r, arts)
    assert main(["report", key, "--format", "pdf", "-o", str(tmp_path / "x.html")]) == 2
    assert "does not match the file name" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # refused while the command line is read, before any work
        main(["report", key, "-o", str(tmp_path / "missing" / "x.html")])
    assert refused.value.code == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_report_runs_headless_without_importing_qt(home_store, tmp_path):
    """No display, no Qt platform plugin: the PDF comes from the Qt-free core."""
    run_id = make_run(home_store, n_samples=2, methods=("scitx",))
    out = tmp_path / "run.pdf"
    code = ("import sys; from nemo_desktop.cli.main import main; rc = main(sys.argv[1:]); "
            "qt = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6')]; "
            "print('QT', qt); sys.exit(rc or (3 if qt else 0))")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    p = subprocess.run([sys.executable, "-c", code, "report", run_id, "--format", "pdf", "-o", str(out)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "QT []" in p.stdout and out.read_bytes().startswith(b"%PDF-")


def test_ctrl_c_under_json_is_a_json_error_and_writes_no_report(home_store, tmp_path, monkeypatch, capsys):
    """A real SIGINT during the run report: exit 130, {"error": ...} on stdout (machine output), no file."""
    import signal

    from nemo_desktop.cli.progress import StageBars

    def ctrl_c_once(self, p):
        if not getattr(self, "sent", False):
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(StageBars, "__call__", ctrl_c_once)
    run_id = make_run(home_store, n_samples=2, methods=("scitx",))
    out = tmp_path / "run.html"
    assert main(["report", run_id, "-o", str(out), "--json"]) == 130
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["type"] == "JobCancelled" and error["exit_code"] == 130 and "No report was written" in captured.err
    assert not out.exists()
