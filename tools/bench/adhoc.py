"""Ad-hoc query speed: one question asked of the raw JSON files and of the table, same answer required."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pyspark.sql import SparkSession

from tools.bench import bare
from tools.bench.data import BenchData
from tools.bench.probes import median
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job

log = logging.getLogger("tools.bench")
JOB = get_job("cloudtrail_etl")
QUERY = "SELECT eventSource, count(*) FROM cloudtrail_events WHERE date = '{day}' AND errorCode IS NOT NULL GROUP BY 1"


def _timed(fn) -> tuple[float, list]:
    started = time.monotonic()
    result = fn()
    return round(time.monotonic() - started, 3), result


def measure_adhoc(spark: SparkSession, data: BenchData, lake: Path, repeat: int) -> dict:
    """Errors per eventSource on one day: raw files (read.json + explode + filter) vs the table, alternating.

    The table is read as ``python -m spark_jobs sql`` reads it (its Delta log, read anew for every
    query); one warm-up of each comes first and is reported.
    """
    from spark_jobs.driver.job_modules import output_schemas
    from spark_jobs.driver.sql import read_table

    day = data.dates[len(data.dates) // 2]
    schema = output_schemas(spark, JOB)["cloudtrail_events"]
    path = Lake(lake).table_path("cloudtrail_events")

    def on_raw() -> list:
        return bare.errors_by_source_raw(spark, data.landing, day)

    def on_table() -> list:
        return bare.errors_by_source(read_table(spark, path, schema), day)

    warm_raw, expected = _timed(on_raw)
    warm_table, answer = _timed(on_table)
    if answer != expected:
        raise AssertionError(f"the table and the raw files disagree for {day}: {answer} vs {expected}")
    raw_s, table_s = [], []
    for i in range(repeat):
        log.info("ad-hoc query: repetition %d of %d", i + 1, repeat)
        seconds, result = _timed(on_raw)
        raw_s.append(seconds)
        assert result == expected, (result, expected)
        seconds, result = _timed(on_table)
        table_s.append(seconds)
        assert result == expected, (result, expected)
    ratio = round(median(raw_s) / median(table_s), 1)
    return {
        "query": QUERY.format(day=day),
        "identical_results": True,
        "result_rows": len(expected),
        "error_events": sum(n for _, n in expected),
        "raw_json": {"seconds": raw_s, "median_s": median(raw_s), "warmup_s": warm_raw},
        "table": {"seconds": table_s, "median_s": median(table_s), "warmup_s": warm_table},
        "ratio": ratio,
        "goal": ">= 25",
        "met": ratio >= 25,
    }
