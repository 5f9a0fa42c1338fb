import os
import socket
import subprocess
import sys

import pytest

from network_guard import NetworkAccessInTest


def test_non_loopback_connect_is_refused():
    s = socket.socket()
    try:
        with pytest.raises(NetworkAccessInTest):
            s.connect(("93.184.216.34", 80))
    finally:
        s.close()


def test_hostname_resolution_is_refused():
    with pytest.raises(NetworkAccessInTest):
        socket.getaddrinfo("huggingface.co", 443)


def test_loopback_is_allowed():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = socket.socket()
    try:
        c.connect(srv.getsockname())
    finally:
        c.close()
        srv.close()


def test_hostname_lookups_by_name_are_refused():
    with pytest.raises(NetworkAccessInTest):
        socket.gethostbyname("huggingface.co")
    with pytest.raises(NetworkAccessInTest):
        socket.gethostbyname_ex("huggingface.co")
    assert socket.gethostbyname("localhost").startswith("127.")


def test_python_child_processes_are_guarded_too():
    code = "import socket; socket.create_connection(('93.184.216.34', 80), timeout=1)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "NetworkAccessInTest: test tried to resolve a network host: '93.184.216.34'" in proc.stderr


def test_the_child_guard_is_off_without_its_variable():
    code = "import socket; print(socket.getaddrinfo.__module__)"
    env = {k: v for k, v in os.environ.items() if k != "NEMO_TEST_NETWORK_GUARD"}
    unguarded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    guarded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (unguarded.stdout.strip(), guarded.stdout.strip()) == ("socket", "network_guard")
