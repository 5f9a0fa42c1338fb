"""Install the test network guard in Python child processes started by tests.

conftest.py puts this folder first on PYTHONPATH and sets NEMO_TEST_NETWORK_GUARD=1, so every interpreter a
test starts (CLI runs, worker scripts, `python -c ...`) imports this at start-up, before any user code.
Outside the test suite the variable is unset and nothing happens.
"""
import os

if os.environ.get("NEMO_TEST_NETWORK_GUARD") == "1":
    import network_guard

    network_guard.install()
