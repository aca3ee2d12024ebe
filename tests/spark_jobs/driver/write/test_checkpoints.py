"""A staged insert's commit leaves the table's Delta checkpoint to a thread of the driver."""

from __future__ import annotations

import datetime as dt
import threading

from spark_jobs.driver.write import checkpoints
from spark_jobs.driver.write.delta_writer import TableTarget, _in_list
from spark_jobs.driver.write.staged import staged_insert

DAY = dt.date(2024, 3, 2)
NOON = dt.datetime(2024, 3, 2, 12, 0, tzinfo=dt.UTC)
SCHEMA = "eventID string, date date, eventTime timestamp"


def test_the_commit_that_reaches_the_interval_returns_before_its_checkpoint_is_written(spark, tmp_path, monkeypatch):
    """Version 10 of a table (Delta's default interval) committed by a staged insert: the commit returns with no
    checkpoint written (the thread that writes it is held back here), then the thread writes version 10's, which a
    reader of the table starts from, holding every row once; a table without the hook in its commit."""
    path = tmp_path / "events"
    target = TableTarget("events", path, ("date",), unique_key=("eventID", "date"))
    for i in range(10):  # versions 0-9, Delta's own appends (its hook: no checkpoint before version 10)
        spark.createDataFrame([(f"e{i}", DAY, NOON)], SCHEMA).write.format("delta").mode("append") \
            .partitionBy("date").save(str(path))
    release, write = threading.Event(), checkpoints._write

    def held_back(*args):
        release.wait(60)
        write(*args)

    monkeypatch.setattr(checkpoints, "_write", held_back)
    frame = spark.createDataFrame([("e3", DAY, NOON), ("new", DAY, NOON)], SCHEMA)
    done = staged_insert(spark, target, frame, 0, "query-1:events", [_in_list("date", [DAY])], 100,
                         {"date": [DAY]}, None)
    log_dir = path / "_delta_log"
    assert (done.version, done.inserted, done.left_out) == (10, 1, 1)
    assert not list(log_dir.glob("*.checkpoint.parquet"))
    release.set()
    checkpoints.drain(60)
    assert [p.name for p in log_dir.glob("*.checkpoint.parquet")] == ["00000000000000000010.checkpoint.parquet"]
    assert '"version":10' in (log_dir / "_last_checkpoint").read_text().replace(" ", "")
    rows = spark.read.format("delta").load(str(path)).collect()
    assert sorted(r.eventID for r in rows) == sorted([f"e{i}" for i in range(10)] + ["new"])
