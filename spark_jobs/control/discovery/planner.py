"""Which files the next micro-batch reads: :class:`Discovery`, the pyspark-free half of the landing source.

Spark asks a streaming source for offsets; this answers with manifests (:mod:`spark_jobs.control.discovery.state`).

- ``latest(start)``: the files delivered since, found by a bounded listing (:mod:`~spark_jobs.control.discovery.
  listing`) or read from an SQS queue of S3 event notifications (:mod:`~spark_jobs.control.discovery.notifications`),
  minus the files already seen inside the window; at most ``max_files`` of them, oldest delivery first (newest
  first with ``latest_first``), become manifest ``M + 1``, written before the offset ``{"v": 1, "manifest": M + 1}``
  is returned. A manifest already written past ``start`` (a driver that died before Spark logged its offset) is
  returned again as it is, so the files of an offset never change.
- ``files(start, end)``: the files of the manifests between two offsets (what a micro-batch reads).
- ``committed(end)``: every offset up to ``end`` is in a committed batch: snapshot the window every ten
  manifests, drop old manifests, delete the batch's queue messages.

**The window.** After each manifest the *cut* is the newest delivery admitted minus the lookback (the layout's,
e.g. one day; never past the oldest file still waiting, nor before ``start_at``). Files delivered before the
cut are neither listed nor remembered: state, listing and restart cost follow the window, not the history. A
file that lands with a delivery time already behind the cut is left to the daily reconcile
(:mod:`~spark_jobs.control.discovery.reconcile`), which ingests it exactly once.

**From Spark's file source.** A checkpoint written by Spark's file source resumes here with its last offset
``{"logOffset": N}``: the first call reads that source's log up to N once (:func:`migrate`), keeps the files
inside the window as seen (snapshot 0, which names the move), and goes on from there; a batch Spark still has
to re-run between two ``logOffset``\\ s is read from that log. Nothing is lost or read twice, and batch ids
(and so the tables' idempotent-write versions) go on where they were.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass, field
from typing import Callable

from spark_jobs.control.checkpoint.store import Location
from spark_jobs.control.discovery.listing import Candidate, Listing, Store, Walk, store_of
from spark_jobs.control.discovery.settings import DiscoverySettings
from spark_jobs.control.discovery.state import SNAPSHOT_EVERY, DiscoveryLog, Manifest, Window

log = logging.getLogger("spark_jobs")

FORMAT = 1
UTC = dt.timezone.utc


def offset(manifest: int) -> dict:
    """The source offset of manifest ``manifest``."""
    return {"v": FORMAT, "manifest": manifest}


def manifest_of(value: dict | None) -> int | None:
    """The manifest of a discovery offset; ``None`` for anything else (a file-source offset)."""
    if isinstance(value, dict) and isinstance(value.get("manifest"), int):
        return value["manifest"]
    return None


def legacy_offset(value: dict | None) -> int | None:
    """The ``logOffset`` of an offset Spark's file source wrote (``{"logOffset": 5}``), else ``None``."""
    if isinstance(value, dict) and isinstance(value.get("logOffset"), int):
        return value["logOffset"]
    return None


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def legacy_key(path: str) -> str:
    """A file as Spark's file-source log names it (``file:///a/b%20c``) as ``binaryFile`` names it (``file:/a/b c``)."""
    from spark_jobs.control.checkpoint.store import normalize_file_uri

    normal = normalize_file_uri(path)
    return f"file:{normal}" if normal.startswith("/") else normal


def legacy_entries(checkpoint: Location) -> list[dict]:
    """Every entry of Spark's file-source log in ``checkpoint`` (``sources/0``)."""
    from spark_jobs.control.checkpoint.logs import read_source_log, scan_log_dir

    return read_source_log(scan_log_dir(checkpoint.child("sources", "0")))


def _legacy_candidate(entry: dict, settings: DiscoverySettings) -> Candidate:
    key = legacy_key(entry["path"])
    layout = settings.layout
    delivered = layout.delivery_time(key) if layout is not None else None
    mtime = int(entry.get("timestamp") or 0)
    return Candidate(key, 0, mtime, mtime if delivered is None else _ms(delivered), delivered is not None)


def migrate(log_: DiscoveryLog, settings: DiscoverySettings, log_offset: int, now: dt.datetime) -> Window:
    """The window taken over from Spark's file-source log of the same checkpoint, up to ``log_offset``: snapshot 0,
    written once (a later call finds it)."""
    existing = log_.read_snapshot(0)
    if existing is not None and (existing.migrated or {}).get("log_offset") == log_offset:
        return existing
    files = [_legacy_candidate(e, settings) for e in legacy_entries(log_.checkpoint)
             if int(e.get("batchId", -1)) <= log_offset]
    layout, lookback_ms = settings.layout, int(settings.lookback_seconds * 1000)
    stems: dict[str, list[int]] = {}
    for file in files:
        stem = layout.stem(file.key)
        newest = max(stems.get(stem, [file.delivered_ms])[0], file.delivered_ms)
        stems[stem] = [newest, newest - lookback_ms]
    window = Window(0, {f.key: f.delivered_ms for f in files}, stems, len(files),
                    {"from": "Spark's file source (sources/0)", "log_offset": log_offset, "files": len(files),
                     "at": now.astimezone(UTC).isoformat(timespec="seconds")})
    window.prune(layout)
    log_.write_snapshot(window)
    log.info("discovery: took over from Spark's file source at logOffset %d: %d files ingested, %d inside the "
             "window kept as seen", log_offset, len(files), len(window.seen))
    return window


@dataclass
class Admission:
    """What one call to :meth:`Discovery.latest` found.

    :param files: the files admitted into the new manifest.
    :param waiting: files found but left for later micro-batches.
    :param listing: the listing's stats (or the queue's).
    :param skipped: notification mode: files found and deliberately not admitted, key -> reason (``duplicate``:
        already in a manifest; ``before_start``: delivered before the stream's declared start).
    """

    files: list[Candidate]
    waiting: list[Candidate]
    listing: dict
    skipped: dict[str, str] = field(default_factory=dict)


class Discovery:
    """The discovery of one stream (one checkpoint); one instance lives as long as its query.

    :param settings: how the stream finds its files.
    :param store_factory: makes the landing's store (tests and the benchmark count its requests).
    :param queue: the notification queue reader (default: one for ``settings.queue_url``, if any).
    :param clock: the current time (tests).
    """

    def __init__(self, settings: DiscoverySettings, store_factory: Callable[[str], Store] = store_of, queue=None,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(UTC)) -> None:
        self.settings = settings
        self.log = DiscoveryLog(Location.of(settings.checkpoint))
        self.store = store_factory(settings.root)
        self.clock = clock
        self.name_hints: dict[str, str] = {}
        self.until_mtime_ms: int | None = None
        self._window: Window | None = None
        self._deleted_upto: int | None = None
        # a file list's files this instance has put in a manifest: a listed file older than its stem's cut is
        # forgotten by the window once admitted, and would otherwise be admitted again at every trigger
        self._listed_taken: set[str] = set()
        if queue is None and settings.queue_url:
            from spark_jobs.control.discovery.notifications import NotificationQueue

            queue = NotificationQueue(settings.queue_url, settings.root, settings.glob,
                                      visibility_seconds=settings.visibility_seconds)
        self.queue = queue

    # -- offsets -------------------------------------------------------------------------------------------

    def initial_offset(self) -> dict:
        return offset(0)

    def window_at(self, start: dict) -> Window:
        """The window after the manifest ``start`` names (a file-source offset: the window taken over from it)."""
        legacy = legacy_offset(start)
        if legacy is not None:
            self._window = migrate(self.log, self.settings, legacy, self.clock())
            return self._window
        number = manifest_of(start)
        if number is None:
            raise ValueError(f"{json.dumps(start)} is not an offset of the landing source (nor of Spark's file source)")
        if self._window is None or self._window.id != number:
            self._window = self.log.window(self.settings.layout, upto=number)
            if self._window.id != number:
                raise ValueError(f"the checkpoint's offset names manifest {number}, but the discovery log in "
                                 f"{self.log.folder.url} ends at {self._window.id}")
            if number == 0 and not self.log.exists():
                self._begin(self._window)
        return self._window

    def _begin(self, window: Window) -> None:
        """A new stream: its window starts at ``start_at`` (history then comes by backfill), else nowhere."""
        start_at = self.settings.moment("start_at")
        if start_at is not None:
            window.floor_ms = _ms(start_at)
        self.log.write_snapshot(window)

    def latest(self, start: dict, max_files: int | None) -> dict:
        """The offset of the next micro-batch after ``start`` (``start`` itself when nothing new was found)."""
        window = self.window_at(start)
        self.committed(start)
        number = window.id
        again = self.log.read_manifest(number + 1)
        if again is not None:  # made before a crash, never logged by Spark: the same files again
            self._window = None
            return offset(again.id)
        admission = self._admit(window, max_files)
        if self.queue is not None:
            admission.listing["messages"] = self._settle(admission)
        self._status(window, admission)
        if not admission.files:
            return start
        manifest = self._manifest(window, admission)
        self.log.write_manifest(manifest)
        if self.settings.file_list:
            self._listed_taken.update(f.key for f in admission.files)
        window.fold(manifest, self.settings.layout)
        return offset(manifest.id)

    def _settle(self, admission: Admission) -> dict:
        """The fate of every message received: a skip is recorded in the checkpoint before its message is deleted;
        what is neither admitted nor skipped goes back to the queue (:meth:`NotificationQueue.settle`)."""
        at = self.clock().astimezone(UTC).isoformat(timespec="seconds")
        fates = self.queue.settle({f.key for f in admission.files}, admission.skipped,
                                  lambda entries: self.log.record_skips(entries, at))
        if fates["deferred"]:
            self.log.record_skips([], at, deferred=fates["deferred"])
        return fates

    def _manifest(self, window: Window, admission: Admission) -> Manifest:
        """The next manifest: the admitted files, and the windows of their stems moved on (a stem's cut is its newest
        delivery minus the lookback, never past a file of it still waiting, never back)."""
        layout, lookback_ms = self.settings.layout, int(self.settings.lookback_seconds * 1000)
        newest: dict[str, int] = {}
        for file in admission.files:
            stem = layout.stem(file.key)
            newest[stem] = max(newest.get(stem, file.delivered_ms), file.delivered_ms)
        oldest_waiting: dict[str, int] = {}
        for file in admission.waiting:
            stem = layout.stem(file.key)
            oldest_waiting[stem] = min(oldest_waiting.get(stem, file.delivered_ms), file.delivered_ms)
        stems = {}
        for stem, top in newest.items():
            before = window.stems.get(stem)
            top = max(top, before[0]) if before else top
            cut = top - lookback_ms
            if stem in oldest_waiting:
                cut = min(cut, oldest_waiting[stem])
            floors = [c for c in ((before[1] if before else None), window.floor_ms) if c is not None]
            stems[stem] = [top, max([cut] + floors)]
        messages = [receipt for f in admission.files for receipt in getattr(self.queue, "receipts", {}).get(f.key, ())]
        return Manifest(window.id + 1, admission.files, stems, admission.listing, messages,
                        dict(admission.listing.get("dropped") or {}))

    def _admit(self, window: Window, max_files: int | None) -> Admission:
        """The files found that are new: not seen, not behind their stem's cut, not modified after an available-now
        run began; oldest delivery first (newest first with ``latest_first``). A file of an explicit list or of a
        notification is new by what it is, whatever its time: notifications come in any order, and a file
        listed late by its stem's cut would otherwise be dropped (a duplicate notification of a file forgotten
        by the window is read again; the tables' unique keys keep its rows once). A notified file already in a
        manifest, or delivered before the stream's start, is skipped (:attr:`Admission.skipped`). A listed file is admitted once
        per run, even when the window forgets it (older than its stem's cut once the list's newer files moved it:
        a reconcile's missed files can span more than the lookback)."""
        found, stats = self._find(window, max_files)
        layout = self.settings.layout
        queued = self.queue is not None
        by_time = not (self.settings.file_list or queued)
        fresh: dict[str, Candidate] = {}
        skipped: dict[str, str] = {}
        behind = 0
        for candidate in found:
            if candidate.key in fresh:
                continue
            if candidate.key in window.seen or candidate.key in self._listed_taken:
                skipped[candidate.key] = "duplicate"
                continue
            if queued and window.floor_ms is not None and candidate.delivered_ms < window.floor_ms:
                skipped[candidate.key] = "before_start"
                continue
            cut = window.cut_of(layout.stem(candidate.key)) if by_time else None
            if cut is not None and candidate.delivered_ms < cut:
                behind += 1
                continue
            # an available-now run over a queue is bounded by the messages it held at the start (its budget), not
            # by event times: a clock ahead of this one must change when a file is taken, never whether
            if not queued and self.until_mtime_ms is not None and candidate.mtime_ms > self.until_mtime_ms:
                continue
            fresh[candidate.key] = candidate
        if behind:
            stats = {**stats, "behind_window": stats.get("behind_window", 0) + behind}
        ordered = sorted(fresh.values(), key=lambda c: (c.delivered_ms, c.key), reverse=self.settings.latest_first)
        limit = max_files if max_files else len(ordered)
        return Admission(ordered[:limit], ordered[limit:], stats, skipped)

    def _find(self, window: Window, max_files: int | None) -> tuple[list[Candidate], dict]:
        if self.settings.file_list:
            return self._listed_files(), {"mode": "file_list"}
        if self.queue is not None:
            return self.queue.receive(max_files or 1000, self.settings.layout)
        # newest first needs every waiting file to know the newest; oldest first stops at a micro-batch's worth
        listing = self.walk(window).run(limit=None if self.settings.latest_first else max_files)
        return listing.files, {"mode": "listing", **listing.stats()}

    def walk(self, window: Window) -> Walk:
        """The bounded listing from the stems' cuts in ``window`` (and within the run's delivery range)."""
        return Walk(self.store, self.settings.layout, self.settings.glob, window.cut_of,
                    self.settings.moment("delivered_from"), self.settings.moment("delivered_to"),
                    self.settings.dated_only, self.name_hints, window.seen)

    def _listed_files(self) -> list[Candidate]:
        rows = json.loads(Location.of(self.settings.file_list).read_bytes())
        return [Candidate.of_row(r) for r in rows]

    def prepare_available_now(self) -> None:
        """An available-now run reads what is there now, so it ends however fast files keep landing: listing,
        nothing modified after this moment; a queue, at most the messages it holds now (event times play no part:
        a message the run does not take stays in the queue for the next run)."""
        self.until_mtime_ms = _ms(self.clock())
        if self.queue is not None:
            self.queue.prepare_available_now()

    # -- batches -------------------------------------------------------------------------------------------

    def files(self, start: dict, end: dict) -> list[Candidate]:
        """The files of the micro-batch from ``start`` to ``end``."""
        last = manifest_of(end)
        if last is None:  # a file-source batch Spark re-runs after the move
            first, final = legacy_offset(start), legacy_offset(end)
            return [_legacy_candidate(e, self.settings) for e in legacy_entries(self.log.checkpoint)
                    if (first if first is not None else -1) < int(e.get("batchId", -1)) <= final]
        first = manifest_of(start)
        first = 0 if first is None else first
        files: list[Candidate] = []
        for number in range(first + 1, last + 1):
            manifest = self.log.read_manifest(number)
            if manifest is None:
                raise ValueError(f"manifest {number} of {self.log.manifests.url} is missing: the files of the batch "
                                 f"ending at {json.dumps(end)} are unknown")
            files += manifest.files
        return files

    def committed(self, end: dict) -> None:
        """Every offset up to ``end`` is in a committed batch: snapshot, drop old manifests, delete messages."""
        number = manifest_of(end)
        if number is None or number == 0:
            return
        snapshots = self.log.snapshot_ids()
        if number - (snapshots[-1] if snapshots else 0) >= SNAPSHOT_EVERY:
            self.log.compact(self.log.window(self.settings.layout, upto=number))
        if self.queue is not None and (self._deleted_upto is None or self._deleted_upto < number):
            status = self.log.status() or {}
            since = self._deleted_upto if self._deleted_upto is not None else status.get("messages_deleted_upto", 0)
            for manifest_id in range(int(since or 0) + 1, number + 1):
                manifest = self.log.read_manifest(manifest_id)
                if manifest is not None and manifest.messages:
                    self.queue.delete(manifest.messages)
            self._deleted_upto = number

    def _status(self, window: Window, admission: Admission) -> None:
        status = {"at": self.clock().astimezone(UTC).isoformat(timespec="seconds"), "manifest": window.id,
                  "admitted": len(admission.files), "waiting": len(admission.waiting), **admission.listing}
        if self._deleted_upto is not None:
            status["messages_deleted_upto"] = self._deleted_upto
        if self.queue is not None:
            status["queue"] = self.queue.backlog()
        self.log.write_status(status)

    def listing(self, window: Window | None = None) -> Listing:
        """A complete bounded listing from the window's cut (the control plane's backlog)."""
        return self.walk(window or self.log.window(self.settings.layout)).run()


def batch_files(settings: DiscoverySettings, batch_id: int) -> list[Candidate]:
    """The files micro-batch ``batch_id`` of the stream reads, from its checkpoint's offsets and the discovery
    log (no listing, no Spark job): what the driver's write plans need to know before anything is read."""
    from spark_jobs.control.checkpoint.logs import parse_offsets, read_checked, scan_log_dir

    offsets = scan_log_dir(Location.of(settings.checkpoint).child("offsets"))

    def source_offset(batch: int) -> dict:
        return parse_offsets(read_checked(offsets, batch)).sources[0]

    end = source_offset(batch_id)
    start = source_offset(batch_id - 1) if batch_id - 1 in offsets.batches else offset(0)
    return Discovery(settings, store_factory=lambda root: Store()).files(start, end)
