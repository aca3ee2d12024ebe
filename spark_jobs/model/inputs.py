"""Where a job reads from, when nobody says: the one rule for ``--input``, ``$<JOB>_INPUT`` and the registry.

A job's input is named, first found wins, by

1. what the run was given (``--input``, the DAG form's ``input``, an operator's ``input_path``);
2. the environment variable ``$<JOB>_INPUT`` (the registry's ``input_env_var``);
3. the registry's default: a file job's ``default_input`` (a folder), a Kafka job's ``topics``.

A relative folder given on a command line is relative to the current directory; one from the
environment or the registry is relative to the project root; a URL names a bucket's prefix. The driver,
the checkpoint inspection, the catch-up plan, the supervisor and the health sensor all resolve it here,
so they agree on the folder a job reads. No I/O (nothing is checked to exist) and no pyspark.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from spark_jobs.model.lake import PROJECT_ROOT, as_path
from spark_jobs.model.object_store import is_url


def named_input(job, given: str | os.PathLike | None = None, *, default: str | None = None,
                environ: Mapping[str, str] | None = None) -> str:
    """The job's input as named: ``given``, else ``$<JOB>_INPUT``, else ``default``, else the registry's
    (a file job's ``default_input``, a Kafka job's ``topics``).

    :param job: the registry job (its ``name``, ``input_env_var``, ``source`` and ``default_input``).
    :param default: what to use before the registry's default (e.g. the topics a checkpoint has read).
    """
    environ = os.environ if environ is None else environ
    registry = job.source.registry_input(job.default_input)
    return str(given) if given else environ.get(job.input_env_var) or default or registry


def input_path(job, given: str | os.PathLike | None = None, *, environ: Mapping[str, str] | None = None) -> Path:
    """The file job's input folder, absolute (``~`` expanded, symlinks kept, not checked to exist): a
    relative ``given`` is relative to the current directory, a relative ``$<JOB>_INPUT`` or registry
    default to the project root. A URL (``s3a://bucket/AWSLogs/``) stays a URL (a ``UPath``)."""
    named = named_input(job, given, environ=environ)
    if is_url(named):
        return as_path(named)
    path = Path(named).expanduser()
    return path if path.is_absolute() else (Path.cwd() if given else PROJECT_ROOT) / path
