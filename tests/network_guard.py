"""Refuse every non-loopback connection or name lookup made by a test (imported by conftest)."""
from __future__ import annotations

import ipaddress
import socket


class NetworkAccessInTest(RuntimeError):
    pass


def _is_local(host) -> bool:
    if host is None:
        return True
    host = str(host)
    if host in ("localhost", "") or host.startswith("/"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _guard_address(address):
    if isinstance(address, tuple) and not _is_local(address[0]):
        raise NetworkAccessInTest(f"test tried to reach the network: {address!r}")


def _connect(self, address):
    _guard_address(address)
    return _real_connect(self, address)


def _connect_ex(self, address):
    _guard_address(address)
    return _real_connect_ex(self, address)


def _getaddrinfo(host, *args, **kwargs):
    if not _is_local(host):
        raise NetworkAccessInTest(f"test tried to resolve a network host: {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


def install() -> None:
    socket.socket.connect = _connect
    socket.socket.connect_ex = _connect_ex
    socket.getaddrinfo = _getaddrinfo
