"""Event-time windows as the registry declares them (:class:`~spark_jobs.streams.EventTimeSpec`).

:func:`windowed` gives one row per event and window it falls in: one for each tumbling window spec,
``size / slide`` for each sliding one. Each spec is a select with Spark's own ``window()`` (which keeps
the event-time column's watermark on the ``window`` column, so a grouping by it drops and evicts by
the window's end), and the specs are unioned. The same function runs on a stream (before the
aggregation) and on a batch (the late-data ledger, the batch recount), so both place an event in the
same windows.

Spark's rule for late input of a windowed aggregation (``WatermarkSupport.watermarkExpression``):
a row whose ``window.end <= watermark`` is dropped, where the watermark is the one of the *previous*
micro-batch (``eventTimeWatermarkForLateEvents``; the current batch's evicts state). So an event
behind the watermark still counts while its window is open. :func:`is_late` states that rule.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.streams import EventTimeSpec

WINDOW_KIND = "window_kind"


def windowed(events: DataFrame, event_time: EventTimeSpec, columns: list[str | Column]) -> DataFrame:
    """``columns`` of ``events`` with ``window_kind`` (the spec's name) and ``window`` (Spark's struct of
    ``start``, ``end``), one row per event and window.

    :param events: a batch or streaming DataFrame (with its watermark already set, for a stream).
    :param event_time: the windows and the event-time column.
    :param columns: what else each row keeps.
    """
    if not event_time.windows:
        raise ValueError("the job's event_time declares no windows")
    parts = []
    for spec in event_time.windows:
        window = (F.window(event_time.column, spec.size) if spec.tumbling
                  else F.window(event_time.column, spec.size, spec.slide))
        parts.append(events.select(F.lit(spec.name).alias(WINDOW_KIND), window.alias("window"), *columns))
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def is_late(window: Column, watermark_ms: int) -> Column:
    """Spark's drop rule for a windowed aggregation's input: the window ended at or before the watermark."""
    return window["end"] <= F.timestamp_millis(F.lit(watermark_ms))
