"""A backfill's input roots: the folders a backfill of a job may read under, as configured, and the trigger form's
pattern of a source folder under them (no pyspark, no Airflow, no I/O but resolving a root's symlink).

The roots are ``$<JOB>_INPUT_ROOTS`` (``os.pathsep``-separated), else the registry entry's ``input_roots``; the
backfill DAG builds its form's ``source`` pattern from them while Airflow parses it, so Airflow refuses a path outside
them before a run exists; :mod:`spark_jobs.control.catchup.backfill` checks every source again when a run starts.
"""

from __future__ import annotations

import os
import re

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import PROJECT_ROOT
from spark_jobs.model.object_store import is_object_store

# Characters a shell or a URL parser would give a meaning to; none belongs in a log folder's path.
SHELL_METACHARACTERS = set(";&|$`<>*?[]{}()!'\"\\#~^%\n\r\t\0")
MAX_FILES_PER_TRIGGER = 100_000
ROOTS_ENV_SUFFIX = "_INPUT_ROOTS"


def configured_roots(job: JobSpec) -> list[str]:
    """The input roots of ``job`` as configured: ``$<JOB>_INPUT_ROOTS`` (``os.pathsep``-separated; an S3 URL,
    ``s3a://bucket/AWSLogs``, is one root: its ``://`` does not separate), else the registry's ``input_roots``;
    a relative folder is made absolute under the project root. Nothing is read: the backfill form's schema is built
    from these while Airflow parses the DAG file."""
    given = os.environ.get(job.name.upper() + ROOTS_ENV_SUFFIX)
    roots = [r for r in re.split(re.escape(os.pathsep) + r"(?!//)", given) if r] if given else list(job.input_roots)
    return [r.rstrip("/") if is_object_store(r) else os.path.normpath(r if os.path.isabs(r) else PROJECT_ROOT / r)
            for r in roots]


# A path segment of a source folder: not ``..``, none of SHELL_METACHARACTERS (the pattern's own copy of the rule).
_SEGMENT = r"""/(?!\.\.(?:/|$))[^/;&|$`<>*?\[\]{}()!'"\\#~^%\s\x00]+"""


def _escape(text: str) -> str:
    """``text`` as a literal in a pattern that both Python's ``re`` and ECMAScript (JSON schema's dialect) read."""
    return re.sub(r"[\\^$.|?*+()\[\]{}]", lambda found: "\\" + found.group(), text)


def source_pattern(job: JobSpec) -> str:
    """The backfill form's JSON-schema ``pattern`` of ``source``: a folder (or ``file://`` URL) under one of the
    job's input roots (as configured, and where a symlinked root leads), with no ``..`` and no shell
    metacharacter. Airflow checks it when the run is requested, so a path outside the roots creates no run;
    :func:`spark_jobs.control.catchup.backfill.check_source` checks the rest (the folder exists, no symlink out of a root) when the run starts."""
    local, remote = [], []
    for root in configured_roots(job):
        if is_object_store(root):
            remote.append(_escape(root))
        else:
            for form in dict.fromkeys((root, os.path.realpath(root))):  # the symlink and where it leads
                local.append(_escape(form.rstrip("/")))
    alternatives = ([f"(?:file://)?(?:{'|'.join(local)})"] if local else []) + remote
    if not alternatives:
        return "(?!)"  # no root configured: nothing matches (check_source says why)
    return f"^(?:{'|'.join(alternatives)})(?:{_SEGMENT})*/?$"
