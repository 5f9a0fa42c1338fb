"""Issue 28 §10: one monotone overall progress per job, with the time left where it can be estimated: a stage that
restarts its count never moves the bar back (the Analyses page, the jobs list), the competency fit's and the
demo's stages share one bar, and the time left is said once enough progress was measured."""
from __future__ import annotations

import threading

from nemo_desktop.core.base.job_context import JobContext


def _restarting_job(gate: threading.Event, seen: threading.Event):
    """A fit as run from the Analyses page before the fix: its stages each count from 0 inside sub(0.1, 1.0)."""

    def job(ctx: JobContext):
        inner = ctx.sub("fit", 0.1, 1.0)
        for i in range(1, 5):
            inner.progress("Preparing images", i, 4)  # reaches 100 % of the span ...
        for i in range(1, 3):
            inner.progress("Training autoencoder", i, 10)  # ... then restarts at 10 %
        inner.progress("Saving", 0, None)  # a stage without a count
        seen.set()
        gate.wait(10)
        return "done"

    return job


def test_the_bar_never_goes_back_and_says_the_time_left(qtbot, make_window, monkeypatch):
    from nemo_desktop.gui import jobs as gui_jobs
    from nemo_desktop.gui.jobs import GPU

    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    gate, seen = threading.Event(), threading.Event()
    handle = window.jobs.submit(_restarting_job(gate, seen), title="fit", lane=GPU)
    fractions = []
    handle.sig_progress.connect(lambda p: fractions.append(p.overall_fraction))
    qtbot.waitUntil(seen.is_set, timeout=20000)
    qtbot.waitUntil(lambda: handle.progress is not None and handle.progress.stage.endswith("Saving"), timeout=20000)
    assert fractions and all(b >= a for a, b in zip(fractions, fractions[1:])), fractions
    # Stays at the furthest point reached, never back to 11 %; and not 100 % while the job runs (issue 43 §2)
    assert fractions[-1] == 0.99
    row = window.jobs_panel.rows.get(handle.job_id)
    qtbot.waitUntil(lambda: window.jobs_panel.rows.get(handle.job_id) is not None, timeout=20000)
    row = window.jobs_panel.rows[handle.job_id]
    assert row.bar.maximum() == 1000 and row.bar.value() == 990
    gate.set()
    qtbot.waitUntil(lambda: handle.state == "done", timeout=20000)

    # The time left: from the rate measured since the first report (a clock under the test's control).
    clock = [100.0]
    monkeypatch.setattr(gui_jobs.time, "monotonic", lambda: clock[0])
    gate2, seen2 = threading.Event(), threading.Event()
    steps = threading.Semaphore(0)
    done_steps = threading.Event()

    def timed(ctx):
        for i in range(1, 6):
            steps.acquire()
            ctx.progress("Scoring", i, 10)
            if i == 5:
                done_steps.set()
        gate2.wait(10)

    handle = window.jobs.submit(timed, title="timed", lane=GPU)
    texts = []
    handle.sig_progress.connect(lambda p: texts.append((p.overall_fraction, p.seconds_left)))
    for i in range(5):
        clock[0] += 10.0  # ten seconds per tenth: 50 s left after half
        steps.release()
        qtbot.waitUntil(lambda: len(texts) == i + 1, timeout=20000)
    assert texts[0][1] is None  # one report: nothing to estimate from
    assert texts[-1] == (0.5, 50.0)
    qtbot.waitUntil(lambda: window.jobs_panel.rows.get(handle.job_id) is not None, timeout=20000)
    row = window.jobs_panel.rows[handle.job_id]
    qtbot.waitUntil(lambda: "less than a minute left" in row.stage.text(), timeout=20000)
    gate2.set()
    qtbot.waitUntil(lambda: handle.state == "done", timeout=20000)


def test_describe_seconds_left():
    from nemo_desktop.gui.jobs import describe_seconds_left, estimate_seconds_left

    assert estimate_seconds_left((0.0, 0.0), (1.0, 0.5)) is None  # under three seconds measured
    assert estimate_seconds_left((0.0, 0.0), (10.0, 0.25)) == 30.0
    assert [describe_seconds_left(s) for s in (None, 0, 30, 150, 7200)] == [
        "", "", "less than a minute left", "about 2 min left", "about 2.0 h left"]


def test_the_competency_fit_fills_one_bar_from_the_analyses_page_span():
    """The real fit, run inside the page's sub(0.1, 1.0): preparing, training and calibrating never refill it."""
    import torch

    from fixtures_tiny.competency_world import TINY, build_world

    from nemo_desktop.core.analyses.competency import CompetencyEstimatorFit, EstimatorConfig

    torch.set_num_threads(1)
    world = build_world()
    seen = []
    ctx = JobContext(on_progress=seen.append)
    fit = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**dict(TINY, epochs=2)))
    fit(world.fit_images[:160], world.fit_labels[:160], ctx.sub("competency-estimator", 0.1, 1.0))
    overall = [p.overall for p in seen if p.overall is not None]
    stages = {p.stage.split(": ", 1)[-1] for p in seen}
    assert {"Preparing images", "Training autoencoder", "Calibrating"} <= stages
    assert all(b >= a - 1e-9 for a, b in zip(overall, overall[1:])), overall
    assert overall[-1] == 1.0 and max(p.overall for p in seen if p.stage.endswith("Preparing images")) <= 0.35
