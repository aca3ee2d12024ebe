"""What waits for a stream that reads through discovery, without Spark: ``checkpoint inspect``'s backlog.

The files found by the same bounded listing the stream makes (its window's cuts, its glob), minus those in its
manifests, wait; the files of manifests planned after the last committed one are in flight. It costs what one
trigger's discovery costs: O(window), never the history. No pyspark.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace

from spark_jobs.control.checkpoint.store import Location
from spark_jobs.control.discovery.planner import Discovery
from spark_jobs.control.discovery.settings import DiscoverySettings
from spark_jobs.control.discovery.state import DiscoveryLog, Window

UTC = dt.timezone.utc


def _iso(ms: int | None) -> str | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


@dataclass
class Backlog:
    """A discovering stream's input, as it stands.

    :param waiting: files found that no manifest holds yet.
    :param in_flight: files of manifests planned after the last committed one.
    :param ingested: files of committed manifests, in all (what a migration took over included).
    :param listing: what the listing cost (requests, folders, seconds).
    :param window: the window: stems, files remembered, the newest delivery, the oldest cut, the move from
        Spark's file source, a start time.
    :param queue: the notification queue's backlog, when the stream reads one.
    :param last_poll: the stream's own last discovery (``status.json``).
    :param messages_not_loaded: notification mode: queue messages deleted without a file loaded, by reason, and
        those put back for later (``deferred``), from ``discovery/skipped.json``.
    :param oldest_waiting_age_seconds: how long the oldest file that waits has waited (listing: since its
        modification time; notifications: the oldest message of the stream's last receive); 0 when none waits,
        ``None`` when unknown.
    :param waiting_bytes: the size of the files that wait (listing); ``None`` when unknown (notifications: a
        message names its object's size only once received, and inspecting never receives).
    """

    waiting: int
    in_flight: int
    ingested: int
    listing: dict = field(default_factory=dict)
    window: dict = field(default_factory=dict)
    queue: dict | None = None
    last_poll: dict | None = None
    oldest_waiting_age_seconds: float | None = None
    messages_not_loaded: dict | None = None
    waiting_bytes: int | None = None

    def to_dict(self) -> dict:
        return {"waiting": self.waiting, "in_flight": self.in_flight, "ingested": self.ingested,
                "oldest_waiting_age_seconds": self.oldest_waiting_age_seconds, "waiting_bytes": self.waiting_bytes,
                "listing": self.listing,
                "window": self.window, "queue": self.queue, "last_poll": self.last_poll,
                "messages_not_loaded": self.messages_not_loaded}


def describe_window(window: Window, lookback_seconds: float) -> dict:
    cuts = [cut for _, cut in window.stems.values()]
    return {"manifest": window.id, "stems": len(window.stems), "files_remembered": len(window.seen),
            "newest_delivery": _iso(window.newest_ms), "oldest_cut": _iso(min(cuts) if cuts else window.floor_ms),
            "lookback_seconds": lookback_seconds, "start_at": _iso(window.floor_ms), "migrated": window.migrated}


def stream_queue_url(settings: DiscoverySettings, given: str | None) -> str | None:
    """The queue a stream reads: ``given`` (``""``: none, a listing stream), else the settings' (``--queue-url`` or
    ``$<JOB>_QUEUE_URL``), else the one its last poll read (``status.json``), so that ``checkpoint inspect`` and the
    health page see a queue-mode stream as one without being told."""
    if given is not None:
        return given or None
    if settings.queue_url:
        return settings.queue_url
    status = DiscoveryLog(Location.of(settings.checkpoint)).status() or {}
    return ((status.get("queue") or {}).get("queue_url") or None) if status.get("mode") == "notifications" else None


def waiting_files(settings: DiscoverySettings, window: Window | None = None) -> list:
    """The files the stream of ``settings`` would find now and has not taken: a walk from its window's cuts."""
    discovery = Discovery(replace(settings, queue_url=None))
    if window is None:
        window = discovery.log.window(settings.layout) if discovery.log.exists() else Window()
    return discovery.walk(window).run().files


def discovery_backlog(settings: DiscoverySettings, committed: int | None, planned: int | None,
                      now: dt.datetime | None = None) -> Backlog:
    """The backlog of the stream of ``settings``, whose last committed manifest is ``committed`` and last planned
    one ``planned`` (``None``: none yet), judged at ``now``."""
    now_ms = int((now or dt.datetime.now(UTC)).timestamp() * 1000)
    discovery = Discovery(settings)
    log = discovery.log
    window = log.window(settings.layout, upto=planned if planned is not None else 0) if log.exists() else Window()
    done = log.window(settings.layout, upto=committed).admitted if committed is not None and log.exists() else 0
    status = log.status()
    queue, skips, size = None, None, None
    if discovery.queue is not None:
        found = log.skips()
        skips = {**found["total"], "deferred": found["deferred"]}
        queue = discovery.queue.backlog()
        waiting = int(queue.get("visible") or 0)
        listing = {"mode": "notifications"}
        # the oldest message the stream itself last received (inspecting never receives: that would hide them)
        queue["oldest_message_age_seconds"] = ((status or {}).get("queue") or {}).get("oldest_message_age_seconds")
        oldest = queue["oldest_message_age_seconds"] if waiting else 0.0
    else:
        found = discovery.walk(window).run()  # the window's seen files and what is behind a cut are left out
        waiting = len(found.files)
        size = sum(f.size for f in found.files)
        listing = {"mode": "listing", **found.stats()}
        oldest = round(max(0, now_ms - min(f.mtime_ms for f in found.files)) / 1000, 1) if found.files else 0.0
    return Backlog(waiting, window.admitted - done, done, listing, describe_window(window, settings.lookback_seconds),
                   queue, status, oldest, skips, size)


def discovery_text(found: dict | None) -> str | None:
    """How a stream finds its files, in words (``checkpoint inspect``, ``status`` and the health page): its window,
    what the last look cost, the queue's backlog, a start time, the move from Spark's file source, the last
    reconcile; ``None`` for a stream that does not discover files."""
    if not found:
        return None
    window, listing = found["window"], found["listing"]
    text = (f"{listing.get('mode', 'listing')}; window: {window['stems']} stems, {window['files_remembered']} files "
            f"remembered, newest delivery {window['newest_delivery'] or 'none'}, oldest cut "
            f"{window['oldest_cut'] or 'none'} (lookback {window['lookback_seconds']:g} s)")
    if listing.get("mode") == "listing":
        text += f"; this look: {listing.get('requests')} folder reads, {listing.get('seconds')} s"
    if found.get("waiting") and found.get("oldest_waiting_age_seconds") is not None:
        text += f"; the oldest waiting file has waited {found['oldest_waiting_age_seconds']:g} s"
    queue = found.get("queue")
    if queue:
        age = queue.get("oldest_message_age_seconds")
        text += (f"; queue: {queue.get('visible')} messages waiting, {queue.get('in_flight')} received"
                 + (f", the oldest had waited {age:g} s" if age is not None else ""))
    skipped = {k: v for k, v in (found.get("messages_not_loaded") or {}).items() if v}
    if skipped:
        text += "; messages not loaded: " + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items()))
    if window.get("start_at"):
        text += f"; started at {window['start_at']}"
    if window.get("migrated"):
        moved = window["migrated"]
        text += f"; moved from Spark's file source at its batch {moved['log_offset']} ({moved['files']} files), {moved['at']}"
    reconcile = found.get("last_reconcile")
    if reconcile:
        text += (f"; last reconcile {reconcile['at']}: {reconcile['listed']} listed, {reconcile['missed']} missed and "
                 "ingested" + (f", {reconcile['before_start']} before the start left out"
                               if reconcile.get("before_start") else ""))
    return text
