"""Free TCP ports on 127.0.0.1, for the tests and the benchmarks that start servers."""

from __future__ import annotations

import socket

_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now and not handed out before in this process.

    The kernel may offer a just-closed port again, so two calls in a row could otherwise
    name the same port for gRPC and HTTP.
    """
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
