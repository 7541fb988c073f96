"""Free and busy TCP ports on this machine (the kernel's picks), for services and tests."""

from __future__ import annotations

import errno
import socket

__all__ = ["free_port", "free_ports", "port_in_use"]


def port_in_use(host: str, port: int) -> bool:
    """``True`` if something already listens on (or holds) ``host:port``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def free_ports(count: int, host: str = "127.0.0.1") -> tuple[int, ...]:
    """``count`` distinct TCP ports on ``host`` that nothing listens on right now (the kernel's
    picks, all held open together so that none is picked twice)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    socks = [socket.socket(family, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in socks:
            s.bind((host, 0))
        return tuple(int(s.getsockname()[1]) for s in socks)
    finally:
        for s in socks:
            s.close()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (the kernel's pick)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
    return port
