"""List a landing folder or bucket prefix for new files, touching only the folders that can hold them.

Spark's file source lists every folder under its input at every trigger. This listing walks the landing with
the job's :class:`~spark_jobs.model.layout.KeyLayout` and a *cut* (a delivery time):

- **stem folders** (anything that is not a date folder: ``AWSLogs/<account>/CloudTrail/<region>``) are listed
  at every walk; they hold few entries, and how many does not grow with the days delivered;
- **date folders** (``YYYY/MM/DD`` under a stem) are listed only from the day before the stem's cut on (a file
  may sit in the folder a day off its name's time): a year, month or day folder before that is never opened. On a bucket a day folder is listed with ``StartAfter`` set just before the
  cut in the names' order (:meth:`KeyLayout.name_prefix_at`), so only the names delivered since come back;
- day folders are visited in date order across every stem, and a walk given a ``limit`` stops after the first
  date at which it has that many candidates (:attr:`Listing.complete` is then ``False``): catching up a long
  backlog lists about one micro-batch of files per trigger, not the whole backlog.

Each stem has a cut of its own (discovery keeps one window per stem: :class:`~spark_jobs.control.discovery.
state.Window`); a stem without one (a new account or region, a folder of old logs copied in) is listed whole.
A file's delivery time is the layout's (its name's, else its date folders'), else its modification time (an
undated file, ``dated`` ``False``). Only files delivered at or after their stem's cut, and before ``until`` when
given, are returned. Names are judged as Spark's file source judges them (hidden names, ``pathGlobFilter``:
:mod:`spark_jobs.control.checkpoint.listing`). Each file is named as Spark's ``binaryFile`` source names it
(``file:/abs/path``, ``s3a://bucket/key``), the name the tables' source-file columns hold.

Why not fsspec's ``find`` (which the rest of the control plane uses): it walks everything below a folder, and
s3fs's listing cache and its ``StartAfter``-less pagination make the number of requests unknowable; this
module counts every LIST request (:attr:`Listing.requests`), which the benchmark reports per trigger.
"""

from __future__ import annotations

import datetime as dt
import heapq
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Container, Iterator
from urllib.parse import urlparse

from spark_jobs.control.checkpoint.listing import glob_to_regex, hidden
from spark_jobs.model.layout import KeyLayout

UTC = dt.timezone.utc
LOCAL_SCHEME = "file"
# A file's date folder may be a day off its name's time (a delivery at 23:59 filed under the next day): a walk
# bounded by a time lists the date folders a day either side of it.
FOLDER_SLACK = dt.timedelta(days=1)


@dataclass(frozen=True)
class Candidate:
    """One listed input file.

    :param key: its name as Spark's ``binaryFile`` source gives it (``file:/...``, ``s3a://bucket/key``).
    :param size: bytes.
    :param mtime_ms: modification time, ms since the epoch.
    :param delivered_ms: delivery time (the layout's, else ``mtime_ms``), ms since the epoch.
    :param dated: whether ``delivered_ms`` comes from the key (not the modification time).
    """

    key: str
    size: int
    mtime_ms: int
    delivered_ms: int
    dated: bool

    def row(self) -> list:
        """The compact form manifests store: ``[key, size, mtime_ms, delivered_ms, dated]``."""
        return [self.key, self.size, self.mtime_ms, self.delivered_ms, 1 if self.dated else 0]

    @classmethod
    def of_row(cls, row: list) -> "Candidate":
        return cls(str(row[0]), int(row[1]), int(row[2]), int(row[3]), bool(row[4]) if len(row) > 4 else True)


@dataclass
class Listing:
    """What one walk found, and what it cost.

    :param files: candidates delivered at or after the cut (and before ``until``), in no particular order.
    :param complete: every folder that can hold a candidate was listed (``False``: a ``limit`` stopped it early).
    :param requests: LIST requests sent (a local folder read counts as one).
    :param folders: folders listed.
    :param skipped_old: files listed but delivered before their stem's cut (or a backfill's start).
    :param skipped_later: files listed but delivered at or after a backfill's end.
    :param undated: files listed without a delivery time in their key, left out of a dated walk.
    :param seconds: how long the walk took.
    """

    files: list[Candidate] = field(default_factory=list)
    complete: bool = True
    requests: int = 0
    folders: int = 0
    skipped_old: int = 0
    skipped_later: int = 0
    undated: int = 0
    seconds: float = 0.0

    def stats(self) -> dict:
        return {"files": len(self.files), "complete": self.complete, "requests": self.requests,
                "folders": self.folders, "skipped_old": self.skipped_old, "skipped_later": self.skipped_later,
                "undated": self.undated, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class Entry:
    """A file as a folder listing reports it (``name`` relative to the folder)."""

    name: str
    size: int
    mtime_ms: int


class Store:
    """Where a landing lives: a local folder or a bucket prefix. Subclasses list one folder level."""

    root: str

    def list_folder(self, folder: str, start_after: str | None = None) -> tuple[list[str], list[Entry]]:
        """The sub-folder names and files directly in ``folder`` (``""`` is the root), names after
        ``start_after`` only where the store can say so; ``([], [])`` when the folder does not exist."""
        raise NotImplementedError

    def key(self, folder: str, name: str) -> str:
        """The file's name as Spark's ``binaryFile`` source gives it."""
        raise NotImplementedError

    def relative(self, key: str) -> str | None:
        """``key`` relative to the root (``None`` when it is not under the root)."""
        raise NotImplementedError

    requests: int = 0


class LocalStore(Store):
    """A local folder (``os.scandir``: one read per folder)."""

    def __init__(self, root: str) -> None:
        path = root[len("file://"):] if root.startswith("file://") else root[len("file:"):] if root.startswith("file:") \
            else root
        self.root = os.path.abspath(path)
        self.requests = 0

    def list_folder(self, folder: str, start_after: str | None = None) -> tuple[list[str], list[Entry]]:
        path = os.path.join(self.root, folder) if folder else self.root
        self.requests += 1
        dirs, files = [], []
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir():
                            dirs.append(entry.name)
                        elif entry.is_file():
                            stat = entry.stat()
                            files.append(Entry(entry.name, stat.st_size, int(stat.st_mtime * 1000)))
                    except FileNotFoundError:
                        continue
        except (FileNotFoundError, NotADirectoryError):
            return [], []
        return dirs, files

    def key(self, folder: str, name: str) -> str:
        return f"{LOCAL_SCHEME}:{os.path.join(self.root, folder, name) if folder else os.path.join(self.root, name)}"

    def relative(self, key: str) -> str | None:
        path = key[len("file:"):] if key.startswith("file:") else key
        path = "/" + path.lstrip("/")
        prefix = self.root.rstrip("/") + "/"
        return path[len(prefix):] if path.startswith(prefix) else None


class S3Store(Store):
    """A bucket prefix (``s3a://bucket/prefix``), listed with ``ListObjectsV2`` one folder level at a time
    (``Delimiter="/"``), through boto3 with the standard AWS settings (:mod:`spark_jobs.model.object_store`).

    :param client: a boto3 S3 client (default: one made from the environment).
    """

    def __init__(self, root: str, client=None) -> None:
        parsed = urlparse(root)
        self.scheme, self.bucket = parsed.scheme, parsed.netloc
        self.prefix = parsed.path.strip("/")
        self.root = root.rstrip("/")
        self.client = client or s3_client()
        self.requests = 0

    def _prefix(self, folder: str) -> str:
        parts = [p for p in (self.prefix, folder.strip("/")) if p]
        return "/".join(parts) + "/" if parts else ""

    def list_folder(self, folder: str, start_after: str | None = None) -> tuple[list[str], list[Entry]]:
        prefix = self._prefix(folder)
        kwargs = {"Bucket": self.bucket, "Prefix": prefix, "Delimiter": "/"}
        if start_after:
            kwargs["StartAfter"] = prefix + start_after
        dirs, files = [], []
        while True:
            self.requests += 1
            page = self.client.list_objects_v2(**kwargs)
            dirs += [p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", ())]
            for item in page.get("Contents", ()):
                name = item["Key"][len(prefix):]
                if name and not name.endswith("/"):
                    files.append(Entry(name, int(item.get("Size") or 0), int(item["LastModified"].timestamp() * 1000)))
            if not page.get("IsTruncated"):
                return dirs, files
            kwargs = {"Bucket": self.bucket, "Prefix": prefix, "Delimiter": "/",
                      "ContinuationToken": page["NextContinuationToken"]}

    def key(self, folder: str, name: str) -> str:
        return f"{self.scheme}://{self.bucket}/{self._prefix(folder)}{name}"

    def relative(self, key: str) -> str | None:
        head = f"{self.scheme}://{self.bucket}/{self._prefix('')}"
        return key[len(head):] if key.startswith(head) else None


def s3_client():
    """A boto3 S3 client with the endpoint and region of :class:`~spark_jobs.model.object_store.S3Settings`
    (credentials: boto3's own chain)."""
    import boto3

    from spark_jobs.model.object_store import S3Settings

    settings = S3Settings.from_environment()
    return boto3.client("s3", endpoint_url=settings.endpoint, region_name=settings.region)


def store_of(root: str) -> Store:
    """The store of a landing root: a local path or ``file:`` URL, or an ``s3a://``/``s3://`` URL."""
    from spark_jobs.model.object_store import is_object_store

    return S3Store(root) if is_object_store(root) else LocalStore(root)


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


@dataclass
class Walk:
    """One walk of a landing: the rules that decide what is a candidate, and the stores' folder reads.

    :param store: the landing.
    :param layout: the key layout (it names each file's stem and delivery time).
    :param glob: the ``pathGlobFilter`` (a Hadoop glob on file names), or ``None``.
    :param cuts: stem -> the delivery time (ms) before which its files are not candidates and its date folders
        not listed; ``None`` for a stem listed whole (a new one). Default: every stem whole.
    :param since: no file delivered before this is a candidate, in any stem (a backfill's start).
    :param until: files delivered at or after this are not candidates (a backfill's end); ``None``: no end.
    :param dated_only: only files whose key carries a delivery time (a dated backfill).
    :param name_hints: folder -> a file name seen in it, for ``StartAfter`` (kept by the caller across walks).
    :param known: keys already taken (the window's seen files): not candidates, and not counted toward a limit.
    """

    store: Store
    layout: KeyLayout
    glob: str | None = None
    cuts: Callable[[str], int | None] = lambda stem: None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    dated_only: bool = False
    name_hints: dict[str, str] = field(default_factory=dict)
    known: Container[str] = frozenset()

    def __post_init__(self) -> None:
        self._matcher = glob_to_regex(self.glob) if self.glob else None
        self._since_ms = None if self.since is None else _ms(self.since)
        self._until_ms = None if self.until is None else _ms(self.until)

    def cut_ms(self, stem: str) -> int | None:
        """The later of the stem's cut and :attr:`since` (``None``: no bound)."""
        bounds = [b for b in (self.cuts(stem), self._since_ms) if b is not None]
        return max(bounds) if bounds else None

    def run(self, limit: int | None = None) -> Listing:
        """Walk the landing; with ``limit``, stop after the first date with that many candidates."""
        started = time.monotonic()
        requests_before = self.store.requests
        listing = Listing()
        roots = self._stems(listing)
        days = heapq.merge(*(self._date_leaves(root, 0, (), years, self._root_cut(root)) for root, years in roots),
                           key=lambda leaf: leaf[0])
        current = None
        for day, folder, cut in days:
            if limit is not None and len(listing.files) >= limit and day != current:
                listing.complete = False
                break
            current = day
            self._list_leaf(folder, day, cut, listing)
        listing.requests = self.store.requests - requests_before
        listing.seconds = time.monotonic() - started
        return listing

    def _root_cut(self, folder: str) -> dt.datetime | None:
        cut = self.cut_ms(self.store.key(folder, "").rstrip("/"))
        return None if cut is None else dt.datetime.fromtimestamp(cut / 1000, UTC)

    def _candidate(self, folder: str, entry: Entry, listing: Listing) -> None:
        if hidden(entry.name) or (self._matcher is not None and self._matcher.match(entry.name) is None):
            return
        key = self.store.key(folder, entry.name)
        self.name_hints.setdefault(folder, entry.name)
        if key in self.known:
            return
        delivered = self.layout.delivery_time(key)
        if delivered is None and self.dated_only:
            listing.undated += 1
            return
        delivered_ms = entry.mtime_ms if delivered is None else _ms(delivered)
        cut = self.cut_ms(self.layout.stem(key))
        if cut is not None and delivered_ms < cut:
            listing.skipped_old += 1
            return
        if self._until_ms is not None and delivered_ms >= self._until_ms:
            listing.skipped_later += 1
            return
        listing.files.append(Candidate(key, entry.size, entry.mtime_ms, delivered_ms, delivered is not None))

    def _stems(self, listing: Listing) -> list[tuple[str, list[str]]]:
        """List every stem folder (its files are candidates); return those that hold year folders, with them."""
        roots, pending = [], [""]
        while pending:
            folder = pending.pop()
            dirs, files = self.store.list_folder(folder)
            listing.folders += 1
            for entry in files:
                self._candidate(folder, entry, listing)
            years = []
            for name in sorted(dirs):
                if hidden(name):
                    continue
                if self.layout.is_date_folder(0, name):
                    years.append(name)
                else:
                    pending.append(f"{folder}/{name}" if folder else name)
            if years:
                roots.append((folder, years))
        return roots

    def _date_leaves(self, folder: str, depth: int, parts: tuple[str, ...], dirs: list[str] | None,
                     cut: dt.datetime | None) -> Iterator[tuple[dt.date, str, dt.datetime | None]]:
        """The leaf date folders under ``folder`` (a stem at depth 0, whose year folders are ``dirs``) from the
        day of the stem's ``cut`` on, in date order, listed lazily (a month is listed when the walk reaches it).
        A folder in the date tree that is not a date (``2024/13``, ``2024/notes``) is a leaf listed whole, first."""
        levels = self.layout.date_levels
        if dirs is None:
            dirs, _ = self.store.list_folder(folder)
        for name in sorted(d for d in dirs if not hidden(d)):
            here = parts + (name,)
            path = f"{folder}/{name}" if folder else name
            first = _first_day(here) if self.layout.is_date_folder(depth, name) else None
            if first is None:
                yield dt.date.min, path, None
                continue
            if cut is not None and _last_day(here) < (cut - FOLDER_SLACK).date():
                continue
            if self.until is not None and first > (self.until + FOLDER_SLACK).date():
                continue
            if depth + 1 == len(levels):
                yield first, path, cut
            else:
                yield from self._date_leaves(path, depth + 1, here, None, cut)

    def _list_leaf(self, folder: str, day: dt.date, cut: dt.datetime | None, listing: Listing) -> None:
        """List a date folder (and any folders below it), from just before the cut where the store can."""
        start_after = None
        if cut is not None and day <= cut.date() and isinstance(self.store, S3Store):
            hint = self.name_hints.get(folder)
            start_after = self.layout.name_prefix_at(hint, cut) if hint else None
        pending = [(folder, start_after)]
        while pending:
            here, after = pending.pop()
            dirs, files = self.store.list_folder(here, after)
            listing.folders += 1
            for entry in files:
                self._candidate(here, entry, listing)
            pending += [(f"{here}/{name}", None) for name in sorted(dirs) if not hidden(name)]


def _first_day(parts: tuple[str, ...]) -> dt.date | None:
    values = [int(p) for p in parts] + [1] * (3 - len(parts))
    try:
        return dt.date(*values)
    except ValueError:
        return None


def _last_day(parts: tuple[str, ...]) -> dt.date:
    year = int(parts[0])
    if len(parts) == 1:
        return dt.date(year, 12, 31)
    month = int(parts[1])
    if len(parts) == 2:
        return dt.date(year + (month == 12), month % 12 + 1, 1) - dt.timedelta(days=1)
    return _first_day(parts)


def walk(root: str, layout: KeyLayout, glob: str | None = None, *, since: dt.datetime | None = None,
         until: dt.datetime | None = None, dated_only: bool = False, limit: int | None = None,
         store_factory: Callable[[str], Store] = store_of) -> Listing:
    """One walk of the whole landing at ``root`` (no window: every stem whole; see :class:`Walk`)."""
    return Walk(store_factory(root), layout, glob, since=since, until=until, dated_only=dated_only).run(limit)
