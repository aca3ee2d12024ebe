"""A running streaming query's progress updates, each read once, from the end of the JVM's list.

``StreamingQuery.recentProgress`` converts every update Spark retains (``spark.sql.streaming.numRecentProgressUpdates``,
100 by default) on every call: each update's JSON made in the JVM, sent through py4j and parsed in Python. The
driver's loop (:func:`spark_jobs.driver.runner.run_streaming`) polls five times a second, so reading
``recentProgress`` would spend a long-running driver's CPU re-reading updates it has already seen (the cost is in
docs/benchmarks.md). :class:`NewProgress` walks the list from its end and converts only the updates it has not
returned yet: three py4j calls when nothing is new. PySpark has no such call, hence this module.
"""

from __future__ import annotations

import json

from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.listener import StreamingQueryProgress


class NewProgress:
    """The progress updates of one query that an earlier :meth:`read` did not return.

    :param query: a query of this driver's session (PySpark's classic API: its JVM object is read).
    """

    def __init__(self, query: StreamingQuery) -> None:
        self._query = query
        self._newest = None  # the JVM's newest update returned so far

    def read(self) -> list[StreamingQueryProgress]:
        """The updates Spark reported since the last call, oldest first (all it retains, the first time, or when
        more than it retains came meanwhile)."""
        updates = self._query._jsq.recentProgress()
        newer = []
        for index in range(len(updates) - 1, -1, -1):
            update = updates[index]
            if self._newest is not None and update.equals(self._newest):  # the same JVM object: seen
                break
            newer.append(update)
        if newer:
            self._newest = newer[0]
        return [StreamingQueryProgress.fromJson(json.loads(update.json())) for update in reversed(newer)]
