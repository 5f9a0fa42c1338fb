"""The progress bars and Ctrl-C handling shared by the long-running commands (nemo_desktop/cli/progress.py)."""
import os
import signal

import pytest

from nemo_desktop.cli.progress import StageBars, cancellable_job, ctrl_c_cancels
from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext


def test_first_ctrl_c_cancels_second_interrupts(capsys):
    token = CancelToken()
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_cancels(token, cancels_after="the current batch"):
            os.kill(os.getpid(), signal.SIGINT)
            assert token.cancelled  # the job sees the cancel at its next check
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert "Cancelling after the current batch (Ctrl-C again to stop now)" in capsys.readouterr().err


class RecordingBars(StageBars):
    """StageBars that keeps every bar it opened, to look at them after they are closed."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.opened = []

    def _open(self, p):
        bar = super()._open(p)
        self.opened.append(bar)
        return bar


@pytest.fixture
def terminal(monkeypatch):
    """stderr reads as a terminal (pytest captures it), so StageBars draws tqdm bars."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr("nemo_desktop.cli.progress._stderr_is_terminal", lambda: True)


def test_cancellable_job_cancels_at_the_next_check_and_closes_the_display(terminal):
    before = signal.getsignal(signal.SIGINT)
    bars = RecordingBars()
    with pytest.raises(JobCancelled):
        with cancellable_job(bars) as ctx:
            assert isinstance(ctx, JobContext)
            ctx.progress("Working", 1, 3)
            os.kill(os.getpid(), signal.SIGINT)
            ctx.check_cancelled()
    assert bars._bar is None and len(bars.opened) == 1  # closed on the way out
    assert signal.getsignal(signal.SIGINT) is before


def test_one_bar_per_stage_never_backwards(terminal):
    bars = RecordingBars(kept={"Indexing images"}, units={"Indexing images": "img"})
    ctx = JobContext(bars)
    ctx.progress("Scanning dataset", 0, 10)
    ctx.progress("Scanning dataset", 10, 10)
    ctx.progress("Indexing images", 0, None)
    ctx.progress("Indexing images", 4, 8)  # the total becomes known later
    ctx.progress("Indexing images", 3, 8)  # a late report does not move the bar back
    ctx.progress("Saving feature matrix", 1, 1)
    bars.close()
    scan, index, save = bars.opened
    assert (scan.n, scan.total, scan.leave, scan.unit) == (10, 10, False, "it")
    assert (index.n, index.total, index.leave, index.unit) == (4, 8, True, "img")
    assert (save.n, save.total) == (1, 1)


def test_terminal_only_bars_stay_silent_in_a_log(capsys, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    bars = RecordingBars(terminal_only=True)  # pytest captures stderr: not a terminal
    ctx = JobContext(bars)
    ctx.progress("Indexing images", 2, 5)
    bars.close()
    assert bars.opened == [] and capsys.readouterr().err == ""


def test_in_a_log_bars_are_plain_lines(capsys, monkeypatch):
    """explain, competency, ... used to force tqdm bars into logs (disable=False): redrawn bars as text."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    bars = RecordingBars(units={"Epochs": "epoch"})
    ctx = JobContext(bars)
    ctx.progress("Loading model", 0, None)
    for i in range(51):
        ctx.progress("Epochs", i, 50)
    bars.close()
    err = capsys.readouterr().err
    assert bars.opened == [] and "\r" not in err and "\x1b" not in err  # no bar drawn
    assert err.splitlines() == ["Loading model...", "Epochs...", "Epochs: 50/50 epoch done"]


def test_plain_lines_report_progress_now_and_then(capsys, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    clock = iter([0.0, 10.0, 31.0, 32.0, 70.0])
    monkeypatch.setattr("nemo_desktop.cli.progress.time.monotonic", lambda: next(clock))
    ctx = JobContext(StageBars())
    for done in (0, 1, 2, 3, 4):
        ctx.progress("Images", done, 9)
    assert capsys.readouterr().err.splitlines() == ["Images...", "Images: 2/9", "Images: 4/9"]


@pytest.mark.parametrize("on_terminal", [True, False])
def test_tqdm_disable_silences_bars_and_lines(capsys, monkeypatch, on_terminal):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.setattr("nemo_desktop.cli.progress._stderr_is_terminal", lambda: on_terminal)
    bars = RecordingBars()
    ctx = JobContext(bars)
    ctx.progress("Epochs", 3, 5)
    bars.close()
    assert bars.opened == [] and capsys.readouterr().err == ""


def test_bars_only_on_a_terminal(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr("nemo_desktop.cli.progress._stderr_is_terminal", lambda: True)
    assert StageBars().mode() == StageBars(terminal_only=True).mode() == "bar"
    monkeypatch.setattr("nemo_desktop.cli.progress._stderr_is_terminal", lambda: False)
    assert (StageBars().mode(), StageBars(terminal_only=True).mode()) == ("lines", "off")
