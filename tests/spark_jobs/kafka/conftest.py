"""The Kafka job run in-process (the session's broker, ``kafka_broker``, is in tests/conftest.py: the DAG tests use it too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from spark_jobs.model.triggers import parse_trigger

KAFKA_JOB = get_job("cloudtrail_kafka")


@pytest.fixture(scope="session")
def run_kafka_job(spark, kafka_broker):
    """Run cloudtrail_kafka in this process: ``run_kafka_job(topics, lake, trigger=..., **source_options)``."""
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.driver.runner import run_streaming

    def run(topics: str, lake_root: Path, trigger: str = "available-now", **options: str):
        run_options = RunOptions(Path(topics), Lake(Path(lake_root)), parse_trigger(trigger),
                                 {**KAFKA_JOB.file_source_options, **options}, lease_ttl_seconds=5)
        return run_streaming(KAFKA_JOB, run_options, spark=spark)

    return run
