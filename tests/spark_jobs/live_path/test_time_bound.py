"""The live path's MERGE bounded by its files' delivery times: one row per eventID whoever wrote a key first.

Each test drives the job's own write path (:func:`spark_jobs.driver.write.write_batch`) in the session's
SparkSession with hand-made CloudTrail deliveries, as two writers of one lake: the live job and a backfill
(each its own app id, as each has its own checkpoint). The drivers killed mid-batch are in
``tests/spark_jobs/live_path/test_random_kills.py`` and three writers at once in
``tests/spark_jobs/cli/test_backfill_overlap.py``: their files carry delivery times, so they take this path.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.model.lake import Lake
from tests.helpers.cloudtrail import JOB, dated_delivery
from tests.helpers.delta_log import merge_commits

EVENTS, QUARANTINE = "cloudtrail_events", "cloudtrail_quarantine"
DAY = dt.datetime(2024, 3, 2, tzinfo=dt.UTC)


def _record(event_id: str, moment: dt.datetime) -> dict:
    return {"eventVersion": "1.08", "eventID": event_id, "eventTime": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "eventSource": "ec2.amazonaws.com", "eventName": "DescribeInstances", "awsRegion": "eu-west-1",
            "recipientAccountId": "111122223333", "userIdentity": {"type": "IAMUser", "accountId": "111122223333"}}


def _events(prefix: str, count: int, last: dt.datetime) -> list[dict]:
    """``count`` events, one every 10 seconds up to ``last``."""
    return [_record(f"{prefix}-{i:03d}", last - dt.timedelta(seconds=10 * (count - 1 - i))) for i in range(count)]


@pytest.fixture
def lake_writers(spark, tmp_path):
    """``(write, lake)``: ``write(writer, batch_id, *paths)`` runs the job's write path for a batch of those files
    as the ``live`` or the ``backfill`` writer."""
    from spark_jobs.driver.job_modules import job_module, output_schemas, table_targets
    from spark_jobs.driver.write import write_batch
    from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, create_tables

    lake = Lake(tmp_path / "lake")
    module, targets = job_module(JOB), table_targets(JOB, lake)
    create_tables(spark, targets, output_schemas(spark, JOB))
    writers = {name: ExactlyOnceWriter(spark, targets, name) for name in ("live", "backfill")}

    def write(writer: str, batch_id: int, *paths: Path):
        files = spark.read.format("binaryFile").load([str(p) for p in paths])
        return write_batch(files, batch_id, job=JOB, module=module, writer=writers[writer], targets=targets)

    return write, lake


def test_keys_first_written_by_either_writer_then_delivered_by_the_other_stay_one_row(tmp_path, lake_writers, tables):
    write, lake = lake_writers
    landing = tmp_path / "landing"
    ten = DAY + dt.timedelta(hours=10)
    backfilled = _events("bf", 30, ten - dt.timedelta(minutes=3))
    live_new, later_new = _events("live", 10, ten + dt.timedelta(minutes=3)), _events("late", 8, ten + dt.timedelta(minutes=8))
    # The backfill writes first; the live job then gets a third of those events again, with ten new ones.
    first = write("backfill", 0, dated_delivery(landing / "b", ten, backfilled, "B0"))
    assert (first.plan, first.rows) == ("pipelined", {EVENTS: 30, QUARANTINE: 0})
    second = write("live", 0, dated_delivery(landing / "l", ten + dt.timedelta(minutes=5), backfilled[::3] + live_new, "L0"))
    assert (second.plan, second.rows) == ("pipelined", {EVENTS: 10, QUARANTINE: 0})
    # The reverse: the live job first, the backfill then delivers those events with others.
    third = write("live", 1, dated_delivery(landing / "l", ten + dt.timedelta(minutes=10), later_new, "L1"))
    fourth = write("backfill", 1, dated_delivery(landing / "b", ten + dt.timedelta(minutes=12),
                                            later_new[:5] + live_new[::2] + _events("bf2", 4, ten + dt.timedelta(minutes=11)), "B1"))
    assert (third.rows[EVENTS], fourth.rows[EVENTS]) == (8, 4)
    # Each of these was one MERGE per batch, the table's side bounded by the files' delivery dates and times
    # (20 minutes before the first file's, 5 after the last's): Delta reads only the files of that time.
    merges = merge_commits(lake.table_path(EVENTS))
    assert [m["app"] for m in merges] == [f"{w}:{EVENTS}" for w in ("backfill", "live", "live", "backfill")]
    assert "eventTime#" in merges[1]["predicate"] and ">= 2024-03-02 09:45:00" in merges[1]["predicate"]
    assert "<= 2024-03-02 10:10:59.999999" in merges[1]["predicate"]
    assert "date#" in merges[1]["predicate"] and "2024-03-01,2024-03-02" in merges[1]["predicate"]
    events = tables(lake.root)[EVENTS]
    expected = {r["eventID"] for r in backfilled + live_new + later_new} | {f"bf2-{i:03d}" for i in range(4)}
    assert Counter(r.eventID for r in events.select("eventID").collect()) == Counter(expected)


def test_a_file_delivered_again_a_day_later_and_a_late_event_go_the_cached_way_and_add_nothing(
        tmp_path, lake_writers, tables):
    """Rows outside the batch's delivery times (a day-old file under a new name, an event three hours late)
    are left by the one pass and merged bounded by dates only, under the ``:rest`` app id: still one row each."""
    write, lake = lake_writers
    landing = tmp_path / "landing"
    ten = DAY + dt.timedelta(hours=10)
    events = _events("ev", 20, ten - dt.timedelta(minutes=2))
    original = dated_delivery(landing / "a", ten, events, "A0")
    assert write("live", 0, original).rows[EVENTS] == 20
    # The same bytes under a new name, delivered a day later (its events' date is the day before: in the date bound).
    again = dated_delivery(landing / "a", ten + dt.timedelta(days=1), [], "A1")
    again.write_bytes(original.read_bytes())
    redelivered = write("live", 1, again)
    assert (redelivered.plan, redelivered.rows, redelivered.carried) == \
        ("pipelined", {EVENTS: 0, QUARANTINE: 0}, {EVENTS: 20, QUARANTINE: 0})
    # A file at 13:00 with one new event and an event of 09:58 (written at 10:00 already) delivered late, and
    # one late event nobody has.
    thirteen = ten + dt.timedelta(hours=3)
    late = write("backfill", 0, dated_delivery(landing / "a", thirteen, [
        _record("new-1", thirteen - dt.timedelta(minutes=1)), events[-1],
        _record("late-1", ten - dt.timedelta(minutes=30))], "A2"))
    assert (late.plan, late.rows[EVENTS]) == ("pipelined", 2)
    merges = merge_commits(lake.table_path(EVENTS))
    assert [m["app"] for m in merges] == ["live:" + EVENTS, "live:" + EVENTS, f"live:{EVENTS}:rest",
                                          "backfill:" + EVENTS, f"backfill:{EVENTS}:rest"]
    assert "eventTime" not in merges[2]["predicate"] and "eventTime" not in merges[4]["predicate"]
    got = Counter(r.eventID for r in tables(lake.root)[EVENTS].select("eventID").collect())
    assert got == Counter([r["eventID"] for r in events] + ["new-1", "late-1"])


def test_lake_optimize_leaves_each_file_a_stretch_of_event_time(spark, tmp_path, lake_writers, tables):
    """Live batches of interleaved times, compacted: the files' eventTime ranges do not overlap (Z-order by
    ``eventTime``, the registry's, with the file size cap of a time-bound table)."""
    from spark_jobs.driver.lake_tools import optimize

    write, lake = lake_writers
    landing = tmp_path / "landing"
    for batch in range(2):  # each batch: events of 08:00, 12:00 and 16:00 (+ batch minutes), so files overlap
        records = [r for hour in (8, 12, 16) for r in _events(f"b{batch}h{hour}", 40, DAY + dt.timedelta(
            hours=hour, minutes=batch * 10))]
        write("backfill", batch, dated_delivery(landing, DAY + dt.timedelta(hours=17), records, f"C{batch}"))
    before = tables(lake.root)[EVENTS].count()
    spec = next(t for t in JOB.tables if t.name == EVENTS)
    assert spec.zorder_by == ("eventTime",)
    size = sum(p.stat().st_size for p in lake.table_path(EVENTS).rglob("*.parquet"))
    result = optimize(spark, lake, spec, time_ordered_file_bytes=size // 8)
    assert result["zorder_by"] == ["eventTime"] and result["files_added"] >= 3
    ranges = sorted((s["minValues"]["eventTime"], s["maxValues"]["eventTime"]) for s in _live_file_stats(lake))
    assert len(ranges) == result["files_added"]
    assert all(earlier[1] <= later[0] for earlier, later in zip(ranges, ranges[1:])), ranges
    assert tables(lake.root)[EVENTS].count() == before


def _live_file_stats(lake: Lake) -> list[dict]:
    """The statistics of the files of the table's newest version (from its log: adds not removed)."""
    added, removed = {}, set()
    for commit in sorted((lake.table_path(EVENTS) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                added[action["add"]["path"]] = json.loads(action["add"]["stats"])
            if "remove" in action:
                removed.add(action["remove"]["path"])
    return [stats for path, stats in added.items() if path not in removed]
