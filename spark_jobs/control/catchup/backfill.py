"""Backfills: a checked request to load historical files of a date range into a job's live tables.

A backfill is an available-now run of the job over a ``source`` folder, with a checkpoint of its own
(one per source and date range: :attr:`BackfillRequest.writer`), writing into the same Delta tables as
the live stream. Delta's idempotent writes and the tables' unique keys make it exactly once beside
the live job, other backfills and files delivered again (see :mod:`spark_jobs.driver.write.delta_writer`).

Files are selected by their delivery time, as the job's key layout declares it
(:class:`~spark_jobs.model.layout.KeyLayout`: CloudTrail's object name ``..._20240301T0805Z_...``, else its
``YYYY/MM/DD`` folders; Cowrie's ``cowrie.json.2018-05-19``); a file whose key carries none is not part of any
dated backfill (modification times are not used: a copy of old logs does not keep them). The listing visits
only the date folders of the range (:mod:`spark_jobs.control.discovery.listing`), and the run's discovery
selects the same files, so nothing outside the range is listed past its folder or read. A request may give
a time window instead of dates (``time_from`` inclusive, ``time_to`` exclusive: an Airflow data interval).
Backfills run at a lower CPU priority than the live job
(:attr:`~spark_jobs.model.jobs.JobSpec.backfill_priority`, :mod:`spark_jobs.control.catchup.priority`).

Everything a form or a command line supplies is checked here before anything runs, and nothing
else reaches a shell or spark-submit: a refused request raises :class:`BackfillRefused` naming the
field. No pyspark: Airflow imports this while a task validates a form.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.model.errors import UsageError
from spark_jobs.model.input_roots import (MAX_FILES_PER_TRIGGER, ROOTS_ENV_SUFFIX, SHELL_METACHARACTERS,
                                          configured_roots)
from spark_jobs.model.lake import as_path
from spark_jobs.model.object_store import is_object_store
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.times import parse_utc, utc_iso
from spark_jobs.registry import get_job


class BackfillRefused(UsageError):
    """A backfill request that is not run, with the field at fault and what to do.

    :param field: the form field (``source``, ``date_from``, ...).
    :param message: what is wrong with its value.
    """

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class BackfillRequest:
    """A checked backfill: which job, which files, how fast.

    :param job: the registry job.
    :param source: the folder to read (resolved: no ``..``, no symlink out of its root).
    :param date_from: the first delivery date (UTC) to load; ``None`` with ``date_to`` ``None``: every
        file of ``source``, dated or not.
    :param date_to: the last delivery date (UTC) to load, inclusive.
    :param max_files_per_trigger: files per micro-batch; ``None``: the registry's.
    :param dry_run: list the files, write nothing.
    :param time_window: ``(start, end)`` (aware UTC datetimes, end exclusive) instead of dates: the files
        whose delivery time (the job's key layout) lies in it (an Airflow run's data interval).
    """

    job: JobSpec
    source: Path
    date_from: dt.date | None
    date_to: dt.date | None
    max_files_per_trigger: int | None = None
    dry_run: bool = False
    time_window: tuple[dt.datetime, dt.datetime] | None = None

    @property
    def writer(self) -> str:
        """The backfill's writer name: its checkpoint is ``<lake>/checkpoints/<job>@<writer>``.

        The same source and range always get the same name, so a rerun resumes (and adds nothing).
        """
        digest = hashlib.sha256(str(self.source).encode()).hexdigest()[:10]
        if self.time_window is not None:
            start, end = self.time_window
            return f"backfill-{start:%Y%m%dT%H%M%SZ}-{end:%Y%m%dT%H%M%SZ}-{digest}"
        if self.file_dates is None:
            return f"backfill-all-{digest}"
        return f"backfill-{self.date_from:%Y%m%d}-{self.date_to:%Y%m%d}-{digest}"

    @property
    def delivered(self) -> tuple[dt.datetime, dt.datetime] | None:
        """The delivery times selected (end exclusive), from the dates or the time window; ``None``: every file."""
        if self.time_window is not None:
            return self.time_window
        if self.file_dates is None:
            return None
        first, last = (dt.datetime(d.year, d.month, d.day, tzinfo=dt.timezone.utc) for d in self.file_dates)
        return first, last + dt.timedelta(days=1)

    def file_source_options(self) -> dict[str, str]:
        """The file-source options of the backfill's run: the registry's, with its files per micro-batch."""
        options = dict(self.job.file_source_options)
        if self.max_files_per_trigger is not None:
            options["maxFilesPerTrigger"] = str(self.max_files_per_trigger)
        return options

    @property
    def file_dates(self) -> tuple[dt.date, dt.date] | None:
        """The delivery dates selected, or ``None`` for every file of the source."""
        return None if self.date_from is None else (self.date_from, self.date_to)

    def cli_args(self) -> list[str]:
        """The arguments of ``python -m spark_jobs backfill`` for this request (all checked values)."""
        args = ["backfill", self.job.name, "--source", str(self.source)]
        if self.time_window is not None:
            args += ["--time-from", utc_iso(self.time_window[0]), "--time-to", utc_iso(self.time_window[1])]
        elif self.file_dates is not None:
            args += ["--date-from", self.date_from.isoformat(), "--date-to", self.date_to.isoformat()]
        if self.max_files_per_trigger is not None:
            args += ["--max-files-per-trigger", str(self.max_files_per_trigger)]
        return args + (["--dry-run"] if self.dry_run else [])


def input_roots(job: JobSpec) -> list[Path]:
    """The folders a backfill of ``job`` may read under (:func:`~spark_jobs.model.input_roots.configured_roots`),
    symlinks resolved."""
    return [as_path(r) if is_object_store(r) else Path(r).resolve() for r in configured_roots(job)]


def _check_url_source(job: JobSpec, source: str, roots: list[Path], allowed: str) -> Path:
    """An S3 source (``s3a://bucket/AWSLogs/...``): under a URL root, no ``..``, an existing prefix."""
    text = source.rstrip("/")
    if ".." in text.split("://", 1)[1].split("/"):
        raise BackfillRefused("source", f"{source!r} contains '..'; give the prefix's plain URL under {allowed}")
    if not any(text == str(root) or text.startswith(f"{root}/") for root in roots if is_object_store(str(root))):
        raise BackfillRefused("source", f"{source!r} is not under an input root of job {job.name}; allowed: "
                                        f"{allowed} (set ${job.name.upper()}{ROOTS_ENV_SUFFIX} or the registry's "
                                        "input_roots to add one)")
    path = as_path(text)
    if not path.is_dir():
        raise BackfillRefused("source", f"{source!r} is not an existing folder (no object under it)")
    return path


def check_request(job: str, source: str | None, date_from, date_to, max_files_per_trigger=None,
                  dry_run: bool = False, today: dt.date | None = None, time_from=None, time_to=None,
                  now: dt.datetime | None = None) -> BackfillRequest:
    """Check every field of a backfill request; the first bad one is refused.

    :param job: a registry job's name.
    :param source: an absolute folder (or ``file://`` URL) under one of :func:`input_roots`.
    :param date_from: ``YYYY-MM-DD`` (or a date); empty: the earliest date there is (when ``date_to`` is
        given), or no date range at all (when neither is: every file, dated or not).
    :param date_to: ``YYYY-MM-DD`` (or a date), not before ``date_from`` and not after ``today``; empty:
        today (UTC).
    :param max_files_per_trigger: ``None`` or an integer from 1 to :data:`MAX_FILES_PER_TRIGGER`.
    :param today: the current UTC date (for tests).
    :param time_from: instead of dates: the first delivery time, ISO-8601 (UTC unless it names an
        offset) or an aware datetime; needs ``time_to``.
    :param time_to: the end of the time window (exclusive), after ``time_from``, not in the future.
    :param now: the current time (for tests).
    :raises BackfillRefused: naming the field and what to do.
    """
    try:
        spec = get_job(str(job))
    except UsageError as exc:
        raise BackfillRefused("job", str(exc)) from None
    if not spec.accepts_backfill:
        raise BackfillRefused("job", f"{spec.name} reads {spec.source.describe()} into tables that are not insert-only "
                                     "by key: a second writer would count or overwrite wrongly; reprocess it with a "
                                     "new checkpoint instead")
    path = check_source(spec, source)
    now = now or dt.datetime.now(dt.timezone.utc)
    dated = any(v not in (None, "") for v in (date_from, date_to, time_from, time_to))
    if dated and getattr(spec.source, "layout", None) is None:
        raise BackfillRefused("date_from", f"{spec.name}'s file source declares no key layout, so its files carry no "
                                           "delivery time; backfill it without dates or times")
    today = today or now.date()
    window = _time_window(time_from, time_to, now, dated=date_from not in (None, "") or date_to not in (None, ""))
    no_from, no_to = date_from in (None, ""), date_to in (None, "")
    if no_from and no_to:
        first = last = None
    else:
        first = dt.date.min if no_from else _date("date_from", date_from)
        last = today if no_to else _date("date_to", date_to)
    if first is None:
        pass
    elif first > last:
        raise BackfillRefused("date_to", f"{last} is before date_from {first}: the range runs backwards")
    elif last > today:
        raise BackfillRefused("date_to", f"{last} is in the future (today is {today} UTC)")
    if max_files_per_trigger not in (None, ""):
        if isinstance(max_files_per_trigger, bool) or not str(max_files_per_trigger).isdigit() or not (
                1 <= int(max_files_per_trigger) <= MAX_FILES_PER_TRIGGER):
            raise BackfillRefused("max_files_per_trigger", f"{max_files_per_trigger!r} is not a whole number from 1 "
                                                           f"to {MAX_FILES_PER_TRIGGER}")
        max_files_per_trigger = int(max_files_per_trigger)
    else:
        max_files_per_trigger = None
    if not isinstance(dry_run, bool):
        raise BackfillRefused("dry_run", f"{dry_run!r} is not true or false")
    return BackfillRequest(spec, path, first, last, max_files_per_trigger, dry_run, window)


def parse_time(field: str, value) -> dt.datetime:
    """An aware UTC datetime from an ISO-8601 text (UTC unless it names an offset) or a datetime.

    :raises BackfillRefused: (``field``) for anything else.
    """
    try:
        return parse_utc(value, field)
    except UsageError:
        raise BackfillRefused(field, f"{value!r} is not a time (ISO-8601, e.g. 2024-03-01T08:00:00Z)") from None


def _time_window(time_from, time_to, now: dt.datetime, dated: bool) -> tuple[dt.datetime, dt.datetime] | None:
    no_from, no_to = time_from in (None, ""), time_to in (None, "")
    if no_from and no_to:
        return None
    if dated:
        raise BackfillRefused("time_from", "give either dates (date_from, date_to) or a time window (time_from, "
                                           "time_to), not both")
    if no_from or no_to:
        missing = "time_from" if no_from else "time_to"
        raise BackfillRefused(missing, "is required with the other end of the time window")
    start, end = parse_time("time_from", time_from), parse_time("time_to", time_to)
    if end <= start:
        raise BackfillRefused("time_to", f"{utc_iso(end)} is not after time_from {utc_iso(start)}: the window is empty "
                                         "or runs backwards")
    if end > now:
        raise BackfillRefused("time_to", f"{utc_iso(end)} is in the future (now is {utc_iso(now)})")
    return start, end


def check_source(job: JobSpec, source: str | None) -> Path:
    """The resolved folder of ``source``, if it is an existing folder under one of the job's input roots.

    :raises BackfillRefused: (field ``source``) for an empty value, a relative path, shell
        metacharacters, a ``..`` part, a scheme other than ``file://`` (an S3 URL is read when an input root
        is one), a folder that does not exist and a path (or a symlink) that leads out of every root.
    """
    roots = input_roots(job)
    allowed = ", ".join(str(r) for r in roots) or "(none configured)"
    if not isinstance(source, str) or not source.strip():
        raise BackfillRefused("source", f"is required: an absolute folder under {allowed}")
    bad = sorted(set(source) & SHELL_METACHARACTERS)
    if bad:
        raise BackfillRefused("source", f"{source!r} contains {' '.join(repr(c) for c in bad)}; a log folder's path "
                                        "has none of these")
    text = source
    if is_object_store(text) and any(is_object_store(str(root)) for root in roots):
        return _check_url_source(job, source, roots, allowed)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        if scheme != "file":
            raise BackfillRefused("source", f"{source!r}: the {scheme}:// scheme is not readable here; give a local "
                                            f"folder under {allowed}")
        text = text[len("file://"):]
    if not text.startswith("/"):
        raise BackfillRefused("source", f"{source!r} is not an absolute path; give a folder under {allowed}")
    if ".." in text.split("/"):
        raise BackfillRefused("source", f"{source!r} contains '..'; give the folder's plain path under {allowed}")
    path = Path(text)
    if not path.is_dir():
        raise BackfillRefused("source", f"{source!r} is not an existing folder")
    resolved = path.resolve()
    if not any(resolved == root or root in resolved.parents for root in roots):
        via = f" (it leads to {resolved} through a symlink)" if resolved != path else ""
        raise BackfillRefused("source", f"{source!r} is not under an input root of job {job.name}{via}; allowed: "
                                        f"{allowed} (set ${job.name.upper()}{ROOTS_ENV_SUFFIX} or the registry's "
                                        "input_roots to add one)")
    return resolved


def _date(field: str, value) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise BackfillRefused(field, f"{value!r} is not a date (YYYY-MM-DD)")


@dataclass(frozen=True)
class FileListing:
    """The files a backfill selects.

    :param files: input files in the range, sorted.
    :param out_of_range: files listed in the range's folders but delivered outside it (folders outside the range
        are not listed at all).
    :param undated: files whose key carries no delivery time, left out of a dated backfill.
    """

    files: list[str]
    out_of_range: int
    undated: int

    def summary(self, shown: int = 20) -> dict:
        return {"files": len(self.files), "out_of_range": self.out_of_range, "undated": self.undated,
                "first_files": self.files[:shown]}


def list_files(request: BackfillRequest) -> FileListing:
    """The input files of ``request``: those its run's discovery reads (the job's glob and hidden-name rules), in
    its delivery range by the job's key layout, found by a walk of the range's date folders only."""
    from spark_jobs.control.discovery.listing import walk
    from spark_jobs.control.checkpoint.listing import list_input
    from spark_jobs.control.checkpoint.store import Location, normalize_file_uri

    layout = getattr(request.job.source, "layout", None)
    options = dict(request.job.file_source_options)
    if layout is None:  # every file (a dated request was refused): Spark's file source's listing
        listed = sorted(normalize_file_uri(f.key) for f in list_input(Location.of(request.source), options))
        return FileListing(listed, 0, 0)
    first, last = request.delivered or (None, None)
    found = walk(str(request.source), layout, options.get("pathGlobFilter"), since=first, until=last,
                 dated_only=request.delivered is not None)
    files = sorted(_plain(f.key) for f in found.files)
    return FileListing(files, found.skipped_old + found.skipped_later, found.undated)


def _plain(key: str) -> str:
    """A listed key as people name the file: a local path without ``file:``, a URL as it is."""
    return key[len("file:"):] if key.startswith("file:") else key
