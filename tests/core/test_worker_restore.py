"""A new model process comes back with exactly the models the last one held, and one that keeps dying stops.

Issue 42 §1: after the worker died (a kill mid-job, a kill while idle) the next job ran with the settings'
default classifier instead of the one the user had loaded (offline it failed on the default's missing weights).
These tests load the real demo classifier by its catalog id and leave the settings' classifier unset (setting it
to the test model hid the bug). A worker that dies at start was respawned without limit; now it is restarted
`restart_limit` times in a row and then reported dead with its cause, until `revive()`.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from nemo_desktop.core.base.errors import NemoError
from nemo_desktop.core.base.job_context import JobContext, run_job
from nemo_desktop.core.app.worker import JobSpec, WorkerConfig, WorkerGaveUp, WorkerSupervisor, describe_exit

JOBS = "nemo_desktop.core.app.jobs.models"


@pytest.fixture
def demo():
    """The demo (built once per test process) registered in this test's home, as `nemo demo` leaves it."""
    from demo_cache import install_built_demo

    from nemo_desktop.core.demo import CLASSIFIER_ID, prepare_demo
    from nemo_desktop.core.store.paths import get_paths
    from nemo_desktop.core.store.settings import load_settings

    paths = get_paths()
    install_built_demo(paths)
    setup = prepare_demo(paths)  # reuses the copied build; registers the classifier in the user catalog
    assert load_settings(paths).models.classifier in (None, "")  # the default stays the catalog's (not the demo)
    images = sorted(Path(setup.dataset_dir).rglob("*.png"))[:2]
    return CLASSIFIER_ID, [str(p) for p in images], setup


@pytest.fixture
def supervisors():
    made = []

    def make(config=None, **kw) -> WorkerSupervisor:
        sup = WorkerSupervisor(config or WorkerConfig(), **kw)
        made.append(sup)
        return sup

    yield make
    for sup in made:
        sup.stop(timeout_s=3)


def _load(sup, ref):
    return sup.run(JobSpec(f"{JOBS}:load_model", ("classifier", ref)), JobContext())


def _predict(sup, images):
    return run_job(lambda c: sup.run(JobSpec(f"{JOBS}:predict_images", (images,)), c))


def _wait(cond, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_worker_killed_mid_job_comes_back_with_the_loaded_classifier(supervisors, demo):
    ref, images, _ = demo
    sup = supervisors()
    assert _load(sup, ref) == ref
    first = sup.pid
    progress: list = []

    def kill_when_loading(p):
        progress.append(p)
        if "Loading the image editor" in p.stage and sup.pid == first:
            os.kill(first, signal.SIGKILL)

    outcome = run_job(lambda c: sup.run(JobSpec("worker_test_jobs:native_sleep", (60,)), c),
                      JobContext(on_progress=kill_when_loading))
    assert outcome.status == "failed" and "killed (SIGKILL)" in outcome.error["message"]
    assert "loads the same models again" in outcome.error["hint"]
    predicted = _predict(sup, images)
    assert predicted.status == "done", predicted.error
    assert predicted.result.classifier_id == ref  # not the settings' / catalog's default
    assert all(p.error is None and p.top5 for p in predicted.result.images)
    assert sup.pid not in (first, None) and sup.loaded() == {"classifier": ref}
    # What the supervisor remembered: role, ref, revision, class names and the options of the first load.
    record = sup._wanted["classifier"]
    assert {"kind", "ref", "revision", "class_names", "options"} <= set(record) and record["model_id"] == ref
    assert record["options"]["device"] == "auto"


def test_a_worker_killed_while_idle_restores_its_classifier_at_once(supervisors, demo):
    ref, images, _ = demo
    states: list = []
    sup = supervisors(on_state_changed=states.append)
    _load(sup, ref)
    first = sup.pid
    os.kill(first, signal.SIGKILL)
    # Nobody runs a job: the new process loads the classifier by itself, and the lists see it again.
    _wait(lambda: sup.pid not in (first, None) and sup.loaded() == {"classifier": ref})
    assert "killed (SIGKILL) while idle" in sup.last_exit.message
    assert [s["status"] for s in states][-2:] == ["restoring", "running"]
    predicted = _predict(sup, images)
    assert predicted.status == "done" and predicted.result.classifier_id == ref


def test_a_restored_classifier_keeps_the_options_of_its_first_load_not_todays_settings(supervisors, demo):
    """Issue 42 §1 with non-default load options: the first load ran in bfloat16 on the CPU (the settings of that
    moment); the settings are then put back to the defaults. The new process must load with the first load's
    options (bfloat16), not with what the settings say now, as a silently different model would be run otherwise."""
    from nemo_desktop.core.store.paths import get_paths
    from nemo_desktop.core.store.settings import load_settings, save_settings

    ref, images, _ = demo
    paths = get_paths()

    def compute(device, dtype):
        settings = load_settings(paths)
        settings.compute.device, settings.compute.dtype = device, dtype
        save_settings(settings, paths)

    compute("cpu", "bfloat16")
    sup = supervisors()
    assert _load(sup, ref) == ref
    dtype = lambda: sup.run(JobSpec("worker_test_jobs:classifier_dtype", ()), JobContext())  # noqa: E731
    assert dtype() == "torch.bfloat16"
    assert sup._wanted["classifier"]["options"]["dtype"] == "bfloat16"
    compute("auto", "auto")  # what a restore must NOT read
    first = sup.pid
    os.kill(first, signal.SIGKILL)
    _wait(lambda: sup.pid not in (first, None) and sup.loaded() == {"classifier": ref})
    assert dtype() == "torch.bfloat16"
    record = sup._wanted["classifier"]
    assert record["options"]["dtype"] == "bfloat16" and record["options"]["device"] == "cpu"
    predicted = _predict(sup, images)
    assert predicted.status == "done" and predicted.result.classifier_id == ref


def test_a_model_that_cannot_be_restored_fails_the_job_naming_it(supervisors, demo, tmp_path):
    ref, images, setup = demo
    sup = supervisors()
    _load(sup, ref)
    moved = tmp_path / "moved-away"
    Path(setup.classifier_dir).rename(moved)  # its weights are gone from where they were loaded
    first = sup.pid
    os.kill(first, signal.SIGKILL)
    _wait(lambda: sup.pid not in (first, None))
    predicted = _predict(sup, images)
    assert predicted.status == "failed"
    message = predicted.error["message"]
    assert f"classifier {ref} could not be loaded again after the model process restarted" in message
    assert "Nothing was run with another model" in message
    assert "vit-b16" not in message and "Hugging Face cache" not in message  # no fallback to the default
    assert sup.loaded() == {} and sup.wanted() == {"classifier": ref}
    assert sup.state()["unrestored"][0][:2] == ("classifier", ref)
    # Once the weights are back, the next new process loads it again (the failure is retried, not remembered).
    moved.rename(setup.classifier_dir)
    second = sup.pid
    os.kill(second, signal.SIGKILL)
    _wait(lambda: sup.pid not in (second, None) and sup.loaded() == {"classifier": ref})
    assert sup.state()["unrestored"] == []
    assert _predict(sup, images).result.classifier_id == ref


def test_a_model_put_as_an_object_is_not_replaced_by_the_default_after_a_restart(supervisors):
    sup = supervisors()
    sup.run(JobSpec("worker_test_jobs:put_model", ("classifier", "in-memory-net")), JobContext())
    first = sup.pid
    os.kill(first, signal.SIGKILL)
    _wait(lambda: sup.pid not in (first, None))
    outcome = _predict(sup, ["/nonexistent.png"])
    assert outcome.status == "failed"
    assert "classifier in-memory-net could not be loaded again" in outcome.error["message"]
    assert "handed to the model process as an object" in outcome.error["message"]


def test_a_worker_that_cannot_start_is_restarted_a_few_times_then_reported_dead(supervisors):
    states: list = []
    sup = supervisors(WorkerConfig(preload=("no_such_module_for_42a",)), restart_limit=3, stable_start_s=30,
                      on_state_changed=states.append)
    sup.start()
    _wait(lambda: sup.dead is not None, timeout=120)
    time.sleep(1.0)  # nothing more is started after it gave up
    assert sup.restarts == 4 and sup.pid is None and not sup.alive
    state = sup.state()
    assert state["status"] == "dead" and states[-1]["status"] == "dead"
    assert "ended 4 times in a row within 30 s of starting" in state["cause"]
    assert "could not start: ModuleNotFoundError: No module named 'no_such_module_for_42a'" in state["cause"]
    assert "Start the model process again" in state["hint"]
    with pytest.raises(WorkerGaveUp) as err:  # a job says so at once, and starts nothing
        sup.run(JobSpec("worker_test_jobs:pid"), JobContext())
    assert "could not start" in err.value.message and sup.pid is None
    sup.start()  # the window's start at first paint does not bring it back either
    assert sup.pid is None
    # The user fixed the cause and asks again.
    sup.config = WorkerConfig()
    sup.revive()
    assert sup.run(JobSpec("worker_test_jobs:pid"), JobContext()) == sup.pid is not None
    assert sup.state()["status"] == "running"


def test_a_worker_that_lived_past_the_stable_start_time_is_always_restarted(supervisors):
    sup = supervisors(restart_limit=1, stable_start_s=0.5)
    for _ in range(3):  # three deaths, each after a stable start: never "dead"
        pid = sup.run(JobSpec("worker_test_jobs:pid"), JobContext())
        time.sleep(0.6)
        os.kill(pid, signal.SIGKILL)
        _wait(lambda: sup.pid not in (pid, None), timeout=60)
    assert sup.dead is None and sup.restarts == 3


def test_the_crash_message_keeps_the_stage_name_as_written():
    err = describe_exit(-signal.SIGKILL, "Image 1 of 2: LGD", "Diagnosing")
    assert "while LGD:" in err.message and "lGD" not in err.message
    loading = describe_exit(-signal.SIGKILL, "Models: Loading the classifier x")
    assert "while loading the classifier x" in loading.message
    assert "while Grad-CAM:" in describe_exit(-signal.SIGKILL, "Image 1 of 2: Grad-CAM").message
    assert "while image 2 of 3:" in describe_exit(-signal.SIGKILL, "Image 2 of 3").message


def test_sigterm_is_described_as_a_termination_not_a_crash():
    err = describe_exit(-signal.SIGTERM, "Models: Loading the classifier x", "Diagnosing")
    assert err.message == ("The model process was terminated (SIGTERM) by another program while loading the "
                           "classifier x.")
    assert "segmentation" not in err.message and "crashed" not in err.message
    assert isinstance(err, NemoError)
