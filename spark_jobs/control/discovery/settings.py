"""How one stream discovers its input: :class:`DiscoverySettings`, carried to the source as string options.

The runner builds them from the registry (the job's :class:`~spark_jobs.model.layout.KeyLayout` and file-source
options) and the run's options (a backfill's delivery range, ``--start-at``, ``--lookback``, a queue), and
hands them to the Spark source (:mod:`spark_jobs.driver.sources.landing`) as its options; the control plane
(``checkpoint inspect``, the nothing-new check, the landing watcher) builds the same from the job alone.
No pyspark.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, fields
from typing import Mapping

from spark_jobs.model.errors import UsageError
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.layout import KeyLayout
from spark_jobs.model.times import duration_seconds, parse_utc, utc_iso

OPTION_PREFIX = "discovery."
QUEUE_ENV_SUFFIX = "_QUEUE_URL"
VISIBILITY_ENV_SUFFIX = "_QUEUE_VISIBILITY_SECONDS"
LOOKBACK_ENV_SUFFIX = "_LOOKBACK"
# A received notification is hidden from other receivers this long. Short is safe: a message that comes back
# while its file's batch still runs is recognised as seen (the window) and deleted; what a killed driver had
# received but not yet put in a manifest comes back this soon.
DEFAULT_VISIBILITY_SECONDS = 60


@dataclass(frozen=True)
class DiscoverySettings:
    """How a stream finds its files.

    :param job: the registry job (its layout), or a writer's stream of it (``job@writer``).
    :param root: the landing: a folder, ``file:`` URL or ``s3a://bucket/prefix``.
    :param checkpoint: the stream's checkpoint (its ``discovery/`` log).
    :param glob: the file-name filter (the job's ``pathGlobFilter``), or ``None``.
    :param max_files: files per micro-batch (``maxFilesPerTrigger``), or ``None``.
    :param latest_first: newest files first (``latestFirst``).
    :param lookback: how far behind the newest delivery discovery keeps looking (the layout's, or an override).
    :param start_at: a new stream ignores files delivered before this (history comes in by backfill).
    :param delivered_from: only files delivered at or after this (a backfill's range).
    :param delivered_to: only files delivered before this (a backfill's range end, exclusive).
    :param dated_only: only files whose key carries a delivery time (a dated backfill).
    :param queue_url: read S3 event notifications from this SQS queue instead of listing.
    :param file_list: a JSON file of candidate rows to admit instead of listing (a reconcile's missed files).
    :param parallelism: the Spark tasks a micro-batch's files are read by.
    :param visibility_seconds: how long a received notification stays hidden from other receivers.
    """

    job: str
    root: str
    checkpoint: str
    glob: str | None = None
    max_files: int | None = None
    latest_first: bool = False
    lookback: str | None = None
    start_at: str | None = None
    delivered_from: str | None = None
    delivered_to: str | None = None
    dated_only: bool = False
    queue_url: str | None = None
    file_list: str | None = None
    parallelism: int = 2
    visibility_seconds: int = DEFAULT_VISIBILITY_SECONDS

    @property
    def layout(self) -> KeyLayout | None:
        from spark_jobs.registry import get_job

        return getattr(get_job(self.job.split("@", 1)[0]).source, "layout", None)  # a writer's stream: job@writer

    @property
    def lookback_seconds(self) -> float:
        if self.lookback:
            return duration_seconds(self.lookback, "lookback")
        layout = self.layout
        return layout.lookback_seconds if layout is not None else duration_seconds("7 days")

    def moment(self, name: str) -> dt.datetime | None:
        value = getattr(self, name)
        return None if value in (None, "") else parse_utc(value, name)

    def to_options(self) -> dict[str, str]:
        """The settings as the source's string options (``discovery.<field>``)."""
        out = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is not None:
                out[OPTION_PREFIX + spec.name] = json.dumps(value)
        return out

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> "DiscoverySettings":
        """The settings back from the source's options (case-insensitive keys, as Spark passes them)."""
        lower = {str(k).lower(): v for k, v in options.items()}
        given = {}
        for spec in fields(cls):
            text = lower.get((OPTION_PREFIX + spec.name).lower())
            if text is not None:
                given[spec.name] = json.loads(text)
        return cls(**given)

    def describe(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in (None, False)}


def discovery_settings(job: JobSpec, root: str, checkpoint: str, source_options: Mapping[str, str], *,
                       start_at: dt.datetime | None = None, lookback: str | None = None,
                       delivered: tuple[dt.datetime | None, dt.datetime | None] | None = None,
                       dated_only: bool = False, queue_url: str | None = None, file_list: str | None = None,
                       parallelism: int = 2) -> DiscoverySettings:
    """The settings of ``job``'s stream over ``root`` with ``checkpoint``, from its file-source options and the run's.

    ``queue_url`` and ``lookback`` default to ``$<JOB>_QUEUE_URL`` and ``$<JOB>_LOOKBACK``; a queue's visibility timeout
    is ``$<JOB>_QUEUE_VISIBILITY_SECONDS``, else :data:`DEFAULT_VISIBILITY_SECONDS`.

    :raises UsageError: a bad lookback, or a job whose source declares no key layout.
    """
    import os

    layout = getattr(job.source, "layout", None)
    if layout is None:
        raise UsageError(f"job {job.name} reads {job.source.describe()} without a key layout; discovery needs one "
                         "(declare FileSource(layout=KeyLayout(...)) in the registry)")
    lookback = lookback or os.environ.get(job.name.upper() + LOOKBACK_ENV_SUFFIX) or None
    if lookback:
        duration_seconds(lookback, "lookback")
    max_files = source_options.get("maxFilesPerTrigger")
    first, last = delivered or (None, None)
    return DiscoverySettings(
        job=job.name, root=str(root), checkpoint=str(checkpoint), glob=source_options.get("pathGlobFilter"),
        max_files=int(max_files) if max_files else None,
        latest_first=str(source_options.get("latestFirst", "false")).lower() == "true",
        lookback=lookback, start_at=utc_iso(start_at) if start_at else None,
        delivered_from=utc_iso(first) if first else None, delivered_to=utc_iso(last) if last else None,
        dated_only=dated_only, queue_url=queue_url or os.environ.get(job.name.upper() + QUEUE_ENV_SUFFIX) or None,
        file_list=file_list, parallelism=max(1, int(parallelism)),
        visibility_seconds=int(os.environ.get(job.name.upper() + VISIBILITY_ENV_SUFFIX) or DEFAULT_VISIBILITY_SECONDS))


def run_settings(job: JobSpec, options, parallelism: int = 2) -> DiscoverySettings:
    """The settings of one run of ``job`` (its :class:`~spark_jobs.model.runs.RunOptions`): its input, checkpoint,
    file-source options, delivery range (a dated backfill reads only files dated in it), start and queue."""
    return discovery_settings(job, str(options.input_path), str(options.checkpoint_path(job.name)),
                              options.file_source_options, start_at=options.start_at, lookback=options.lookback,
                              delivered=options.delivered, dated_only=options.delivered is not None,
                              queue_url=options.queue_url, file_list=options.file_list, parallelism=parallelism)
