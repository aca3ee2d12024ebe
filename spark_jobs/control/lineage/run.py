"""One Spark run's lineage over its life: ``START`` once, ``RUNNING`` at most once per interval, one end event.

A streaming query is one OpenLineage run, not one run per micro-batch: a continuous driver that lives for days
writes ``START`` when its query starts, then at most one ``RUNNING`` per interval (``$SPARK_JOBS_LINEAGE_INTERVAL``,
default :data:`DEFAULT_INTERVAL`) carrying the micro-batches, files and rows since the previous event, and
``COMPLETE``, ``FAIL`` or ``ABORT`` (stopped by a signal or a lost lease) at the end. So a driver writes at most
``2 + lifetime / interval`` events: with the default, at most 290 a day for a driver that lives the whole day
(288 ``RUNNING``), and 2 more per restart. An available-now run shorter than the interval writes two.
A ``RUNNING`` event is written only when a batch ends, and only if something was committed since the last event.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable, Mapping

from openlineage.client.event_v2 import RunState

from spark_jobs.control.lineage.emitter import LineageEmitter
from spark_jobs.control.lineage.events import Counts, RunDescription, run_event
from spark_jobs.model.times import duration_seconds

log = logging.getLogger("spark_jobs.lineage")

INTERVAL_ENV = "SPARK_JOBS_LINEAGE_INTERVAL"
DEFAULT_INTERVAL = "5 minutes"


def interval_seconds(environ: Mapping[str, str] | None = None) -> float:
    """The shortest time between two ``RUNNING`` events of a run (``$SPARK_JOBS_LINEAGE_INTERVAL``).

    :raises UsageError: for a value that is not a positive duration, naming the variable.
    """
    environ = os.environ if environ is None else environ
    return duration_seconds(environ.get(INTERVAL_ENV) or DEFAULT_INTERVAL, f"${INTERVAL_ENV}")


class RunLineage:
    """The events of one run, throttled.

    :param emitter: where events go (never blocks).
    :param run: what stays the same across the run's events.
    :param interval: seconds between two ``RUNNING`` events at least.
    :param clock: monotonic seconds (a test's own clock).
    """

    def __init__(self, emitter: LineageEmitter, run: RunDescription, interval: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.emitter = emitter
        self.run = run
        self.interval = interval
        self.clock = clock
        self.total = Counts(rows={table: 0 for table in run.outputs})
        self.window = Counts()
        self.events = 0
        self._last = None
        self._ended = False

    def start(self) -> None:
        self._emit(RunState.START)

    def batch(self, files: int, rows: Mapping[str, int]) -> None:
        """A committed micro-batch: counted; a ``RUNNING`` event when the interval has passed since the last."""
        self.total.add(files, rows)
        self.window.add(files, rows)
        if self._last is not None and self.clock() - self._last >= self.interval:
            self._emit(RunState.RUNNING)

    def finish(self, state: RunState, error: str | None = None) -> None:
        """The run's end event (once): ``COMPLETE``, ``FAIL`` (with the error) or ``ABORT``."""
        if self._ended:
            return
        self._ended = True
        self._emit(state, error)

    def _emit(self, state: RunState, error: str | None = None) -> None:
        try:
            event = run_event(self.run, state, self.total, self.window, error=error)
        except Exception as exc:  # noqa: BLE001 - lineage never fails a run
            log.warning("lineage: could not build the %s event of %s: %s", state.value, self.run.job_name, exc)
            return
        self.emitter.emit(event)
        self.events += 1
        self._last = self.clock()
        self.window = Counts()
