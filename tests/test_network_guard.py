import socket

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
