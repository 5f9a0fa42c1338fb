"""Refuse every non-loopback connection or name lookup made by a test.

Installed in the pytest process by conftest.py, and in every Python child process a test starts by
sitecustomize.py (conftest puts this folder on PYTHONPATH and sets NEMO_TEST_NETWORK_GUARD=1).
"""
from __future__ import annotations

import ipaddress
import socket


class NetworkAccessInTest(RuntimeError):
    pass


def _is_local(host) -> bool:
    if host is None:
        return True
    host = host.decode("ascii", "replace") if isinstance(host, (bytes, bytearray)) else str(host)
    if host in ("localhost", "") or host.startswith("/"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo
_real_gethostbyname = socket.gethostbyname
_real_gethostbyname_ex = socket.gethostbyname_ex


def _guard_address(address):
    if isinstance(address, tuple) and not _is_local(address[0]):
        raise NetworkAccessInTest(f"test tried to reach the network: {address!r}")


def _connect(self, address):
    _guard_address(address)
    return _real_connect(self, address)


def _connect_ex(self, address):
    _guard_address(address)
    return _real_connect_ex(self, address)


def _guard_lookup(host) -> None:
    if not _is_local(host):
        raise NetworkAccessInTest(f"test tried to resolve a network host: {host!r}")


def _getaddrinfo(host, *args, **kwargs):
    _guard_lookup(host)
    return _real_getaddrinfo(host, *args, **kwargs)


def _gethostbyname(host):
    _guard_lookup(host)
    return _real_gethostbyname(host)


def _gethostbyname_ex(host):
    _guard_lookup(host)
    return _real_gethostbyname_ex(host)


def install() -> None:
    socket.socket.connect = _connect
    socket.socket.connect_ex = _connect_ex
    socket.getaddrinfo = _getaddrinfo
    socket.gethostbyname = _gethostbyname
    socket.gethostbyname_ex = _gethostbyname_ex
