"""A stopped job's checkpoint (and, for a destructive rollout, its tables) moved to a backup folder while holding the
job's lease, so that no driver can start on it meanwhile: ``reset_checkpoint`` and the destructive rollout
(docs/deploying.md). The backup is kept for the record; moving it back, while the job is stopped, undoes the move.
Local lakes only, like the checkpoint's other file moves. No pyspark here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from spark_jobs.control.checkpoint.lease import Lease, LeaseHeld
from spark_jobs.model.errors import UsageError
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake


class MoveRefused(UsageError):
    """The move was not made (a driver holds the lease, or the backup exists already): the message says why."""


def move_under_lease(lake: Lake, job: JobSpec, moves: list[tuple[Path, Path]], holder: str) -> list[dict]:
    """Move each existing ``(source, backup)`` of ``moves`` while holding ``job``'s lease; returns what moved.

    :param holder: who holds the lease meanwhile (its details' ``holder``: the lease's own record).
    :raises MoveRefused: a backup exists already (the move was made before), or a live driver holds the lease.
    """
    for _, backup in moves:
        if backup.exists():
            raise MoveRefused(f"the backup {backup} exists already: this request was carried out before")
    try:
        lease = Lease.acquire(str(lake.control_path(job.name)), job.name, job.health.lease_ttl_seconds,
                              details={"holder": holder})
    except LeaseHeld as held:
        raise MoveRefused(f"a driver holds the checkpoint: {held.holder.describe()}; stop the job first") from None
    moved = []
    try:
        lease.start_heartbeat()
        for source, backup in moves:
            if not source.exists():
                continue
            backup.parent.mkdir(parents=True, exist_ok=True)
            lease.check()  # still ours (fenced): nothing moves once another holder could write
            shutil.move(str(source), str(backup))
            moved.append({"from": str(source), "to": str(backup)})
    finally:
        lease.release()
    return moved
