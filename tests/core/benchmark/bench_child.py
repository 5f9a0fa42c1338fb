"""Child process for the kill -9 test (run as a script, not collected by pytest): registers the benchmark
test doubles (the model family 'test-double' and the method 'fixed'), then runs the real `nemo` command line
with its arguments."""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from bench_world import register_doubles  # noqa: E402
from nemo_desktop.cli.main import main  # noqa: E402

# The driver checks the whole config before it starts a worker, so it knows the plug-ins the workers use: the
# model doubles and the method double, registered here as in every worker (ray_backend's docstring).
register_doubles()

if os.environ.get("NEMO_TEST_RAY_ADDRESS"):  # join the test's Ray cluster, the doubles registered in its workers
    import ray

    ray.init(address=os.environ["NEMO_TEST_RAY_ADDRESS"], log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "HF_HUB_OFFLINE": "1"},
                          "worker_process_setup_hook": "bench_world.register_doubles"})

sys.exit(main(sys.argv[1:]))
