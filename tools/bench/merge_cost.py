"""What one-row-per-eventID costs per live micro-batch as ``cloudtrail_events`` grows.

Usage::

    python -m tools.bench.merge_cost [--sizes 100000,1000000,10000000] [--batch 1000] [--days 1] [--repeat 3]

For each table size, a table of ``cloudtrail_events``' schema holding that many events spread evenly
over ``--days`` daily partitions (the last day is ``2024-03-30``) is built once and kept under
``.spark/bench/live_tables/`` (keyed by its parameters: a 10M-event table takes minutes to build). Its
files each hold a stretch of event time, as the live job's appends and ``lake optimize`` (which
Z-orders the table by ``eventTime``) leave them. Each measurement works on a shallow clone of it (Delta's
``SHALLOW CLONE``: the clone's log names the base's files), so the base is never written.

The batches are real CloudTrail files of ``--batch`` events each (real records with fresh eventIDs,
delivered at noon of the last day, 5 minutes apart, each event up to 10 minutes before its file), with
2% of each file's events redeliveries of events the table holds (same eventID and eventTime) and 2%
delivered twice within the file. Each batch goes through the job's own write path,
:func:`spark_jobs.driver.write.write_batch` on the file's ``binaryFile`` row (the plan it picks is
checked to be ``pipelined``), once as the registry declares the table (the MERGE bounded by the files'
delivery dates and times) and once without the time bound (dates only: the path before), each on its
own clone of the base, taking turns batch by batch in one process. The rows inserted are checked exactly. The first batch
of each is a warm-up. Beside them, how many of the table's files a batch's MERGE reads under each bound
(Delta's own data skipping, through ``inputFiles``), and their rows: the part of the cost the load of a
shared machine does not blur. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import logging
import os
import random
import shutil
import statistics
import time
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT, Lake

log = logging.getLogger("tools.bench")

LAST_DAY = dt.date(2024, 3, 30)
TABLE = "cloudtrail_events"
TABLES_ROOT = PROJECT_ROOT / ".spark" / "bench" / "live_tables"
WORK_ROOT = PROJECT_ROOT / ".spark" / "bench" / "merge_cost"
# Events per file of the built table: what `lake optimize` leaves at its file size for this table's rows.
ROWS_PER_FILE = 250_000
TABLE_LAYOUT_VERSION = 1  # change when the way the table is built changes: the cached tables are rebuilt
REDELIVERED, TWICE = 0.02, 0.02
PLANS = ("time_bound", "date_bound")
GOAL_RATIO = 1.3  # the largest table's batch time to the smallest's (issue 27, goal 1)


def base_event_id(index: int) -> str:
    return f"base-{index:012d}"


def base_event_time(index: int, size: int, days: int, last_day: dt.date = LAST_DAY) -> dt.datetime:
    """The eventTime of the built table's event ``index`` (spread evenly over the days; whole microseconds)."""
    start = dt.datetime.combine(last_day - dt.timedelta(days=days - 1), dt.time(), dt.UTC)
    return start + dt.timedelta(microseconds=(index * days * 86_400_000_000) // size)


def build_table(spark, size: int, days: int, rows_per_file: int = ROWS_PER_FILE, last_day: dt.date = LAST_DAY) -> Path:
    """The cached table of ``size`` events (built on first use): its lake root.

    :param last_day: the last day of the table's events (another day is another cached table).
    """
    from pyspark.sql import functions as F

    from spark_jobs.driver.job_modules import output_schemas, table_targets
    from spark_jobs.driver.write.delta_writer import create_tables
    from spark_jobs.registry import get_job

    params = {"size": size, "days": days, "rows_per_file": rows_per_file, "layout": TABLE_LAYOUT_VERSION}
    suffix = ""  # the default day's tables keep the names (and params) they were cached under
    if last_day != LAST_DAY:
        params["last_day"], suffix = last_day.isoformat(), f"-{last_day:%Y%m%d}"
    root = TABLES_ROOT / f"events-{size}-d{days}-f{rows_per_file}-v{TABLE_LAYOUT_VERSION}{suffix}"
    marker = root / "bench-table.json"
    if marker.is_file() and json.loads(marker.read_text()).get("params") == params:
        return root
    shutil.rmtree(root, ignore_errors=True)
    started = time.monotonic()
    job = get_job("cloudtrail_etl")
    schemas = output_schemas(spark, job)
    targets = table_targets(job, Lake(root))
    create_tables(spark, [t for t in targets if t.name == TABLE], schemas)
    start_us = int(base_event_time(0, size, days, last_day).timestamp() * 1_000_000)
    span_us = days * 86_400_000_000
    ids = spark.range(size)
    micros = F.lit(start_us) + F.floor(F.col("id") * F.lit(span_us) / F.lit(size)).cast("long")
    rows = ids.select(
        F.timestamp_micros(micros).alias("eventTime"), F.col("id"),
        F.concat(F.lit("base-"), F.lpad(F.col("id").cast("string"), 12, "0")).alias("eventID"),
        F.lit("ec2.amazonaws.com").alias("eventSource"), F.lit("DescribeInstances").alias("eventName"),
        F.lit("eu-west-1").alias("awsRegion"), F.lit("111122223333").alias("recipientAccountId"),
        F.concat(F.lit("file:/landing/base-"), (F.col("id") % 1000).cast("string"), F.lit(".json.gz")).alias("_source_file"),
        F.col("id").alias("_record_index")).withColumn("date", F.to_date("eventTime"))
    schema = schemas[TABLE]
    frame = rows.select(*[F.col(f.name).cast(f.dataType) if f.name in rows.columns
                          else F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])
    files = max(1, -(-size // rows_per_file))
    # Each file a stretch of event time, in time order within it: the layout live appends and a Z-order by
    # eventTime leave.
    (frame.repartitionByRange(files, "eventTime").sortWithinPartitions("eventTime")
     .write.format("delta").mode("append").save(str(Lake(root).table_path(TABLE))))
    marker.write_text(json.dumps({"params": params, "seconds": round(time.monotonic() - started, 1)}))
    return root


def write_batches(folder: Path, count: int, batch: int, sizes: list[int], days: int, seed: int = 27) -> list[dict]:
    """``count`` CloudTrail files of ``batch`` events each, as described in the module docstring (rewritten
    every run: they are small). Redelivered events are events every table size holds (indexes below
    the smallest size, mapped to each size's eventTime by :func:`base_event_time`; the redeliveries are
    picked among those the smallest table holds near the file's time).

    :returns: per file, its path and the events it carries that are new.
    """
    import gzip

    from tools.bench.data import RecordSource

    shutil.rmtree(folder, ignore_errors=True)
    rng = random.Random(seed)
    source = RecordSource()
    smallest = min(sizes)
    files = []
    for i in range(count):
        delivered = dt.datetime.combine(LAST_DAY, dt.time(12), dt.UTC) + dt.timedelta(minutes=5 * i)
        records = source.records(rng, batch, delivered - dt.timedelta(minutes=10))
        redelivered = int(batch * REDELIVERED)
        # Events the table holds whose time (at every size) is within this file's 10 minutes: the smallest
        # table's indexes there; the same index is an event of every larger table only if its time matches
        # there too, so redeliveries are made per size (see ``per_size``).
        picks = rng.sample(range(batch), redelivered + int(batch * TWICE))
        per_size = {}
        for size in sizes:
            first = _index_at(delivered - dt.timedelta(minutes=10), size, days)
            chosen = [first + k * max(1, (size // smallest)) for k in range(redelivered)]
            per_size[size] = [(base_event_id(n), _iso(base_event_time(n, size, days))) for n in chosen]
        twice = [dict(records[p]) for p in picks[redelivered:]]
        files.append({"delivered": delivered, "records": records, "redelivered_slots": picks[:redelivered],
                      "twice": twice, "per_size": per_size})
    out = []
    for i, f in enumerate(files):
        for size in sizes:
            records = [dict(r) for r in f["records"]]
            for slot, (event_id, event_time) in zip(f["redelivered_slots"], f["per_size"][size]):
                records[slot].update(eventID=event_id, eventTime=event_time)
            day = folder / str(size) / f"{f['delivered']:%Y/%m/%d}"
            day.mkdir(parents=True, exist_ok=True)
            path = day / f"111122223333_CloudTrail_eu-west-1_{f['delivered']:%Y%m%dT%H%MZ}_b{i:03d}.json.gz"
            path.write_bytes(gzip.compress(json.dumps({"Records": records + f["twice"]}).encode()))
            out.append({"size": size, "index": i, "path": str(path),
                        "new": len({r["eventID"] for r in records}) - len(f["redelivered_slots"])})
    return out


def _index_at(moment: dt.datetime, size: int, days: int) -> int:
    start = base_event_time(0, size, days)
    return -(-int((moment - start).total_seconds() * 1_000_000) * size // (days * 86_400_000_000))


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def shallow_clone(spark, base: Path, lake: Lake) -> None:
    """A fresh lake whose events table is a shallow clone of ``base``'s (its log names the base's files)."""
    shutil.rmtree(lake.root, ignore_errors=True)
    lake.table_path(TABLE).parent.mkdir(parents=True, exist_ok=True)
    spark.sql(f"CREATE TABLE delta.`{lake.table_path(TABLE)}` SHALLOW CLONE delta.`{Lake(base).table_path(TABLE)}`")


def files_read(spark, table: Path, path: str, targets) -> dict:
    """How many of the table's files a MERGE of the batch in ``path`` reads: all of them, those of its
    delivery dates, and those its delivery times leave (Delta's own data skipping, through ``inputFiles``)."""
    from pyspark.sql import functions as F

    from spark_jobs.driver.write.pipelined import delivery_bound, delivery_range
    from spark_jobs.registry import CLOUDTRAIL_LAYOUT

    target = next(t for t in targets if t.name == TABLE)
    frame = spark.read.format("delta").load(str(table))
    dated = frame.where(F.col("date").isin(delivery_bound([path], 1, CLOUDTRAIL_LAYOUT)))
    timed = delivery_range(dataclasses.replace(target, delivery_time_bound=_registry_time_bound()), [path],
                           CLOUDTRAIL_LAYOUT)
    rows = _rows_per_file(table)
    found = {"table": frame.inputFiles(), "dates": dated.inputFiles(),
             "dates_and_times": dated.where(F.col(timed.column).between(timed.start, timed.end)).inputFiles()}
    return {name: {"files": len(paths), "rows": sum(rows.get(p.rsplit("/", 1)[-1], 0) for p in paths)}
            for name, paths in found.items()}


def _rows_per_file(table: Path) -> dict[str, int]:
    """Rows per data file name, from the ``add`` actions' statistics in the table's log."""
    rows = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add")
            if add and add.get("stats"):
                rows[add["path"].rsplit("/", 1)[-1]] = json.loads(add["stats"]).get("numRecords", 0)
    return rows


def _registry_time_bound():
    from spark_jobs.registry import get_job

    return next(t for t in get_job("cloudtrail_etl").tables if t.name == TABLE).delivery_time_bound


def measure(sizes: tuple[int, ...] = (100_000, 1_000_000, 10_000_000), batch: int = 1000, days: int = 1, repeat: int = 4,
            rows_per_file: int = ROWS_PER_FILE, spark=None) -> dict:
    """Measure as the module docstring says, with ``spark`` (else a session of its own, stopped at the end)."""
    from spark_jobs.driver.job_modules import job_module, output_schemas, table_targets
    from spark_jobs.driver.session import build_session
    from spark_jobs.driver.write import write_batch
    from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, create_tables
    from spark_jobs.registry import get_job

    job = get_job("cloudtrail_etl")
    module = job_module(job)
    own_session = spark is None
    spark = spark or build_session("merge_cost", long_running=True)
    schemas = output_schemas(spark, job)
    # A size named twice is measured twice, the later figures kept (``100000,10000000,100000,10000000``: each
    # size again on a JVM the others warmed up).
    files = write_batches(WORK_ROOT / "landing", repeat + 1, batch, sorted(set(sizes)), days)
    report = {"batch_events": batch, "days": days, "rows_per_file": rows_per_file, "repeat": repeat,
              "redelivered_from_table": REDELIVERED, "twice_in_file": TWICE, "by_table_events": {}}
    for size in sizes:
        started = time.monotonic()
        base = build_table(spark, size, days, rows_per_file)
        section = {"table_build_s": round(time.monotonic() - started, 1)}
        runs = {}
        for plan in PLANS:
            lake = Lake(WORK_ROOT / f"{plan}-{size}")
            shallow_clone(spark, base, lake)
            targets = table_targets(job, lake)
            if plan == "date_bound":
                targets = [dataclasses.replace(t, delivery_time_bound=None) for t in targets]
            create_tables(spark, targets, schemas)
            runs[plan] = (lake, targets, ExactlyOnceWriter(spark, targets, f"merge-cost-{plan}-{size}"), [])
        batches = [f for f in files if f["size"] == size]
        for f in batches:  # the plans take turns, each batch in the other order: the load hits both alike
            for plan in (PLANS if f["index"] % 2 else PLANS[::-1]):
                lake, targets, writer, times = runs[plan]
                frame = spark.read.format("binaryFile").load(f["path"])
                begun = time.monotonic()
                written = write_batch(frame, f["index"], job=job, module=module, writer=writer, targets=targets)
                seconds = time.monotonic() - begun
                assert written.plan == "pipelined", written.plan
                assert written.rows[TABLE] == f["new"], (plan, size, written.rows, f["new"])
                if f["index"]:
                    times.append(seconds)
        for plan, (lake, targets, _, times) in runs.items():
            section[plan] = {"batch_s": [round(t, 2) for t in times], "median_s": round(statistics.median(times), 2)}
        lake, targets = runs[PLANS[0]][:2]
        section["read_by_a_batch"] = files_read(spark, lake.table_path(TABLE), batches[-1]["path"], targets)
        for lake, *_ in runs.values():
            shutil.rmtree(lake.root, ignore_errors=True)
        report["by_table_events"][size] = section
        log.info("merge_cost: %d events: %s", size, section)
    smallest, largest = min(sizes), max(sizes)
    for plan in PLANS:
        report[f"{plan}_ratio_{largest}_to_{smallest}"] = round(
            report["by_table_events"][largest][plan]["median_s"] / report["by_table_events"][smallest][plan]["median_s"], 2)
    report["ratio"] = report[f"time_bound_ratio_{largest}_to_{smallest}"]
    report["met"] = report["ratio"] <= GOAL_RATIO
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if own_session:
        spark.stop()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.merge_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--days", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows-per-file", type=int, default=ROWS_PER_FILE)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    report = measure([int(s) for s in args.sizes.split(",")], args.batch, args.days, args.repeat, args.rows_per_file)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
