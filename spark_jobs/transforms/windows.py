"""Event-time windows as the registry declares them (:class:`~spark_jobs.model.streams.EventTimeSpec`).

:func:`windowed` gives one row per event and window it falls in: one for each tumbling window spec,
``size / slide`` for each sliding one, the windows Spark's ``window()`` gives (epoch-aligned, start
inclusive, end exclusive). It is one ``select`` with an ``explode``, not a union of one ``window()``
select per spec: in a streaming query every branch of a union reads the source again as a source of
its own (its own offsets in the checkpoint, and a commit landing between their planning would put
it in different micro-batches), and Spark allows one ``window()`` per select. So the window struct
gets the event-time column's watermark metadata the way Spark's ``window()`` gives it
(``spark.watermarkDelayMs`` on the column): grouping by it drops late input and evicts state by the
window's end. The same function runs on a stream (before the aggregation) and on a batch (the
late-data ledger, the batch recount), so both place an event in the same windows.

Spark's rule for late input of a windowed aggregation (``WatermarkSupport.watermarkExpression``):
a row whose ``window.end <= watermark`` is dropped, where the watermark is the one of the *previous*
micro-batch (``eventTimeWatermarkForLateEvents``; the current batch's evicts state). So an event
behind the watermark still counts while its window is open. :func:`is_late` states that rule.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.model.streams import EventTimeSpec, duration_seconds

WINDOW_KIND = "window_kind"
# The column metadata Spark's EventTimeWatermark puts on a watermarked column (EventTimeWatermark.delayKey).
WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"


def _micros(text: str) -> int:
    return int(round(duration_seconds(text) * 1_000_000))


def window_structs(event_time: EventTimeSpec) -> Column:
    """An array of (``window_kind``, ``window``) structs: every window of every spec the event falls in."""
    if not event_time.windows:
        raise ValueError("the job's event_time declares no windows")
    at = F.unix_micros(F.col(event_time.column))
    items = []
    for spec in event_time.windows:
        size = _micros(spec.size)
        slide = size if spec.tumbling else _micros(spec.slide)
        if size % slide:
            raise ValueError(f"window {spec.name}: its size {spec.size} is not a whole number of slides ({spec.slide})")
        last = at - F.pmod(at, F.lit(slide))
        for k in range(size // slide):
            start = last - F.lit(k * slide)
            items.append(F.struct(F.lit(spec.name).alias(WINDOW_KIND), F.struct(
                F.timestamp_micros(start).alias("start"), F.timestamp_micros(start + F.lit(size)).alias("end"))
                .alias("window")))
    return F.array(*items)


def windowed(events: DataFrame, event_time: EventTimeSpec, columns: list[str]) -> DataFrame:
    """``columns`` of ``events`` with ``window_kind`` (the spec's name) and ``window`` (``start``, ``end``),
    one row per event and window; ``window`` carries the watermark metadata of ``event_time``.

    :param events: a batch or streaming DataFrame (with its watermark already set, for a stream).
    :param event_time: the windows, the event-time column and the watermark delay.
    :param columns: the names of the columns each row keeps.
    """
    delay_ms = int(duration_seconds(event_time.watermark_delay) * 1000)
    return (events.select(*columns, F.explode(window_structs(event_time)).alias("_w"))
            .select(*columns, F.col("_w").getField(WINDOW_KIND).alias(WINDOW_KIND),
                    F.col("_w").getField("window").alias("window", metadata={WATERMARK_DELAY_KEY: delay_ms})))


def is_late(window: Column, watermark_ms: int) -> Column:
    """Spark's drop rule for a windowed aggregation's input: the window ended at or before the watermark."""
    return window["end"] <= F.timestamp_millis(F.lit(watermark_ms))
