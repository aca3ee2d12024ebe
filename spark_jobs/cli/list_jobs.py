"""``python -m spark_jobs list``: the registered jobs and their tables."""

from __future__ import annotations

import argparse

from spark_jobs.registry import JOBS

HELP = 'the registered jobs and their tables'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    for job in JOBS.values():
        print(f"{job.name}: {job.description}")
        where = (f"input {job.default_input} (${job.input_env_var})" if job.source.lands_files
                 else f"reads {job.source.describe()} as a stream")
        print(f"  {where}, trigger {job.default_trigger}, "
              f"schedule {job.schedule}, format delta")
        for table in job.tables:
            parts = f" partitioned by {', '.join(table.partition_by)}" if table.partition_by else ""
            print(f"  table {table.name}{parts}: {table.description}")
    return 0
