"""The event trigger behind a data-driven catch-up: fires when input files land in a job's landing folder.

An Airflow ``AssetWatcher`` runs it in the triggerer for the Asset ``<job>_landing``
(:func:`streaming.dag_parts.landing_asset`); each event it yields is an asset event, and the catch-up DAG,
scheduled on that Asset or its cron (``AssetOrTimeSchedule``), starts one available-now run for all events queued
(``max_active_runs=1``: events that come while a run is active wait, coalesced, for the next one).

Airflow's own file triggers do not fit: ``FileTrigger`` waits for one path to exist and ends, the
``*DeleteTrigger`` ones delete what they find (the job must read it); Kafka's message-queue trigger
(``MessageQueueTrigger``) needs the common-messaging provider, which is not installed here, so only file jobs
are watched. This one lists the folder or bucket prefix every ``poll_seconds`` in a thread
(``asyncio.to_thread``: a listing, local or fsspec, never blocks the triggerer's event loop), and the decision is
:class:`spark_jobs.control.catchup.landing_watch.LandingWatch`'s: new names since the previous listing fire one event,
at most one per ``coalesce_seconds``, and none while the continuous driver owns the job (it ingests them).
It lives in ``plugins/`` because the triggerer imports it; importing it reads nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseEventTrigger, TriggerEvent


class LandingFilesTrigger(BaseEventTrigger):
    """Yield an event each time new input files of ``job`` are listed in its landing folder; runs until cancelled.

    :param job: the registry job (its ``file_source_options`` decide which names are input, as in Spark).
    :param input_path: the folder or fsspec URL to watch; ``None``: the job's input in the triggerer's environment
        (``$<JOB>_INPUT``, else the registry's ``default_input``), resolved when the trigger starts.
    :param poll_seconds: seconds between listings.
    :param coalesce_seconds: at most one event in this long; files that land sooner wait, gathered, for the next
        (:class:`~spark_jobs.control.catchup.landing_watch.LandingWatch`).
    """

    def __init__(self, job: str, input_path: str | None = None, poll_seconds: float = 10.0,
                 coalesce_seconds: float = 0.0) -> None:
        super().__init__()
        self.job = job
        self.input_path = input_path
        self.poll_seconds = poll_seconds
        self.coalesce_seconds = coalesce_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"job": self.job, "input_path": self.input_path, "poll_seconds": self.poll_seconds,
                 "coalesce_seconds": self.coalesce_seconds})

    def folder(self) -> str:
        from spark_jobs.control.catchup.plan import job_input

        return self.input_path or job_input(self.job, None)

    def look(self, folder: str) -> tuple[frozenset[str], str | None]:
        """The job's waiting input files, and whether the continuous job owns it now (blocking: run in a thread)."""
        from spark_jobs.control.catchup.landing_watch import landing_names
        from spark_jobs.control.supervision.ownership import continuous_owner
        from spark_jobs.model.lake import Lake

        listed = landing_names(self.job, folder)
        try:
            owner = continuous_owner(self.job, str(Lake.at().control_path(self.job)))
        except OSError as exc:  # an unreadable lease or state: the catch-up run's plan decides
            self.log.warning("could not read who owns %s (%s); treating it as not owned", self.job, exc)
            owner = None
        return listed, owner

    async def run(self) -> AsyncIterator[TriggerEvent]:
        import time

        from spark_jobs.control.catchup.landing_watch import LandingWatch

        folder = self.folder()
        watch = LandingWatch(coalesce_seconds=self.coalesce_seconds)
        owned = None
        self.log.info("watching %s for input of %s every %g s (at most one event every %g s)", folder, self.job,
                      self.poll_seconds, self.coalesce_seconds)
        while True:
            try:
                listed, owner = await asyncio.to_thread(self.look, folder)
            except OSError as exc:  # a transient listing error (NFS, a bucket's throttling): try at the next poll
                self.log.warning("listing %s failed (%s); next try in %g s", folder, exc, self.poll_seconds)
            else:
                if owner != owned:
                    owned = owner
                    if owner:
                        self.log.info("%s: new files fire nothing while it is so", owner)
                    else:
                        self.log.info("%s is not owned by its continuous job: new files fire events", self.job)
                landed = watch.poll(listed, time.monotonic(), owner)
                if landed is not None:
                    self.log.info("%d new input files of %s in %s (%s ... %s)", landed["new_files"], self.job,
                                  folder, landed["first"], landed["last"])
                    yield TriggerEvent({"job": self.job, "folder": folder, **landed})
            await asyncio.sleep(self.poll_seconds)
