"""The GPU lane in a supervised child process (Qt-free): `protocol` (job specs and messages), `child` (the
worker's main), `supervisor` (the app's side: start, run, cancel with a grace period, restart on death)."""
from nemo_desktop.core.app.worker.protocol import JobSpec, WorkerConfig
from nemo_desktop.core.app.worker.supervisor import (DEFAULT_GRACE_S, RemoteJobError, WorkerDied, WorkerGaveUp,
                                                     WorkerSupervisor, describe_exit)

__all__ = ["DEFAULT_GRACE_S", "JobSpec", "RemoteJobError", "WorkerConfig", "WorkerDied", "WorkerGaveUp",
           "WorkerSupervisor", "describe_exit"]
