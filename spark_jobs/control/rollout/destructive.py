"""A destructive rollout: a version that needs a new checkpoint and new tables, deployed as its own four-eyes action.

Pre-flight refuses a version that does not fit the live checkpoint or tables (a changed stateful operator or state
schema, a changed source, a column type, a stored option: :mod:`spark_jobs.driver.preflight`), and nothing stops. Such a
version is deployed by this action instead (the on-call action ``rollout_destructive``, four eyes; the CLI's
``rollout JOB VERSION --destructive --yes``). The job's supervisor carries it out
(:mod:`spark_jobs.control.supervision.rollout`)::

    requested -> resetting -> rebuilding -> done
                          \\-> failed     \\-> failed

1. **stop**: the job's standby is stopped, then the driver after its micro-batch (its lease released);
2. **reset**: holding the job's lease, its checkpoint and every one of its tables are moved to
   ``<control>/backups/rollout-<id>/`` (``checkpoint/``, ``tables/<table>/``), kept for the record
   (:func:`~spark_jobs.control.checkpoint.move_aside.move_under_lease`, as ``reset_checkpoint`` moves a checkpoint);
3. **start the new version** on a new checkpoint (not a restart: none of the budget): it reads the job's whole input
   again and writes every table anew with its own code and schema. That re-read is the rebuild: the tables are new
   and empty, each batch is one idempotent commit, so every input record lands once. ``reprocess_from`` cannot do it:
   its ``replaceWhere`` keeps a table's schema, and a stateful job's tables follow its state, not single files.

The tables are empty at the reset and fill up as the new version works through its backlog: readers see fewer rows
until it has caught up (``checkpoint inspect``'s backlog says how far). Input no longer in the landing (deleted since)
is only in the backup's tables. There is no probation and no rollback by itself: the old checkpoint does not fit the
new tables; the way back is a destructive rollout to the old version (or the backup moved back, the job stopped).

A table another job also writes (and that has run in this lake) is refused: its rows would not come back from this
job's input. Only a version that pre-flight refused is taken: one that passed is a ``rollout``; one never checked is asked for as a
``rollout`` first (its pre-flight runs while the driver runs on, and says whether a new checkpoint is needed).
No pyspark here.
"""

from __future__ import annotations

from pathlib import Path

from spark_jobs.control.checkpoint.move_aside import MoveRefused, move_under_lease
from spark_jobs.control.rollout.ask import check_rollout, running_version
from spark_jobs.control.rollout.preflight_state import read_preflight
from spark_jobs.control.rollout.request import RolloutRefused, request_rollout
from spark_jobs.model.errors import UsageError
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake
from spark_jobs.model.streams import DeltaTableSource, KafkaSource

__all__ = ["MoveRefused", "ask_for_destructive_rollout", "backup_folder", "check_destructive_rollout",
           "destructive_plan", "move_aside"]


def check_destructive_rollout(job: JobSpec, lake: Lake, version: str) -> dict:
    """Every check of a destructive rollout (nothing written); returns the pre-flight verdict that refused ``version``.

    :raises UsageError: naming what does not fit and the way out (the checks of ``rollout`` first: an unknown
        version, a version with no such job, no supervisor, a rollout under way, the version that runs).
    """
    if isinstance(job.source, KafkaSource):
        raise UsageError(f"{job.name} reads {job.source.describe()}: a destructive rollout rebuilds the tables from the "
                         "job's whole input on a new checkpoint, and a topic keeps only what its retention holds; "
                         "roll out a version that fits the checkpoint (rollout) instead")
    control = check_rollout(job, lake, version)
    for table, other in other_writers(job, lake):
        raise UsageError(f"table {table} of {job.name} is also written by {other} (its checkpoint is in this lake): "
                         f"moving it aside would drop {other}'s rows, which the input of {job.name} cannot rebuild; "
                         "roll out a version that keeps the table's schema instead, or move the jobs by hand "
                         "(docs/deploying.md#a-destructive-rollout)")
    verdict = read_preflight(control)
    if verdict is None or verdict.get("version") != version:
        raise RolloutRefused(f"version {version} has no pre-flight verdict for {job.name}: ask "
                             f"`python -m spark_jobs rollout {job.name} {version}` (or the on-call action rollout) "
                             "first; its pre-flight checks it against the live checkpoint and tables while the driver "
                             "runs on, and only a version it refuses needs a destructive rollout")
    if verdict.get("passed"):
        raise RolloutRefused(f"version {version} passed its pre-flight for {job.name} (at {verdict.get('at')}): it runs "
                             "on the job's checkpoint and tables, without a new checkpoint or a rebuild; use rollout")
    return verdict


def ask_for_destructive_rollout(job: JobSpec, lake: Lake, version: str, by: str, reason: str | None = None) -> dict:
    """Check the request and write it for the job's supervisor (``destructive``: true); returns it."""
    check_destructive_rollout(job, lake, version)
    control = str(lake.control_path(job.name))
    return request_rollout(control, job.name, version, running_version(control), by, reason, destructive=True)


def backup_folder(lake: Lake, job: JobSpec, rollout_id: str) -> Path:
    """``<lake>/control/<job>/backups/rollout-<id>``: the checkpoint and tables a destructive rollout moved aside."""
    return lake.control_path(job.name) / "backups" / f"rollout-{rollout_id}"


def _moves(lake: Lake, job: JobSpec, backup: Path) -> list[tuple[Path, Path]]:
    return [(lake.checkpoint_path(job.name), backup / "checkpoint"),
            *[(lake.table_path(t.name), backup / "tables" / t.name) for t in job.tables]]


def move_aside(lake: Lake, job: JobSpec, rollout: dict) -> list[dict]:
    """Move the job's checkpoint and tables to :func:`backup_folder` while holding its lease; returns what moved.

    Carried on where a supervisor killed in the middle left it: what is already in the backup stays there.

    :raises MoveRefused: a live driver holds the lease, or something is both in place and in the backup.
    """
    backup = backup_folder(lake, job, rollout["id"])
    left = [(source, target) for source, target in _moves(lake, job, backup) if source.exists() or not target.exists()]
    return move_under_lease(lake, job, left, f"destructive rollout {rollout['id']} to {rollout['version']}")


def other_writers(job: JobSpec, lake: Lake) -> list[tuple[str, str]]:
    """``(table, job)`` for each table of ``job`` that another registry job also writes and has run in this lake (a
    checkpoint of its own there): rows a rebuild from ``job``'s input would not bring back."""
    from spark_jobs.registry import JOBS

    return [(table.name, other.name) for other in JOBS.values() if other.name != job.name
            and lake.checkpoint_path(other.name).exists()
            for table in job.tables if table.name in {t.name for t in other.tables}]


def downstream_jobs(job: JobSpec) -> list[str]:
    """The jobs that read one of ``job``'s tables as a stream (their checkpoints point into the tables moved aside)."""
    from spark_jobs.registry import JOBS

    tables = {t.name for t in job.tables}
    return sorted(other.name for other in JOBS.values()
                  if isinstance(other.source, DeltaTableSource) and other.source.table in tables)


def destructive_plan(job: JobSpec, lake: Lake, version: str, verdict: dict, driver: str) -> list[str]:
    """What the destructive rollout does, step by step (the four-eyes request shows it)."""
    control = lake.control_path(job.name)
    running = running_version(str(control)) or "the checkout's code"
    found = " | ".join(f["explanation"] for f in verdict.get("findings") or []) or "no findings recorded"
    tables = ", ".join(t.name for t in job.tables)
    lines = [f"pre-flight refused {version} for {job.name} at {verdict.get('at')}: {found}",
             f"write the rollout request {control}/rollout.json (destructive): {job.name} from {running} to {version}; "
             "its supervisor carries it out",
             f"stop: the supervisor stops the job's standby, then the driver ({driver}) after its micro-batch",
             f"reset: holding the job's lease, move the checkpoint {lake.checkpoint_path(job.name)} and the tables "
             f"{tables} to {control}/backups/rollout-<the request's id>/ (checkpoint/, tables/<table>/), kept for the "
             "record",
             f"start {version} on a new checkpoint (not a restart: none of the budget): it reads the whole input of "
             f"{job.name} again and writes every table anew with its code and schema, each record once",
             "during the rebuild the tables hold only what the new version has written so far: readers see them fill "
             f"up from empty until its backlog is 0 (python -m spark_jobs checkpoint inspect {job.name}); input no "
             "longer in the landing (deleted since) is only in the backup's tables",
             f"no probation and no rollback by itself (the old checkpoint does not fit the new tables): the way back "
             f"is a destructive rollout to {running}, or the backup moved back while the job is stopped"]
    after = downstream_jobs(job)
    if after:
        lines.append(f"then reset_checkpoint of {', '.join(after)} (each reads one of these tables as a stream; its "
                     "checkpoint points into the tables moved aside)")
    return lines
