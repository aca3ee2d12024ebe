"""What starts a job's catch-up run (``<job>_catchup``): the cron alone, or the data landing with the cron as a
safety net (no pyspark, no Airflow).

A job whose :class:`CatchupTrigger` says ``on="data"`` gets an Asset ``<job>_landing`` watched by an event trigger
(:mod:`streaming.triggers.landing_files`) that lists the job's landing folder every ``poll_seconds`` and fires
when files appear; Airflow queues the events and starts one available-now run for all of them
(``max_active_runs=1``), and the cron still starts a run when no event came. Only a job that reads files can be
watched so: a Kafka job's message-queue trigger needs Airflow's common-messaging provider (not installed here),
and a job that reads another job's table is already fed when that job's catch-up writes (its table Asset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_jobs.model.errors import RegistryError

if TYPE_CHECKING:
    from spark_jobs.model.streams import SourceSpec

SCHEDULES = ("cron", "data")
# A watcher that lists more often than this burdens the landing folder (or the bucket) for nothing.
MIN_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class CatchupTrigger:
    """When a job's catch-up DAG runs.

    :param on: ``cron``: on the job's ``schedule`` only; ``data``: when input lands (an Asset watcher on the
        landing folder), and on the ``schedule`` as a safety net.
    :param poll_seconds: ``data`` only: how often the watcher lists the landing folder (a run starts within
        about this long after the first file of a burst, plus the scheduler's loop).
    :param coalesce_seconds: ``data`` only: the watcher fires at most once in this long; files that land sooner after
        its last event wait, gathered, for one event at the end of it (a trickle of deliveries is a few runs a
        minute, not one per file; a landing after a quiet spell still fires at its first poll).
    """

    on: str = "cron"
    poll_seconds: float = 10.0
    coalesce_seconds: float = 15.0

    def check(self, job: str, source: SourceSpec) -> None:
        """Refuse a trigger that does not fit the job.

        :raises RegistryError: naming the job, the field, the value and the fix.
        """
        if self.on not in SCHEDULES:
            raise RegistryError(f"job {job}: catchup.on {self.on!r} is not one of {', '.join(SCHEDULES)}")
        if isinstance(self.poll_seconds, bool) or not isinstance(self.poll_seconds, (int, float)) or \
                self.poll_seconds < MIN_POLL_SECONDS:
            raise RegistryError(f"job {job}: catchup.poll_seconds {self.poll_seconds!r} must be a number of seconds "
                                f">= {MIN_POLL_SECONDS:g}")
        if isinstance(self.coalesce_seconds, bool) or not isinstance(self.coalesce_seconds, (int, float)) or \
                self.coalesce_seconds < 0:
            raise RegistryError(f"job {job}: catchup.coalesce_seconds {self.coalesce_seconds!r} must be a number of "
                                "seconds >= 0 (0: fire at every poll that finds new files)")
        if self.on == "data" and not source.lands_files:
            raise RegistryError(f"job {job}: catchup.on 'data' watches a landing folder, but the job reads "
                                f"{source.describe()}; use on='cron' (a table-fed job can schedule on its source "
                                "table's Asset)")
