"""What the landing-folder watcher of a data-driven catch-up decides at each poll: did input land since the last
look? (no Airflow, no pyspark).

The watcher (:class:`streaming.triggers.landing_files.LandingFilesTrigger`, an Airflow event trigger behind the Asset
``<job>_landing``) lists, every ``poll_seconds``, the files waiting for the job: for a job that discovers its files
by key layout, the same bounded walk its stream makes from its checkpoint's window
(:func:`spark_jobs.control.discovery.backlog.waiting_files`: only the folders of the window, whatever the
landing's history); for another, the listing Spark's file source would make
(:func:`spark_jobs.control.checkpoint.listing.list_input`). Both apply the hidden-name and ``pathGlobFilter``
rules, so a file still being written under a temporary name fires nothing. It compares the names with the
previous poll's (:meth:`LandingWatch.poll`): new names fire one event, however many there are, and at most one
event per ``coalesce_seconds`` (the registry's :class:`~spark_jobs.model.catchup.CatchupTrigger`): files that land
sooner after the last event are gathered into one event at the end of that time, so a trickle of deliveries
makes a few runs a minute, not one per file, while a landing after a quiet spell fires at once. While the
continuous driver owns the job (its lease, its active supervisor), nothing fires: a catch-up run would only step
aside, and the driver ingests the files. No new name, no event: an idle folder never starts a run, however long
it stays idle (the cron is the safety net).

The first listing is the baseline: files already there when the watcher starts (a triggerer restart, a new
deployment) fire nothing; the next scheduled run reads them, as it reads anything the watcher missed. The
watcher only decides *when* to run: what a run reads is the job's checkpoint's business (every file once).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_jobs.control.checkpoint.listing import list_input
from spark_jobs.control.checkpoint.store import Location
from spark_jobs.registry import get_job


def landing_names(job_name: str, folder: str, lake_root: str | None = None) -> frozenset[str]:
    """The input files of ``job_name`` under ``folder`` (a path or fsspec URL) that its stream would read next:
    those its discovery would find now (its checkpoint in ``lake_root``, default ``$LAKE_ROOT``), or for a job
    without a key layout every file Spark's file source would list; a folder that does not exist (yet) holds
    none. Blocking: the trigger calls it in a thread."""
    job = get_job(job_name)
    if job.discovers_files:
        from spark_jobs.control.discovery.backlog import waiting_files
        from spark_jobs.control.discovery.settings import discovery_settings
        from spark_jobs.model.lake import Lake

        checkpoint = Lake.at(lake_root).checkpoint_path(job.name)
        settings = discovery_settings(job, folder, str(checkpoint), dict(job.file_source_options))
        return frozenset(f.key for f in waiting_files(settings))
    root = Location.of(folder)
    try:
        return frozenset(f.key for f in list_input(root, dict(job.file_source_options)))
    except FileNotFoundError:
        return frozenset()


@dataclass
class LandingWatch:
    """The names seen so far, those not yet told of, and what each poll's listing says.

    :param seen: the names of the previous listing; ``None`` before the first (the baseline).
    :param coalesce_seconds: at most one event in this long (see the module's doc); 0: one at every poll with news.
    """

    seen: frozenset[str] | None = None
    coalesce_seconds: float = 0.0
    polls: int = field(default=0)
    pending: frozenset[str] = field(default=frozenset())
    fired_at: float | None = None

    def poll(self, listed: frozenset[str], now: float = 0.0, owned_by: str | None = None) -> dict | None:
        """Compare ``listed`` with the previous listing.

        :param now: the time of the listing (``time.monotonic()``), for ``coalesce_seconds``.
        :param owned_by: why the continuous job owns the job now (:func:`~spark_jobs.control.supervision.ownership.
            continuous_owner`), or ``None``: while it does, new files are its own and fire nothing.
        :returns: ``None`` (nothing new, the baseline, owned, or news held until ``coalesce_seconds`` after the last
            event), or the event's payload: how many files are new and the first and last of them by name.
        """
        self.polls += 1
        previous, self.seen = self.seen, frozenset(listed)
        if previous is None:
            return None
        # names gone from the listing (read by a run, moved away) are no longer news
        self.pending = (self.pending & self.seen) | (self.seen - previous)
        if owned_by is not None:
            self.pending = frozenset()
            return None
        if not self.pending or (self.fired_at is not None and now - self.fired_at < self.coalesce_seconds):
            return None
        new, self.pending, self.fired_at = sorted(self.pending), frozenset(), now
        return {"new_files": len(new), "first": new[0], "last": new[-1], "listed": len(listed)}
