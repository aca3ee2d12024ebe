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
:class:`spark_jobs.control.catchup.landing_watch.LandingWatch`'s: new names since the previous listing fire one event.
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
    """

    def __init__(self, job: str, input_path: str | None = None, poll_seconds: float = 10.0) -> None:
        super().__init__()
        self.job = job
        self.input_path = input_path
        self.poll_seconds = poll_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"job": self.job, "input_path": self.input_path, "poll_seconds": self.poll_seconds})

    def folder(self) -> str:
        from spark_jobs.control.catchup.plan import job_input

        return self.input_path or job_input(self.job, None)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from spark_jobs.control.catchup.landing_watch import LandingWatch, landing_names

        folder = self.folder()
        watch = LandingWatch()
        self.log.info("watching %s for input of %s every %g s", folder, self.job, self.poll_seconds)
        while True:
            try:
                listed = await asyncio.to_thread(landing_names, self.job, folder)
            except OSError as exc:  # a transient listing error (NFS, a bucket's throttling): try at the next poll
                self.log.warning("listing %s failed (%s); next try in %g s", folder, exc, self.poll_seconds)
            else:
                landed = watch.poll(listed)
                if landed is not None:
                    self.log.info("%d new input files of %s in %s (%s ... %s)", landed["new_files"], self.job,
                                  folder, landed["first"], landed["last"])
                    yield TriggerEvent({"job": self.job, "folder": folder, **landed})
            await asyncio.sleep(self.poll_seconds)
