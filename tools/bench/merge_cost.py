"""What one-row-per-eventID costs per micro-batch as ``cloudtrail_events`` grows.

Usage::

    python -m tools.bench.merge_cost [--sizes 30000,300000] [--batch 5000] [--days 30] [--repeat 3]

For each table size, a fresh Delta table of ``cloudtrail_events``' schema is filled with that many
events spread over ``--days`` daily partitions; then the same batch of new events (on the last day,
with 2% duplicates inside the batch) is merged the way the job merges it (insert-only MERGE on
``eventID`` and ``date`` bounded by the batch's dates, after the in-batch dedup), and, for comparison,
appended with no dedup at all. Each merge uses a fresh ``txnVersion`` so none is skipped. Prints one
JSON object. The rows carry the schema's every column but only a few are filled, so absolute times
are lower than with real events; what matters is how the merge grows with the table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT, Lake


def _events(spark, schema, count: int, days: int, last_day: str, salt: str, duplicates: float = 0.0):
    from pyspark.sql import functions as F

    ids = spark.range(count).select(
        F.concat(F.lit(salt), F.sha2(F.concat(F.lit(salt), F.col("id").cast("string")), 256).substr(1, 28)).alias("eventID"),
        F.date_sub(F.lit(last_day).cast("date"), (F.col("id") % days).cast("int")).alias("date"),
        F.col("id"))
    frame = ids.select(
        F.to_timestamp(F.col("date")).alias("eventTime"), "date", "eventID",
        F.lit("ec2.amazonaws.com").alias("eventSource"), F.lit("DescribeInstances").alias("eventName"),
        F.concat(F.lit(f"file:/landing/{salt}-"), (F.col("id") % 1000).cast("string"), F.lit(".json.gz")).alias("_source_file"),
        F.col("id").alias("_record_index"))
    if duplicates:
        frame = frame.unionByName(frame.sample(fraction=duplicates, seed=7)
                                  .withColumn("_source_file", F.lit("file:/landing/zz-again.json.gz")))
    return frame.select(*[F.col(f.name).cast(f.dataType) if f.name in frame.columns
                          else F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])


def measure(sizes: list[int], batch: int, days: int, repeat: int, workdir: Path) -> dict:
    from spark_jobs.registry import get_job
    from spark_jobs.driver.job_modules import output_schemas, table_targets
    from spark_jobs.driver.session import build_session
    from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, create_tables

    job = get_job("cloudtrail_etl")
    spark = build_session("merge_cost")
    schemas = output_schemas(spark, job)
    schema = schemas["cloudtrail_events"]
    last_day = "2024-03-30"
    report = {"batch_rows": batch, "days": days, "in_batch_duplicates": 0.02, "by_table_rows": {}}
    for size in sizes:
        lake = Lake(workdir / f"t{size}")
        shutil.rmtree(lake.root, ignore_errors=True)
        targets = table_targets(job, lake)
        create_tables(spark, targets, schemas)
        events = next(t for t in targets if t.name == "cloudtrail_events")
        _events(spark, schema, size, days, last_day, "base").write.format("delta").mode("append").save(str(events.path))
        writer = ExactlyOnceWriter(spark, targets, f"merge-cost-{size}")
        merges, appends = [], []
        for i in range(repeat + 1):  # the first is a warm-up
            source = _events(spark, schema, batch, 1, last_day, f"b{i}-", duplicates=0.02).cache()
            source.count()
            started = time.monotonic()
            inserted = writer.write(i, "cloudtrail_events", source, {"date": [r.date for r in source.select("date").distinct().collect()]})
            merge_s = time.monotonic() - started
            assert inserted == batch, (inserted, batch)
            plain = source.where("_source_file != 'file:/landing/zz-again.json.gz'")
            started = time.monotonic()
            plain.write.format("delta").mode("append").save(str(workdir / f"append-{size}"))
            append_s = time.monotonic() - started
            source.unpersist()
            if i:
                merges.append(merge_s)
                appends.append(append_s)
        report["by_table_rows"][size] = {"merge_s": [round(s, 2) for s in merges],
                                         "merge_median_s": round(statistics.median(merges), 2),
                                         "append_median_s": round(statistics.median(appends), 2)}
    spark.stop()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.merge_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="30000,300000")
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = PROJECT_ROOT / ".spark" / "bench" / "merge_cost"
    report = measure([int(s) for s in args.sizes.split(",")], args.batch, args.days, args.repeat, workdir)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
