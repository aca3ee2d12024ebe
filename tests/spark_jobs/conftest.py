"""Fixtures for running the jobs in-process on the shared SparkSession and reading their tables."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from spark_jobs.model.triggers import parse_trigger

JOB = get_job("cloudtrail_etl")


@pytest.fixture(scope="session")
def run_job(spark):
    """Run cloudtrail_etl in this process: ``run_job(input, lake, trigger=..., writer=..., **file_source_options)``."""
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.driver.runner import run_streaming

    def run(input_path: Path, lake_root: Path, trigger: str = "available-now", writer: str | None = None,
            **file_options: str):
        options = {**JOB.file_source_options, **file_options}
        run_options = RunOptions(Path(input_path), Lake(Path(lake_root)), parse_trigger(trigger), options,
                                 writer=writer)
        return run_streaming(JOB, run_options, spark=spark)

    return run


@pytest.fixture(scope="session")
def tables(spark):
    """``tables(lake)`` -> {table name: DataFrame}: each table read by delta-spark (its newest version)."""

    def read(lake_root: Path) -> dict:
        lake = Lake(Path(lake_root))
        return {t.name: spark.read.format("delta").load(str(lake.table_path(t.name))) for t in JOB.tables}

    return read


def source_records(path: Path) -> list:
    """The records of a healthy CloudTrail file, parsed by Python's json (the test's own reader)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    text = data.decode("utf-8")
    if path.name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    document = json.loads(text)
    return document["Records"] if isinstance(document, dict) else document


def file_name(uri: str) -> str:
    """The file name of a ``file:/...`` URI as Spark reports it."""
    return uri.rsplit("/", 1)[-1]
