"""
# Lake maintenance: compact, then vacuum, every table of the registry

One DAG, `lake_maintenance`, runs daily. For each table in `spark_jobs.registry.JOBS` it
spark-submits, one after the other:

    spark-submit --master <spark_default's host> --conf <Delta's extension and catalog, the class archive> \\
        --jars <project>/.jars/delta-spark...jar,... --name lake_optimize_<table> <project>/spark_jobs/__main__.py lake optimize --table <table> --changed-only

then the same with `lake vacuum --table <table>`: compaction of the small files the micro-batches
leave (files whose rows are unchanged, one Delta transaction per batch of files; `--changed-only`: only
the partitions with two or more small files, those the live job or a backfill wrote since the last run, so
the Z-order of `cloudtrail_events` by `eventTime` rewrites a day, not the whole table), then deletion of
the files no version younger than the table's `vacuum_retention_hours` (registry) needs. A table
that no job has written yet is skipped (no spark-submit). Both are
Delta transactions, safe while the streaming jobs write: a reader keeps its version, an append never
conflicts with a compaction, and a MERGE that read a compacted file retries its commit. The lake
root comes from the worker's `$LAKE_ROOT`, as for the catch-up DAGs.

`max_active_runs=1`: two maintenance runs would compact the same files and one would fail.
Parsing this file reads only the registry: no connection, Variable, file or pyspark import.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

from spark_jobs.launch.submit import Submission
from spark_jobs.registry import table_specs
from streaming.dag_parts import retrying_default_args, skip_unwritten_table

DAG_ID = "lake_maintenance"

# Interrupting either step loses nothing: an unfinished compaction or vacuum is simply redone.
DEFAULT_ARGS = retrying_default_args(execution_timeout=timedelta(hours=2))


def lake_step(step: str, table: str) -> SparkSubmitOperator:
    """The task that spark-submits ``python -m spark_jobs lake <step> --table <table>`` (optimize: ``--changed-only``)."""
    args = ["lake", step, "--table", table, *(["--changed-only"] if step == "optimize" else [])]
    return SparkSubmitOperator(
        task_id=f"{step}_{table}",
        **Submission.of(args, name=f"lake_{step}_{table}").operator_kwargs(),
        doc_md=f"`python -m spark_jobs lake {step} --table {table}` under spark-submit (skipped while the "
               f"table has no data).",
        pre_execute=skip_unwritten_table(table),
    )


with DAG(
    dag_id=DAG_ID,
    description="compact, then vacuum, every Delta table of the registry",
    doc_md=__doc__,
    schedule="@daily",
    start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["maintenance", "delta"],
) as lake_maintenance:
    for _table in table_specs():  # a table several jobs write (cloudtrail_events), once
        lake_step("optimize", _table.name) >> lake_step("vacuum", _table.name)
