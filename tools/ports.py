"""Free TCP ports on 127.0.0.1 for the local servers the tools start: the test Kafka broker, a standalone Spark
cluster, the S3 server, and Airflow (whose API server, worker log server and triggerer log server take a run of
three consecutive ports).

Each port handed out is also reserved until this process ends (an exclusive lock on a file under the system's
temp folder): two processes picking ports at once (the test suite's two workers) never get the same one, even
before either server has bound it.
"""

from __future__ import annotations

import fcntl
import socket
import tempfile
from pathlib import Path

# port -> the open lock file that reserves it for this process
_RESERVED: dict[int, object] = {}
_RESERVATIONS = Path(tempfile.gettempdir()) / "local-server-ports"


def in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something listens on ``host:port``."""
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) == 0


def _reserve(port: int) -> bool:
    if port in _RESERVED:
        return False
    _RESERVATIONS.mkdir(exist_ok=True)
    handle = (_RESERVATIONS / f"{port}.lock").open("w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return False
    _RESERVED[port] = handle
    return True


def free_port(host: str = "127.0.0.1", *, start: int | None = None, run: int = 1) -> int:
    """A free port on ``host``, reserved for this process.

    :param start: look from this port up (in steps of ``run``); ``None``: the OS's choice.
    :param run: how many consecutive ports from the one returned must be free (Airflow: 3).
    :raises RuntimeError: when none is free in the 900 ports from ``start``.
    """
    if start is None and run == 1:
        while True:
            with socket.socket() as probe:
                probe.bind((host, 0))
                port = probe.getsockname()[1]
            if _reserve(port):
                return port
    first = start or 28080
    for port in range(first, first + 900, run):
        if not any(in_use(p, host) for p in range(port, port + run)) and _reserve(port):
            return port
    raise RuntimeError(f"no {run} free consecutive ports on {host} in {first}-{first + 900}")
