"""What keeping the progress history costs the query: the same catch-up with ``streaming_progress`` on and off.

Usage::

    python -m tools.bench.progress_cost [--records 20000] [--records-per-file 500] [--files-per-batch 4]
                                             [--repeat 3] [--out .spark/bench/progress-cost.json]

Input: CloudTrail files built from the real samples (:mod:`tools.bench.data`). In one
SparkSession, after one warm-up run of each, available-now runs of ``cloudtrail_etl`` alternate with
the recorder on (``RunOptions.progress_history``) and off, each on a fresh lake, with a small
``maxFilesPerTrigger`` so there are many micro-batches: a per-batch cost is what would show. Reported
per mode: each run's wall time (from the start to the end of ``run_streaming``, including the
recorder's last append), the median micro-batch duration (Spark's ``batchDuration``), the rows the
recorder wrote, and the recorder's own account of its work off the query's thread (seconds of
backlog samples and of appends, its thread's CPU seconds). Prints one JSON object and writes it to ``--out``. Not part of the tests.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import time
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT, Lake
from tools.bench import side_by_side

log = logging.getLogger("tools.bench")


def timed_catch_up(spark, landing: Path, lake: Path, files_per_batch: int, history: bool) -> dict:
    from spark_jobs.control.monitoring.history import read_progress
    from spark_jobs.registry import get_job
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.driver.runner import run_streaming
    from spark_jobs.model.triggers import parse_trigger

    job = get_job("cloudtrail_etl")
    shutil.rmtree(lake, ignore_errors=True)
    options = RunOptions(landing, Lake(lake), parse_trigger("available-now"),
                         {**job.file_source_options, "maxFilesPerTrigger": str(files_per_batch)},
                         progress_history=history)
    durations: list[int] = []

    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):  # Spark's own batch durations, the same way in both modes
        def onQueryStarted(self, event):  # noqa: N802 - Spark's API
            pass

        def onQueryProgress(self, event):  # noqa: N802
            if "addBatch" in event.progress.durationMs:
                durations.append(event.progress.batchDuration)

        def onQueryIdle(self, event):  # noqa: N802
            pass

        def onQueryTerminated(self, event):  # noqa: N802
            pass

    class Stats(logging.Handler):  # the recorder's own account of its work (its closing log line)
        def emit(self, record):
            if hasattr(record, "history_stats"):
                recorder.update(record.history_stats)

    recorder: dict = {}
    listener, stats = Listener(), Stats()
    logging.getLogger("spark_jobs.control.monitoring").addHandler(stats)
    spark.streams.addListener(listener)
    try:
        started = time.monotonic()
        summary = run_streaming(job, options, spark=spark)
        seconds = time.monotonic() - started
    finally:
        time.sleep(1)
        spark.streams.removeListener(listener)
        logging.getLogger("spark_jobs.control.monitoring").removeHandler(stats)
    rows = read_progress(lake, job.name, limit=None) if history else []
    return {"history": history, "seconds": round(seconds, 2), "batches": summary.batches,
            "median_batch_ms": statistics.median(durations) if durations else None,
            "progress_rows": len(rows), "events": summary.rows.get("cloudtrail_events"), "recorder": recorder}


def measure(records: int, records_per_file: int, files_per_batch: int, repeat: int, workdir: Path) -> dict:
    from tools.bench.data import write_landing
    from spark_jobs.driver.session import build_session

    data = write_landing(workdir / "data", records, records_per_file)
    spark = build_session("progress_cost")
    runs = side_by_side.alternate(
        lambda history: timed_catch_up(spark, data.landing, workdir / "lake", files_per_batch, history),
        repeat, "progress history")
    spark.stop()
    on, off = (side_by_side.summary(runs, mode, ("progress_rows", "recorder")) for mode in (True, False))
    return {**side_by_side.report_header(), "records": records, "files": data.files,
            "files_per_batch": files_per_batch, "repeat": repeat, "with_history": on, "without_history": off,
            **side_by_side.ratios(on, off)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.progress_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--records-per-file", type=int, default=500)
    parser.add_argument("--files-per-batch", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(PROJECT_ROOT / ".spark" / "bench" / "progress-cost.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    load_before = os.getloadavg()
    report = measure(args.records, args.records_per_file, args.files_per_batch, args.repeat,
                     PROJECT_ROOT / ".spark" / "bench" / "progress-cost")
    side_by_side.write(report, Path(args.out), load_before)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = cost_parser("python -m tools.bench.progress_cost", __doc__, "progress-cost.json", records=20_000,
                       records_per_file=500, files_per_batch=4, repeat=3).parse_args(argv)
    workdir = PROJECT_ROOT / ".spark" / "bench" / "progress-cost"
    return run_and_report(lambda: measure(args.records, args.records_per_file, args.files_per_batch, args.repeat,
                                          workdir), args.out)


if __name__ == "__main__":
    raise SystemExit(main())
