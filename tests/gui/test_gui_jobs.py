"""JobRunner: core jobs on worker threads, signals in the GUI thread, lanes, cancellation, failures."""
from __future__ import annotations

import threading
import time

import pytest
from gui_job_functions import count_to_three, fail_to_load, loop_until_cancelled

from nemo_desktop.gui.jobs import CANCELLED, DONE, FAILED, GPU, IO, QUEUED

pytestmark = pytest.mark.gui


def test_job_reports_progress_partials_and_returns_off_the_gui_thread(qtbot, runner):
    handle = runner.submit(count_to_three, title="Count", lane=GPU)
    progress, partials = [], []
    handle.sig_progress.connect(progress.append)
    handle.sig_partial.connect(partials.append)
    with qtbot.waitSignal(handle.sig_done, timeout=5000) as done:
        pass
    result = done.args[0]
    assert result["answer"] == 42
    assert threading.get_ident() not in result["threads"]  # the work ran on a worker thread
    assert partials == [0, 1, 2]
    assert progress and progress[-1].stage == "Counting" and (progress[-1].done, progress[-1].total) == (3, 3)
    assert handle.state == DONE and not runner.busy


def test_signals_arrive_in_the_gui_thread(qtbot, runner):
    threads = []
    handle = runner.submit(count_to_three, title="Count")
    handle.sig_progress.connect(lambda _p: threads.append(threading.get_ident()))
    handle.sig_done.connect(lambda _r: threads.append(threading.get_ident()))
    with qtbot.waitSignal(handle.sig_finished, timeout=5000):
        pass
    assert threads and set(threads) == {threading.get_ident()}


def test_cancelling_a_running_job_ends_in_sig_cancelled(qtbot, runner):
    handle = runner.submit(loop_until_cancelled, title="Loop")
    done = []
    handle.sig_done.connect(done.append)
    with qtbot.waitSignal(handle.sig_progress, timeout=5000):
        pass  # it is running
    with qtbot.waitSignal(handle.sig_cancelled, timeout=5000):
        handle.cancel()
    assert handle.state == CANCELLED and done == []
    assert handle.progress.done < 2000  # stopped early, between two units of work
    assert handle.outcome.status == "cancelled"


def test_a_failing_job_emits_sig_failed_with_message_hint_and_detail(qtbot, runner):
    handle = runner.submit(fail_to_load, title="Load model")
    with qtbot.waitSignal(handle.sig_failed, timeout=5000) as failed:
        pass
    error = failed.args[0]
    assert error["type"] == "ModelError"
    assert error["message"] == "The classifier could not be loaded."
    assert error["hint"] == "Check that the checkpoint file is complete."
    assert "header too short" in error["detail"] and "Traceback" in error["detail"]
    assert handle.state == FAILED


def test_gpu_lane_runs_one_job_at_a_time_in_order(qtbot, runner):
    spans = []

    def job(name):
        def run(ctx):
            start = time.monotonic()
            time.sleep(0.15)
            spans.append((name, start, time.monotonic()))
        return run

    handles = [runner.submit(job(n), title=n, lane=GPU) for n in "abc"]
    assert [h.state for h in handles[1:]] == [QUEUED, QUEUED]
    with qtbot.waitSignal(handles[-1].sig_finished, timeout=5000):
        pass
    assert [s[0] for s in spans] == ["a", "b", "c"]
    for (_, _, end), (_, start, _) in zip(spans, spans[1:]):
        assert start >= end  # no overlap


def test_io_lane_runs_jobs_concurrently(qtbot, runner):
    # Each job waits for the other at a barrier: they both finish only if they run at the same time.
    barrier = threading.Barrier(2, timeout=5)

    def job(ctx):
        barrier.wait()
        return "met"

    handles = [runner.submit(job, title=f"io {i}", lane=IO) for i in range(2)]
    with qtbot.waitSignals([h.sig_done for h in handles], timeout=8000):
        pass
    assert all(h.state == DONE for h in handles)


def test_a_cancelled_queued_job_never_starts(qtbot, runner):
    release = threading.Event()
    ran = []
    blocker = runner.submit(lambda ctx: release.wait(5), title="Blocker", lane=GPU)
    queued = runner.submit(lambda ctx: ran.append(True), title="Queued", lane=GPU)
    with qtbot.waitSignal(queued.sig_cancelled, timeout=2000):
        queued.cancel()
    release.set()
    with qtbot.waitSignal(blocker.sig_done, timeout=5000):
        pass
    qtbot.wait(50)
    assert ran == [] and queued.state == CANCELLED


def test_unknown_lane_is_refused(runner):
    with pytest.raises(ValueError, match="unknown lane"):
        runner.submit(count_to_three, title="x", lane="cpu")


def test_shutdown_cancels_and_waits(qtbot, runner):
    handles = [runner.submit(loop_until_cancelled, title=f"loop {i}", lane=GPU) for i in range(2)]
    with qtbot.waitSignal(handles[0].sig_progress, timeout=5000):
        pass
    started = time.monotonic()
    assert runner.shutdown(5000)
    assert time.monotonic() - started < 2
    assert [h.state for h in handles] == [CANCELLED, CANCELLED] and not runner.busy
