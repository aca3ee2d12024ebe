"""The Spark fixtures: one real local SparkSession per test session, cloudtrail_etl run in it, its tables read.

Using ``spark`` (or a fixture built on it) is what puts a test in the spark tier (tests/helpers/tiers.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.model.lake import Lake
from spark_jobs.model.triggers import parse_trigger
from tests.helpers.cloudtrail import JOB


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession for the in-process tests (a start costs ~10 s)."""
    from spark_jobs.driver.session import build_session

    session = build_session("tests")
    yield session
    session.stop()


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
