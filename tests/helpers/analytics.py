"""Helpers of the analytics jobs' tests: a lake whose cloudtrail_events holds generated commits, runs in-process."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tools.sample_events import EventStream, append_commits
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from spark_jobs.model.triggers import parse_trigger

ACCOUNTS_CSV = ("account_id,account_name,owner_team,environment\n"
                "111122223333,payments-prod,payments,prod\n"
                "444455556666,data-platform-dev,data-platform,dev\n")


def events_lake(spark, lake_root: Path, stream: EventStream) -> Lake:
    """A lake whose ``cloudtrail_events`` (created as ``cloudtrail_etl`` creates it) holds ``stream``'s commits."""
    from spark_jobs.driver.job_modules import prepare_source

    lake = Lake(Path(lake_root))
    table = lake.table_path("cloudtrail_events")
    prepare_source(spark, get_job("cloudtrail_activity"), table)
    append_commits(spark, table, stream.commits)
    return lake


def run(spark, job_name: str, lake: Lake, input_path: Path | None = None, trigger: str = "available-now",
        settings: dict | None = None, **options: str):
    """Run a registry job in this process on the shared session (its source options overridden by ``options``)."""
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.driver.runner import resolve_input, run_streaming

    job = get_job(job_name)
    if settings:
        job = replace(job, settings={**job.settings, **settings})
    path = Path(input_path) if input_path else resolve_input(job, None, str(lake.root))
    run_options = RunOptions(path, lake, parse_trigger(trigger), {**job.file_source_options, **options})
    return run_streaming(job, run_options, spark=spark)


def table(spark, lake: Lake, name: str):
    return spark.read.format("delta").load(str(lake.table_path(name)))


def accounts_file(folder: Path, text: str = ACCOUNTS_CSV, name: str = "accounts.csv") -> Path:
    """Write an accounts file atomically (a temp name, then a rename), as the docs say to update it."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    temp = folder / f".{name}.tmp"
    temp.write_text(text)
    os.replace(temp, path)
    return path


def streamed(spark, root: Path, job_name: str, stream: EventStream) -> dict:
    """``stream`` in a fresh lake under ``root``, and one available-now run of ``job_name`` over it, one
    commit per micro-batch, with the accounts file of :data:`ACCOUNTS_CSV`.

    :returns: ``lake``, ``summary`` and the run's ``progress`` events; the batch run's tables in ``batch``.
    """
    import pytest

    from tools.bench.probes import ProgressRecorder
    from spark_jobs.driver.job_modules import transform_batch

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACCOUNTS_PATH", str(accounts_file(root / "reference")))
        lake = events_lake(spark, root / "lake", stream)
        with ProgressRecorder(spark) as recorder:
            summary = run(spark, job_name, lake, maxFilesPerTrigger="1")
            progress = recorder.latest_run()
        batch = {name: frame.collect() for name, frame in
                 transform_batch(spark, get_job(job_name), lake.table_path("cloudtrail_events")).items()}
    return {"stream": stream, "lake": lake, "summary": summary, "progress": progress, "batch": batch, "root": root}
