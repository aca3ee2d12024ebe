"""The checkpoint doctor: ``python -m spark_jobs checkpoint repair JOB [--apply]``.

It fixes only what is provably safe, after backing the checkpoint up, and never touches a table:

- left-over temp files (``.N.<uuid>.tmp``) and orphan checksums of interrupted writes: deleted;
- a torn or empty last offsets file of a batch no table holds: deleted (Spark plans the batch again);
- a torn last commit file: deleted (Spark re-runs the batch; the tables that hold it skip it);
- an offsets log more than one batch ahead of the commits: the offsets beyond
  ``max(last commit + 1, last batch any table holds)`` are deleted, because Spark would otherwise
  run only the last planned batch and treat the ones before it as done. It is safe exactly when no
  table holds those batches: each table's Delta ``txn`` version for the app id
  "<query id>:<table>" (or the file sink's batch log) is checked first;
- a deleted or unreadable ``metadata`` (the query id): written back only when the tables prove the
  id: exactly one id among their Delta app ids "<id>:<table>" whose batches match the checkpoint's.

Everything else is refused with the reason and the manual way out (restore from a backup, or a new
checkpoint and a reprocess). A batch that reached the tables but not the checkpoint's commit log needs
no repair: the replay is skipped by each table. With ``--apply`` the doctor holds the job's lease
while it works, so no driver can start meanwhile, and it refuses while a live driver holds it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone

from spark_jobs.control.checkpoint.inspect import CheckpointReport, inspect_checkpoint, lake_location
from spark_jobs.control.checkpoint.lease import Lease, LeaseHeld
from spark_jobs.control.checkpoint.store import Location
from spark_jobs.model.jobs import JobSpec

FIXABLE = ("temp_files", "offsets_torn", "commit_torn", "offsets_ahead", "metadata_missing", "metadata_corrupt")


@dataclass
class RepairAction:
    """One change to the checkpoint.

    :param code: the problem it fixes.
    :param kind: ``delete`` or ``write``.
    :param files: checkpoint files, relative to the checkpoint folder.
    :param why: why it is safe.
    :param content: what ``write`` writes.
    """

    code: str
    kind: str
    files: list[str]
    why: str
    content: bytes | None = None

    def to_dict(self) -> dict:
        return {"code": self.code, "action": self.kind, "files": self.files, "why": self.why}


@dataclass
class RepairResult:
    """What the doctor found, did and refused; :meth:`to_dict` is the ``--json`` output."""

    job: str
    checkpoint: str
    applied: bool = False
    backup: str | None = None
    status_before: str = ""
    status_after: str | None = None
    actions: list[RepairAction] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    nothing_needed: list[dict] = field(default_factory=list)
    blocked_by: str | None = None
    pending: list[RepairAction] = field(default_factory=list)
    report: CheckpointReport | None = None

    def to_dict(self) -> dict:
        return {"job": self.job, "checkpoint": self.checkpoint, "applied": self.applied, "backup": self.backup,
                "status_before": self.status_before, "status_after": self.status_after,
                "actions": [a.to_dict() for a in self.actions], "refused": self.refused,
                "nothing_needed": self.nothing_needed, "blocked_by": self.blocked_by,
                "pending": [a.to_dict() for a in self.pending]}

    @property
    def exit_code(self) -> int:
        """0 nothing left for a person, 1 something refused, 3 a live driver holds the checkpoint."""
        if self.blocked_by:
            return 3
        return 1 if self.refused or (self.applied and self.pending) else 0


def _recover_query_id(report: CheckpointReport) -> tuple[str | None, str]:
    """The query id the tables prove, and how; (None, why not)."""
    latest_commit = report.latest_commit_batch if report.latest_commit_batch is not None else -1
    latest_offset = report.latest_offset_batch if report.latest_offset_batch is not None else -1
    candidates: dict[str, dict[str, int]] = {}
    deltas = [t for t in report.table_progress if t.format == "delta"]
    for table in deltas:
        for app_id, version in table.app_ids.items():
            query_id, _, suffix = app_id.rpartition(":")
            if query_id and suffix == table.name:
                candidates.setdefault(query_id, {})[table.name] = version
    if not deltas:
        return None, ("the tables are not Delta tables, so they record no query id (the file sink's log names "
                      "none); nothing else in the lake proves it")
    # A table is not written for a batch that has no rows for it, so the proof is: the newest batch
    # any table holds for the id lies between the last commit and the last planned batch.
    fitting = {qid: versions for qid, versions in candidates.items()
               if latest_commit <= max(versions.values()) <= latest_offset}
    if len(fitting) == 1:
        query_id, versions = next(iter(fitting.items()))
        lease_id = (report.lease.details.get("query_id") if report.lease else None)
        if lease_id and lease_id != query_id:
            return None, (f"the tables name query id {query_id} but the last driver's lease names {lease_id}; "
                          "they disagree")
        proof = ", ".join(f"{t} holds batch {v} as '{query_id}:{t}'" for t, v in sorted(versions.items()))
        return query_id, (f"the tables' Delta app ids name it and the newest batch they hold matches the "
                          f"checkpoint's (commits end at {report.latest_commit_batch}, offsets at "
                          f"{report.latest_offset_batch}): {proof}")
    if not candidates:
        return None, "no table holds a Delta app id of the form '<query id>:<table>'"
    listed = "; ".join(f"{qid}: {versions}" for qid, versions in candidates.items())
    return None, (f"no single query id fits: the tables' app ids name {listed}, and exactly one id whose batches "
                  f"on the tables reach between the last commit ({report.latest_commit_batch}) and the last planned "
                  f"batch ({report.latest_offset_batch}) is needed")


def plan_repair(report: CheckpointReport) -> RepairResult:
    """The doctor's plan for what ``report`` found (nothing is changed)."""
    result = RepairResult(report.job, report.checkpoint, status_before=report.status, report=report)
    for problem in report.problems:
        if problem.repair == "refuse":
            result.refused.append({"code": problem.code, "reason": problem.explanation, "way_out": problem.action})
        elif problem.code in ("metadata_missing", "metadata_corrupt"):
            query_id, why = _recover_query_id(report)
            if query_id is None:
                result.refused.append({"code": problem.code, "reason": f"the query id cannot be proved: {why}",
                                       "way_out": "restore `metadata` from a backup of the checkpoint, or start a new "
                                                  "checkpoint and reprocess (move the checkpoint and the tables "
                                                  "aside, run the job again)"})
                continue
            files = ["metadata"] + ([".metadata.crc"] if report.problem("metadata_corrupt") else [])
            result.actions.append(RepairAction(problem.code, "write", files,
                                               f"writes {{\"id\": \"{query_id}\"}}: {why}",
                                               content=json.dumps({"id": query_id}, separators=(",", ":")).encode()))
        elif problem.repair == "fix" and problem.code in FIXABLE:
            result.actions.append(RepairAction(problem.code, "delete", _with_crcs(report, problem.files),
                                               problem.data.get("why_safe", problem.action)))
        elif problem.severity == "info" or problem.repair == "none":
            result.nothing_needed.append({"code": problem.code, "why": problem.action})
    return result


def _with_crcs(report: CheckpointReport, files: list[str]) -> list[str]:
    """``files`` plus each one's Hadoop checksum file when there is one."""
    checkpoint = Location.of(report.checkpoint)
    out = []
    for name in files:
        out.append(name)
        folder, _, base = name.rpartition("/")
        crc = f"{folder}/.{base}.crc" if folder else f".{base}.crc"
        if not base.startswith(".") and crc not in files and checkpoint.child(crc).exists():
            out.append(crc)
    return out


def backup_checkpoint(checkpoint: Location, control: Location, now: datetime) -> Location:
    """Copy the whole checkpoint to ``<control>/backups/<UTC timestamp>/checkpoint``."""
    target = control.child("backups", now.strftime("%Y%m%dT%H%M%S.%fZ"), "checkpoint")
    if checkpoint.local:
        shutil.copytree(checkpoint.path, target.path)
    else:
        target.fs.makedirs(target.path, exist_ok=True)
        for path in checkpoint.fs.find(checkpoint.path, withdirs=False):
            relative = path[len(checkpoint.path):].lstrip("/")
            target.child(relative).write_bytes(checkpoint.fs.cat_file(path))
    return target


def _apply(result: RepairResult, checkpoint: Location) -> None:
    for action in result.actions:
        if action.kind == "write":
            for name in action.files[1:]:
                if checkpoint.child(name).exists():
                    checkpoint.child(name).remove()
            checkpoint.child(action.files[0]).write_bytes(action.content)
        else:
            for name in action.files:
                target = checkpoint.child(name)
                if target.exists():
                    target.remove()


def repair_checkpoint(job: JobSpec, lake_root: str | os.PathLike | None, apply: bool = False,
                      input_path: str | os.PathLike | None = None) -> RepairResult:
    """Inspect ``job``'s checkpoint and plan (``apply=False``) or make (``apply=True``) the safe repairs.

    With ``apply`` it takes the job's lease for the duration (refused while a live driver holds it),
    backs the checkpoint up once, applies the plan, and repeats while a fix reveals another
    (a restored query id lets the tables' batches be read).
    """
    report = inspect_checkpoint(job, lake_root, input_path)
    result = plan_repair(report)
    if not apply:
        return result
    lake = lake_location(lake_root)
    checkpoint = lake.child("checkpoints", job.name)
    control = lake.child("control", job.name)
    try:
        lease = Lease.acquire(control.url, job.name, job.health.lease_ttl_seconds,
                              details={"holder": "checkpoint repair"})
    except LeaseHeld as held:
        result.blocked_by = f"a live driver holds the checkpoint: {held.holder.describe()}; stop it, then repair"
        return result
    done: list[RepairAction] = []
    backup: str | None = None
    try:
        lease.start_heartbeat()
        for _ in range(4):  # a fix may reveal the next (a restored query id makes the tables readable)
            if not result.actions:
                break
            if backup is None:
                backup = backup_checkpoint(checkpoint, control, datetime.now(timezone.utc)).url
            lease.check()
            _apply(result, checkpoint)
            done.extend(result.actions)
            result = plan_repair(inspect_checkpoint(job, lake_root, input_path))
    finally:
        lease.release()
    final = plan_repair(inspect_checkpoint(job, lake_root, input_path))
    final.status_before = report.status
    final.status_after = final.report.status
    final.applied = True
    final.backup = backup
    final.pending = final.actions
    final.actions = done
    return final
