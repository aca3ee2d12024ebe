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
import json
import logging
import platform
import shutil
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT, Lake

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
    runs: list[dict] = []
    for history in (True, False):  # warm-up, not counted
        log.info("warm-up run, progress history %s", "on" if history else "off")
        timed_catch_up(spark, data.landing, workdir / "lake", files_per_batch, history)
    for index in range(repeat):
        for history in ((True, False) if index % 2 == 0 else (False, True)):
            log.info("repetition %d of %d, progress history %s", index + 1, repeat, "on" if history else "off")
            runs.append(timed_catch_up(spark, data.landing, workdir / "lake", files_per_batch, history))
    spark.stop()

    def summary(history: bool) -> dict:
        mine = [r for r in runs if r["history"] is history]
        return {"runs_s": [r["seconds"] for r in mine], "median_s": statistics.median(r["seconds"] for r in mine),
                "median_batch_ms": statistics.median(r["median_batch_ms"] for r in mine),
                "batch_ms_medians": [r["median_batch_ms"] for r in mine],
                "batches": mine[0]["batches"], "progress_rows": [r["progress_rows"] for r in mine],
                "recorder": [r["recorder"] for r in mine]}

    on, off = summary(True), summary(False)
    return {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "host": platform.node(),
            "load_average_at_start_and_end": None, "records": records, "files": data.files,
            "files_per_batch": files_per_batch, "repeat": repeat, "with_history": on, "without_history": off,
            "ratio_median_s": round(on["median_s"] / off["median_s"], 3),
            "ratio_median_batch_ms": round(on["median_batch_ms"] / off["median_batch_ms"], 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.progress_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--records-per-file", type=int, default=500)
    parser.add_argument("--files-per-batch", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(PROJECT_ROOT / ".spark" / "bench" / "progress-cost.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import os

    load_before = os.getloadavg()
    workdir = PROJECT_ROOT / ".spark" / "bench" / "progress-cost"
    report = measure(args.records, args.records_per_file, args.files_per_batch, args.repeat, workdir)
    report["load_average_at_start_and_end"] = [round(load_before[0], 1), round(os.getloadavg()[0], 1)]
    text = json.dumps(report, indent=1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
