"""A job's transform run once over files written into a folder, as a test of its parser reads it: no stream, no
lake, the rows of each table it would write."""

from __future__ import annotations

import json
from pathlib import Path

from spark_jobs.driver.job_modules import transform_batch
from spark_jobs.model.jobs import JobSpec


def json_line(record: dict) -> bytes:
    """``record`` as one line of a JSON-lines log (no newline)."""
    return json.dumps(record).encode()


def transformed_rows(spark, job: JobSpec, folder: Path, files: dict[str, bytes]) -> dict[str, list]:
    """Writes ``files`` (name: content) into ``folder``, runs ``job``'s transform over the folder as one batch and
    returns each table's collected rows by table name."""
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return {name: frame.collect() for name, frame in transform_batch(spark, job, folder).items()}
