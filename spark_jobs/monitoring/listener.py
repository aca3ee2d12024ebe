"""The driver's side of the progress history: Spark's progress events into a :class:`ProgressRecorder`.

A ``StreamingQueryListener`` receives each ``QueryProgressEvent`` with the typed progress object
Spark built from the JVM's (full-precision rates; ``query.recentProgress`` goes through the progress
JSON, which rounds rates to one decimal: 0.6676 files/s becomes 0.7). Events arrive on Spark's
listener bus, asynchronously, never on the query's thread; :meth:`ProgressHistory.close` waits (a
bounded time) until the events of every batch the run executed have arrived, then writes the rest.

This module imports pyspark: only the driver uses it (Airflow reads the table with delta-rs).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from spark_jobs.monitoring.progress import ProgressRecorder, executed

log = logging.getLogger("spark_jobs.monitoring")


class _Listener(StreamingQueryListener):
    def __init__(self, history: "ProgressHistory") -> None:
        self.history = history

    def onQueryStarted(self, event) -> None:  # noqa: N802 - Spark's API
        pass

    def onQueryProgress(self, event) -> None:  # noqa: N802
        self.history.take(event.progress)

    def onQueryIdle(self, event) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: N802
        pass


class ProgressHistory:
    """Records every executed micro-batch of the query named ``name`` while registered on ``spark``.

    :param spark: the driver's session (the listener is registered on its query manager).
    :param name: the query's name (the stream: ``job`` or ``job@writer``).
    :param recorder: where the rows go.
    :param batch_rows: called with a batch id once its progress arrived: (rows carried per table,
        rows inserted per table, input files), each None when unknown.
    """

    def __init__(self, spark: SparkSession, name: str, recorder: ProgressRecorder,
                 batch_rows: Callable[[int], tuple]) -> None:
        self.spark = spark
        self.name = name
        self.recorder = recorder
        self.batch_rows = batch_rows
        self.last_recorded = -1
        self._arrived = threading.Condition()
        self._listener = _Listener(self)
        spark.streams.addListener(self._listener)

    def take(self, progress) -> None:
        if progress.name != self.name or not executed(progress) or progress.batchId <= self.last_recorded:
            return
        carried, inserted, files = self.batch_rows(progress.batchId)
        self.recorder.record(progress, rows=carried, rows_inserted=inserted, input_files=files)
        with self._arrived:
            self.last_recorded = progress.batchId
            self._arrived.notify_all()

    def close(self, last_batch: int, timeout: float = 30.0) -> None:
        """Wait until batch ``last_batch``'s progress arrived (at most ``timeout`` s), then stop
        listening and write every buffered row."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while self.last_recorded < last_batch and time.monotonic() < deadline:
                self._arrived.wait(max(0.0, deadline - time.monotonic()))
        if self.last_recorded < last_batch:
            log.warning("progress history of %s: no progress event of batch %d after %.0f s; its row is missing",
                        self.name, last_batch, timeout)
        try:
            self.spark.streams.removeListener(self._listener)
        except Exception as error:  # noqa: BLE001 - a stopped session: nothing to remove
            log.debug("could not remove the progress listener: %s", error)
        self.recorder.close()
