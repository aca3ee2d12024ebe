"""A new version's pre-flight: checked against the live checkpoint and tables before it may take a job over.

Usage (the supervisor starts it for a rollout, docs/deploying.md; the new release first on ``PYTHONPATH``)::

    python -m spark_jobs run cloudtrail_etl --trigger processing-time:10s --standby --preflight

It runs in the new version's standby, with the new version's code and registry entry, while the old driver holds
the checkpoint's lease and runs on; it writes nothing to the live checkpoint or tables. It checks, with the
doctor's own readers and words (:mod:`spark_jobs.control.checkpoint`):

- **the sources**: the checkpoint's offsets against the job's source, and the input it reads
  (``checkpoint inspect``'s ``source_count_changed``, ``source_changed``, ``input_changed``);
- **the output schema against each Delta table**: every column the new version writes must be in the table
  with the same type, and every column of the table must still be written (:func:`output_changes`);
- **the options stored in the checkpoint**: a SQL setting the new version declares (``JobSpec.spark_conf``) that
  the checkpoint's offsets keep with another value (Spark would keep the stored one) (:func:`conf_changes`);
- **the stateful operators and their state schema** (a stateful job with a committed batch): the last committed
  batch is run again by the new version on a scratch copy of the checkpoint, into Spark's ``noop`` sink, so that
  Spark itself compares the operators with the state metadata and the key and value schemas with the stored
  ones (:func:`replay_last_batch`); its error is put in plain words by
  :func:`~spark_jobs.control.checkpoint.explain_start_failure`.

The verdict goes to ``<control>/preflight.json`` (:mod:`spark_jobs.control.rollout.preflight_state`); a refused
version raises :class:`PreflightRefused` (the CLI exits 4 with the explanation).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_jobs.control.checkpoint.explain import INCOMPATIBLE_WAYS
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.runs import RunOptions

log = logging.getLogger("spark_jobs")

# The doctor's codes that say the checkpoint was written by another query than this version's.
SOURCE_PROBLEMS = ("source_count_changed", "source_changed", "input_changed")
STATE_PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
DESTRUCTIVE = ("keep the running version (nothing was stopped); or revert the change in a new version; or deploy it "
               "as a destructive rollout: a new checkpoint and a reprocess (the four-eyes on-call action)")
REPLAY_TIMEOUT_SECONDS = 600.0


class PreflightRefused(Exception):
    """The new version does not fit the live checkpoint or tables (the message: each finding and its way out)."""


@dataclass(frozen=True)
class Finding:
    """One reason to refuse the version: a stable ``code``, what is wrong, the way out."""

    code: str
    explanation: str
    action: str

    def to_dict(self) -> dict:
        return {"code": self.code, "explanation": self.explanation, "action": self.action}


def _type(field) -> str:
    return field.dataType.simpleString()


def output_changes(table: str, written: StructType, stored: StructType) -> list[str]:
    """How the columns a version writes differ from the table's (names compared case-insensitively, as Spark
    resolves them; nullability aside): each difference as a phrase; none when they fit."""
    have = {f.name.lower(): f for f in stored.fields}
    want = {f.name.lower(): f for f in written.fields}
    changes = []
    for key, field in want.items():
        if key not in have:
            changes.append(f"new column {field.name} {_type(field)}")
        elif _type(have[key]) != _type(field):
            changes.append(f"column {field.name} changes type from {_type(have[key])} to {_type(field)}")
    changes += [f"column {have[key].name} is no longer written" for key in have if key not in want]
    return changes


def conf_changes(declared: dict[str, str], stored: dict[str, str]) -> list[str]:
    """The settings a version declares that the checkpoint keeps with another value (Spark keeps the stored one)."""
    return [f"{key} = {value} (the checkpoint keeps {stored[key]})" for key, value in sorted(declared.items())
            if key in stored and str(stored[key]) != str(value)]


def check_sources(job: JobSpec, options: RunOptions) -> tuple[list[Finding], object]:
    """The doctor's verdict on the sources, and its report (``checkpoint inspect`` with this version's job)."""
    from spark_jobs.control.checkpoint.inspect import inspect_checkpoint

    report = inspect_checkpoint(job, str(options.lake.root), str(options.input_path))
    found = [Finding(p.code, p.explanation, f"{p.action} ({DESTRUCTIVE})") for p in report.problems
             if p.code in SOURCE_PROBLEMS]
    return found, report


def check_outputs(spark: SparkSession, job: JobSpec, options: RunOptions) -> list[Finding]:
    """Each existing Delta table of the job against the schema this version writes to it."""
    from pyspark.errors import AnalysisException

    from spark_jobs.driver.job_modules import output_schemas, table_targets

    written = output_schemas(spark, job)
    found = []
    for target in table_targets(job, options.lake):
        try:
            stored = spark.read.format("delta").load(str(target.path)).schema
        except AnalysisException:  # a new table: created empty when the version takes over
            continue
        changes = output_changes(target.name, written[target.name], stored)
        if changes:
            found.append(Finding("output_schema_changed",
                                 f"table {target.name} does not take what this version writes: {'; '.join(changes)}; "
                                 "its batches would fail at their first write (or write columns readers do not know)",
                                 DESTRUCTIVE))
    return found


def check_conf(spark: SparkSession, job: JobSpec, stored: dict) -> list[Finding]:
    """The version's declared settings, and a stateful job's state store provider, against the checkpoint's."""
    declared = {key: str(value) for key, value in job.spark_conf.items()}
    if job.stateful and STATE_PROVIDER_CONF not in declared:
        declared[STATE_PROVIDER_CONF] = spark.conf.get(STATE_PROVIDER_CONF)
    changes = conf_changes(declared, stored or {})
    if not changes:
        return []
    return [Finding("stored_option_changed",
                    f"the checkpoint keeps settings this version changes: {'; '.join(changes)}. Spark keeps the "
                    "checkpoint's value (the change would not take effect), or refuses to start for a state store "
                    "setting", f"set them back to the stored values in the new version; or {DESTRUCTIVE}")]


def replay_last_batch(spark: SparkSession, job: JobSpec, options: RunOptions, report,
                      source: Callable[[], DataFrame]) -> list[Finding]:
    """A stateful job's last committed batch run again by this version on a scratch copy of the checkpoint into the
    ``noop`` sink (nothing written anywhere but the copy): Spark's own check of the operators and state schemas.

    :param source: makes the streaming DataFrame the version's query writes (the runner's, its transform applied).
    """
    from spark_jobs.control.checkpoint.explain import explain_start_failure
    from spark_jobs.driver.session import session_conf

    live = Path(str(options.checkpoint_path(job.name)))
    if report.latest_commit_batch is None or not live.is_dir():
        return []
    scratch = Path(os.environ.get("SPARK_LOCAL_DIRS", "/tmp").split(",")[0]) / f"preflight-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    copy = scratch / "checkpoint"
    try:
        shutil.copytree(live, copy)
        last = report.latest_commit_batch
        if report.latest_offset_batch == last:  # nothing in flight: Spark runs the last batch again
            for name in (str(last), f".{last}.crc"):
                (copy / "commits" / name).unlink(missing_ok=True)
        frame = source()

        def noop(frame, batch_id: int) -> None:
            frame.write.format("noop").mode("overwrite").save()

        with session_conf(spark, job.spark_conf):
            query = (frame.writeStream.outputMode(job.output_mode).foreachBatch(noop)
                     .option("checkpointLocation", str(copy)).trigger(once=True).start())
        try:
            query.awaitTermination(REPLAY_TIMEOUT_SECONDS)
            error = query.exception()
        finally:
            query.stop()
    except Exception as exc:  # noqa: BLE001 - a start-up error of the query is the verdict
        error = exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if error is None:
        return []
    message = str(error)
    explained = explain_start_failure(message)
    first = message.strip().splitlines()[0][:300] if message.strip() else type(error).__name__
    said = f"{explained} (Spark: {first[:400]})" if explained else f"{first}. {INCOMPATIBLE_WAYS}"
    return [Finding("state_incompatible",
                    f"replaying batch {report.latest_commit_batch} on a copy of the checkpoint failed: {said}",
                    DESTRUCTIVE)]


def run_preflight(spark: SparkSession, job: JobSpec, options: RunOptions, source: Callable[[], DataFrame]) -> dict:
    """Every check above, the verdict written to ``preflight.json``; returns it (``source``: see
    :func:`replay_last_batch`).

    :raises PreflightRefused: when the version does not fit (the message says why and the ways out).
    """
    from spark_jobs.control.rollout.preflight_state import refusal_text, write_preflight
    from spark_jobs.launch.version import current

    started = time.monotonic()
    found, report = check_sources(job, options)
    checks = ["sources"]
    found += check_outputs(spark, job, options)
    checks.append("output schema")
    found += check_conf(spark, job, report.stored_conf)
    checks.append("stored options")
    if job.stateful and not found:
        found += replay_last_batch(spark, job, options, report, source)
        checks.append("state")
    version = current()
    verdict = write_preflight(str(options.control_path(job.name)), version.name, version.code,
                              [f.to_dict() for f in found], checks, time.monotonic() - started)
    if found:
        raise PreflightRefused(refusal_text(job.name, verdict))
    log.info("pre-flight of version %s for %s passed (%s) in %.1f s", version.name, job.name, ", ".join(checks),
             verdict["seconds"])
    return verdict
