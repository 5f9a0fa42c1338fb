import threading

import pytest

from nemo_desktop.core.base.errors import JobCancelled, ModelError, OutOfMemoryError
from nemo_desktop.core.base.job_context import CancelToken, JobContext, Progress, run_job


def test_track_reports_stage_and_counts():
    seen = []
    ctx = JobContext(on_progress=seen.append)
    assert list(ctx.track(["a", "b", "c"], stage="Captioning")) == ["a", "b", "c"]
    assert [(p.stage, p.done, p.total) for p in seen] == [("Captioning", i, 3) for i in range(4)]
    assert seen[-1].fraction == 1.0


def test_cancel_stops_between_units_and_keeps_partials():
    token = CancelToken()
    done = []

    def job(ctx):
        for i in ctx.track(range(10), stage="Work"):
            done.append(i)
            ctx.partial(i)
            if i == 3:
                token.cancel()  # e.g. the user pressed Cancel while unit 3 ran
        return "finished"

    outcome = run_job(job, JobContext(cancel=token))
    assert outcome.status == "cancelled"
    assert done == [0, 1, 2, 3]
    assert outcome.partial_results == [0, 1, 2, 3]


def test_sub_context_prefixes_stage_and_shares_cancel():
    seen = []
    parent = JobContext(on_progress=seen.append)
    child = parent.sub("Editing image 2 of 3")
    child.progress("denoising", 5, 28)
    assert seen[-1] == Progress("Editing image 2 of 3: denoising", 5, 28)
    parent.cancel_token.cancel()
    with pytest.raises(JobCancelled):
        child.check_cancelled()


def test_step_callback_returns_false_after_cancel():
    ctx = JobContext()
    cb = ctx.step_callback("Editing", 4)
    assert cb(1) is True
    ctx.cancel_token.cancel()
    assert cb(2) is False


def test_failures_carry_message_hint_and_detail():
    def job(ctx):
        raise ModelError("The editor could not be loaded.", hint="Download it first.", detail="missing file x")

    out = run_job(job)
    assert out.status == "failed" and not out.ok
    assert out.error["message"] == "The editor could not be loaded."
    assert out.error["hint"] == "Download it first."
    assert "missing file x" in out.error["detail"] and "Traceback" in out.error["detail"]


def test_unexpected_errors_are_described_not_raised():
    out = run_job(lambda ctx: 1 / 0)
    assert out.status == "failed"
    assert "ZeroDivisionError" in out.error["detail"]
    assert out.error["message"].startswith("Unexpected error")


def test_cuda_oom_becomes_a_clear_error():
    import torch

    def job(ctx):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    out = run_job(job)
    assert out.error["type"] == OutOfMemoryError.__name__
    assert "smaller" in out.error["hint"] and "offload" in out.error["hint"]


def test_cancel_token_is_thread_safe():
    token = CancelToken()
    t = threading.Thread(target=token.cancel)
    t.start()
    t.join()
    assert token.cancelled


def test_step_callback_matches_the_editor_protocol():
    seen = []
    ctx = JobContext(on_progress=seen.append)
    cb = ctx.step_callback("Editing")
    assert cb(3, 28) is True
    assert seen[-1] == Progress("Editing", 3, 28)


def test_sub_steps_map_onto_slices_of_the_whole_job():
    seen = []
    root = JobContext(on_progress=seen.append)
    root.progress("Plain", 1, 4)
    assert seen[-1].overall is None and seen[-1].overall_fraction == 0.25  # no slices: the stage's own fraction
    models = root.sub("Models", 0.0, 0.2)
    models.progress("Loading", 1, 2)
    assert seen[-1].stage == "Models: Loading" and abs(seen[-1].overall - 0.1) < 1e-9
    images = root.sub("Images", 0.2, 1.0)
    second = images.sub("Image 2 of 2", 0.5, 1.0)  # nested: [0.6, 1.0] of the job
    second.progress("Editing", 1, 4)
    assert seen[-1].stage == "Images: Image 2 of 2: Editing" and abs(seen[-1].overall - 0.7) < 1e-9
    assert (seen[-1].done, seen[-1].total) == (1, 4)  # the stage's own counts are kept for the label
    root.sub("Whole").progress("x", 1, 2)
    assert seen[-1].overall is None  # sub(prefix) alone covers the whole range, as before
    with pytest.raises(ValueError):
        root.sub("bad", 0.5, 0.2)
