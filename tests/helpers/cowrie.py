"""The cowrie_honeypot job run in this process on the session's SparkSession, and its tables read back."""

from __future__ import annotations

from pathlib import Path

from spark_jobs.driver.runner import run_streaming
from spark_jobs.model.lake import Lake
from spark_jobs.model.runs import RunOptions
from spark_jobs.model.triggers import parse_trigger
from spark_jobs.registry import get_job

JOB = get_job("cowrie_honeypot")
EVENTS, QUARANTINE = (table.name for table in JOB.tables)


def run(landing: Path, lake: Path, **file_options: str):
    """Run the job in this process on the tests' SparkSession (available-now)."""
    options = {**JOB.file_source_options, **file_options}
    return run_streaming(JOB, RunOptions(landing, Lake(lake), parse_trigger("available-now"), options))


def read_tables(spark, lake: Path) -> dict:
    return {t.name: spark.read.format("delta").load(str(Lake(lake).table_path(t.name))) for t in JOB.tables}
