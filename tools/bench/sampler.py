"""A thread that samples processes while a ``with`` block runs, and ``/proc`` reads for it.

Kept free of pyspark: the launch parts sample spark-submit process trees from a plain Python.
"""

from __future__ import annotations

import threading
from pathlib import Path


def status_kb(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` field in kB (``VmHWM``: the peak resident set); 0 if the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class BackgroundSampler:
    """Calls :meth:`sample` every ``interval`` seconds in a daemon thread while the ``with`` block runs.

    :param interval: seconds between samples.
    :param name: the thread's name.
    """

    def __init__(self, interval: float, name: str) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> bool:
        """Take one sample; ``False`` ends the sampling (what it samples is gone)."""
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if self.sample() is False:
                return
