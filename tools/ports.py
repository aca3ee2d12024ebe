"""A free TCP port for the local servers the tools start (the test Kafka broker, a standalone Spark cluster)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now on ``host`` (the OS's choice)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]
