"""The windows of the registry's event-time spec: the ones Spark's window() gives, from one select."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from pyspark.sql import functions as F

from tools.sample_events import windows_of
from spark_jobs.transforms.windows import WATERMARK_DELAY_KEY, windowed
from spark_jobs.registry import get_job

EVENT_TIME = get_job("cloudtrail_activity").event_time


def test_windowed_gives_sparks_tumbling_and_sliding_windows_and_the_watermark_metadata(spark):
    rng = random.Random(3)
    base = datetime(2024, 3, 4, tzinfo=UTC)
    times = [base + timedelta(seconds=rng.randrange(86400), microseconds=rng.randrange(10**6)) for _ in range(200)]
    times += [base + timedelta(minutes=15), base + timedelta(hours=1)]  # on a boundary: start inclusive
    events = spark.createDataFrame([(str(i), t) for i, t in enumerate(times)], "eventID string, eventTime timestamp")

    ours = windowed(events, EVENT_TIME, ["eventID"])
    got = {(r["eventID"], r["window_kind"], r["window"]["start"], r["window"]["end"]) for r in ours.collect()}
    tumbling, sliding = EVENT_TIME.windows
    sparks = events.select("eventID", F.lit(tumbling.name).alias("kind"), F.window("eventTime", tumbling.size).alias("w")) \
        .unionByName(events.select("eventID", F.lit(sliding.name).alias("kind"),
                                   F.window("eventTime", sliding.size, sliding.slide).alias("w")))
    expected = {(r["eventID"], r["kind"], r["w"]["start"], r["w"]["end"]) for r in sparks.collect()}
    assert got == expected and len(got) == len(times) * (1 + 4)
    python = {(str(i), kind, start.replace(tzinfo=None), end.replace(tzinfo=None))
              for i, t in enumerate(times) for kind, start, end in windows_of(t, EVENT_TIME)}
    assert python == expected  # the generator's reference implementation agrees
    assert ours.schema["window"].metadata == {WATERMARK_DELAY_KEY: 30 * 60 * 1000}
