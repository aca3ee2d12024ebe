"""The training run of the driver JVM's class archive: the project's usual work, small.

Usage (``python -m spark_jobs.launch.class_archive build`` runs it; by hand, as it does)::

    spark-submit --master local[2] --driver-java-options "-XX:ArchiveClassesAtExit=out.jsa" \\
        --jars "$(python -m spark_jobs.launch.jars paths)" tools/class_archive_training.py WORKDIR

An available-now ``cloudtrail_etl`` run on a few generated files (file source, Python workers, JSON
parsing, Delta MERGE and appends, progress history) and a Delta query, so that the JVM that runs it
loads, and archives at exit, the classes every Spark start of the project loads
(:mod:`spark_jobs.launch.class_archive`). It is set-up tooling: spark-submitted by its path, never
imported by the product.
"""

from __future__ import annotations

import sys
from pathlib import Path


def train(workdir: Path) -> None:
    """Generate a little landing data in ``workdir``, run the job on it once, read the table back."""
    from spark_jobs.driver.runner import RunOptions, run_streaming
    from spark_jobs.driver.session import build_session
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.triggers import parse_trigger
    from spark_jobs.registry import get_job
    from tools.sample_data import write_sample_landing

    spark = build_session("class-archive")
    landing, lake = workdir / "landing", Lake(workdir / "lake")
    write_sample_landing(landing, files=4, records_per_file=20)
    job = get_job("cloudtrail_etl")
    run_streaming(job, RunOptions(landing, lake, parse_trigger("available-now"), dict(job.file_source_options)),
                  spark=spark)
    events = spark.read.format("delta").load(str(lake.table_path("cloudtrail_events")))
    events.groupBy("date", "eventSource").count().orderBy("date").collect()
    spark.sql(f"DESCRIBE HISTORY delta.`{lake.table_path('cloudtrail_events')}`").collect()
    spark.stop()


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: spark-submit ... tools/class_archive_training.py WORKDIR", file=sys.stderr)
        return 2
    train(Path(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
