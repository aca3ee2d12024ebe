"""The single-writer lease on a job's checkpoint: one driver at a time writes through it.

Layout (beside the checkpoint, never inside it)::

    <lake>/control/<job>/lease/0000000001.json      generation 1
    <lake>/control/<job>/lease/0000000002.json      generation 2 (a later driver), ...

The newest generation is the lease. A driver takes it with :meth:`Lease.acquire`: if the newest
generation is live it gets :class:`LeaseHeld`; otherwise it creates generation + 1 with an
*exclusive create* (whoever creates that file first wins; the loser sees the winner as the holder).
The holder then renews it (:meth:`Lease.renew` rewrites only its own generation file with a new
heartbeat), and calls :meth:`Lease.check` before every batch commit.

**How expiry is decided** (:meth:`LeaseInfo.expired`): a lease is expired when it was released,
or its heartbeat is older than its ``ttl_seconds`` (the registry's
``HealthThresholds.lease_ttl_seconds``), or, on the same host, its pid is no longer running (or is
a zombie, or is a different process that reused the pid): a driver killed with ``kill -9`` is taken
over at once, without waiting for the ttl. Another host can only go by the heartbeat, so the ttl
must be well above the clocks' skew between hosts.

**Why a paused driver that wakes up cannot write.** A driver that was SIGSTOPped (or stuck in a
long GC pause) longer than the ttl may have been replaced. It never learns that from its own
memory, so :meth:`Lease.check` fails closed, with :class:`LeaseLost`, when *either* a newer
generation exists *or* its own last successful renewal is older than the ttl (measured on the
monotonic clock, which keeps running while the process is stopped). Once lost, a lease stays lost
for that object: :meth:`renew` refuses too, and the driver must stop and acquire anew. Renewal never
writes any file but the holder's own generation, so a late renewal cannot undo a takeover.
What is left is the instant between a successful check and the commit itself; two fences close it:
Spark's offsets and commits logs create each batch file without overwrite, so a second writer of
the same batch fails; and each table write is a Delta idempotent write (``txnAppId`` = "<query
id>:<table>", ``txnVersion`` = batch id), so a batch replayed by the old driver is a no-op.

**Exclusive create per filesystem.** Local paths: the record is written to a temp file and
hard-linked to its generation name (``link`` fails if the name exists: atomic, exclusive, and never
visible half-written); ``O_CREAT | O_EXCL`` where links are not supported. Other fsspec filesystems:
``open(path, "xb")`` (fsspec's in-memory filesystem supports it). An object store needs a
conditional put for this: S3 ``PutObject`` with ``If-None-Match: *``, GCS ``ifGenerationMatch=0``,
Azure ``If-None-Match: *``; a store or client without it cannot hold a lease safely (two creates of
the same key both succeed), and :meth:`Lease.acquire` then raises rather than pretend. On S3 (s3fs,
``s3a://`` / ``s3://``) ``open(path, "xb")`` is a ``PutObject`` with ``If-None-Match: *``; since an
S3-compatible server that ignores the header would accept both creates silently, the first lease
taken in a bucket by a process probes it (creates one key twice, expects the second to be refused,
removes it) and refuses to hold a lease there when the store did not refuse. Listings are never
cached (:mod:`spark_jobs.model.object_store`), so a newer generation is seen at once.

**Clocks.** A lease reads two: the wall clock for the records' times (a heartbeat another process judges) and the
monotonic clock for its own renewal's age. Both come from one :class:`Clock` given to :meth:`Lease.acquire`
(:data:`SYSTEM_CLOCK` unless a test passes one it moves by hand), so a test passes time instead of waiting it out.

The module imports no pyspark (Airflow sensors and the supervisor read it).
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

import fsspec
import psutil
from fsspec.implementations.local import LocalFileSystem
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_incrementing

LEASE_DIR = "lease"
GENERATION_NAME = re.compile(r"^(\d{10})\.json$")
KEEP_GENERATIONS = 10  # older generation files are removed on acquire (only the newest matters)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def parse_iso(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


class Clock(Protocol):
    """Where a lease reads the time: ``now()``, the wall clock (aware, UTC) for its records; ``monotonic()``,
    seconds on a clock that keeps running while the process is stopped, for its own renewal's age."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class _SystemClock:
    """The real clocks."""

    @staticmethod
    def now() -> datetime:
        return utc_now()

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()


SYSTEM_CLOCK: Clock = _SystemClock()


def _as_datetime(now: datetime | float | None) -> datetime:
    if now is None:
        return utc_now()
    if isinstance(now, (int, float)):
        return datetime.fromtimestamp(now, timezone.utc)
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


def _process_start(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (Linux ``/proc``); None if unknown.

    Read from ``/proc`` and not through psutil: leases record this exact integer (``pid_start``), and psutil only
    gives a float derived from it (``create_time``), whose rounding could make a live holder look like a new
    process that reused its pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode("ascii", "replace")
        return int(text[text.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pid_running(pid: int, start_ticks: int | None = None) -> bool:
    """Whether ``pid`` runs on this host (a zombie does not; nor a new process that reused the pid)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return False
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        pass
    if start_ticks is not None:
        current = _process_start(pid)
        if current is not None and current != start_ticks:
            return False
    return True


@dataclass
class LeaseInfo:
    """One generation of the lease, as stored in ``lease/<generation:010d>.json``.

    :param generation: 1, 2, ...: each takeover creates the next one.
    :param owner: a uuid4 hex naming the holder (one per :meth:`Lease.acquire`).
    :param job: the job's name.
    :param pid: the holding driver's process id.
    :param host: the holding driver's host name.
    :param started_at: when the lease was taken (ISO-8601 UTC).
    :param heartbeat_at: the last renewal (ISO-8601 UTC).
    :param ttl_seconds: a heartbeat older than this makes the lease expired.
    :param released: the holder let go of it (a clean stop).
    :param details: free-form: the query id, the last batch, the Spark UI's URL, ...
    :param pid_start: the pid's start time in clock ticks since boot (tells a reused pid apart).
    """

    generation: int
    owner: str
    job: str
    pid: int
    host: str
    started_at: str
    heartbeat_at: str
    ttl_seconds: float
    released: bool = False
    details: dict = field(default_factory=dict)
    pid_start: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "LeaseInfo":
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)

    def heartbeat_age(self, now: datetime | float | None = None) -> float:
        """Seconds since the last heartbeat."""
        return (_as_datetime(now) - parse_iso(self.heartbeat_at)).total_seconds()

    def alive_locally(self) -> bool | None:
        """Whether the holding pid still runs: True/False on its own host, None on another host."""
        if self.host != socket.gethostname():
            return None
        return pid_running(self.pid, self.pid_start)

    def expired(self, now: datetime | float | None = None) -> bool:
        """Released, or heartbeat older than the ttl, or (on this host) its process is gone."""
        if self.released or self.heartbeat_age(now) > self.ttl_seconds:
            return True
        return self.alive_locally() is False

    def describe(self, now: datetime | float | None = None) -> str:
        """One line for people: who holds it and how fresh it is."""
        return (f"pid {self.pid} on host {self.host} (generation {self.generation}, started {self.started_at}, "
                f"heartbeat {self.heartbeat_age(now):.1f} s ago, ttl {self.ttl_seconds:g} s)")


class LeaseHeld(Exception):
    """Another driver holds a live lease on the checkpoint.

    :param holder: the live lease.
    """

    def __init__(self, holder: LeaseInfo, control_dir: str = ""):
        self.holder = holder
        super().__init__(
            f"job {holder.job} is already running: its checkpoint is held by {holder.describe()}; "
            f"stop that driver first, or wait until its lease expires (in {control_dir or 'the control folder'})")


class LeaseLost(Exception):
    """This driver may no longer write through the checkpoint (taken over, or not renewed in time)."""


# (filesystem class, bucket) -> the store refuses a second exclusive create (probed once per process).
_PROBED: dict[tuple[str, str], bool] = {}


def _check_exclusive_create(fs: fsspec.AbstractFileSystem, folder: str) -> None:
    """Refuse a store whose exclusive create is not exclusive (probed once per bucket and process)."""
    from fsspec.implementations.memory import MemoryFileSystem

    if isinstance(fs, (LocalFileSystem, MemoryFileSystem)):
        return
    key = (type(fs).__name__, folder.strip("/").split("/", 1)[0])
    if key not in _PROBED:
        probe = f"{folder}/.lease-probe-{uuid.uuid4().hex}"
        fs.makedirs(folder, exist_ok=True)
        refused = False
        try:
            for attempt in range(2):
                with fs.open(probe, "xb") as handle:
                    handle.write(b"probe")
        except FileExistsError:
            refused = attempt == 1
        except ValueError:
            refused = True  # no exclusive create at all: _create_exclusive explains it
        finally:
            try:
                fs.rm_file(probe)
            except (FileNotFoundError, OSError):
                pass
        _PROBED[key] = refused
    if not _PROBED[key]:
        raise RuntimeError(
            f"the store behind {folder} accepted a second exclusive create of the same key (a conditional put "
            "with If-None-Match: * that it ignored), so it cannot hold a single-writer lease; use a store with "
            "conditional puts (AWS S3, or a compatible server that honours If-None-Match) or keep the control "
            "folder on a local or shared POSIX path")


def _split(control_dir: str) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, path = fsspec.core.url_to_fs(str(control_dir))
    return fs, path.rstrip("/")


def _generations(fs: fsspec.AbstractFileSystem, lease_dir: str) -> list[int]:
    fs.invalidate_cache(lease_dir)  # a listing cached by the filesystem would hide a newer generation
    try:
        names = fs.ls(lease_dir, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        match = GENERATION_NAME.match(name.rstrip("/").rsplit("/", 1)[-1])
        if match:
            found.append(int(match.group(1)))
    return sorted(found)


def _gen_path(lease_dir: str, generation: int) -> str:
    return f"{lease_dir}/{generation:010d}.json"


# A record that does not parse is read again a little later (a non-local create may still be writing it), then
# taken as unreadable.
@retry(retry=retry_if_exception_type((ValueError, TypeError, KeyError)), stop=stop_after_attempt(3),
       wait=wait_incrementing(start=0.05, increment=0.05), retry_error_callback=lambda state: None)
def _read_generation(fs: fsspec.AbstractFileSystem, lease_dir: str, generation: int) -> LeaseInfo | None:
    """The record of one generation; None if it is gone or unreadable (counts as expired)."""
    try:
        with fs.open(_gen_path(lease_dir, generation), "rb") as handle:
            return LeaseInfo.from_dict(json.loads(handle.read().decode("utf-8")))
    except FileNotFoundError:
        return None


def read_lease(control_dir: str) -> LeaseInfo | None:
    """The newest generation of the lease under ``control_dir`` (a path or fsspec URL); None if none.

    An unreadable newest file is returned as None as well; it still occupies its generation, so
    the next :meth:`Lease.acquire` creates the one after it.
    """
    fs, base = _split(control_dir)
    lease_dir = f"{base}/{LEASE_DIR}"
    generations = _generations(fs, lease_dir)
    return _read_generation(fs, lease_dir, generations[-1]) if generations else None


def _encode(info: LeaseInfo) -> bytes:
    return (json.dumps(info.to_dict(), sort_keys=True) + "\n").encode("utf-8")


def _create_exclusive(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists; True if this call created it."""
    if isinstance(fs, LocalFileSystem):
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        temp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, path)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
        finally:
            os.unlink(temp)
        try:  # no hard links here: an exclusive create (briefly empty; readers retry)
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        return True
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    try:
        with fs.open(path, "xb") as handle:
            handle.write(data)
        return True
    except FileExistsError:
        return False
    except ValueError as exc:  # the filesystem has no exclusive create
        raise RuntimeError(
            f"{type(fs).__name__} cannot create a file exclusively (open mode 'xb': {exc}), so it cannot hold "
            "a single-writer lease; use a store with conditional puts (S3 If-None-Match: *, GCS "
            "ifGenerationMatch=0) or keep the control folder on a local or shared POSIX path") from None


def _overwrite(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> None:
    """Replace ``path`` atomically (readers see the old or the new record, never half of one)."""
    if isinstance(fs, LocalFileSystem):
        temp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        with open(temp, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    else:
        fs.pipe_file(path, data)


class Lease:
    """The lease a driver holds on its checkpoint. Get one with :meth:`acquire`.

    :param fs: the control folder's filesystem.
    :param lease_dir: ``<control>/lease`` on ``fs``.
    :param info: this holder's generation record.
    :param control_dir: the control folder as given (for messages).
    :param clock: its wall and monotonic clocks.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, lease_dir: str, info: LeaseInfo, control_dir: str,
                 clock: Clock = SYSTEM_CLOCK):
        self._fs = fs
        self._lease_dir = lease_dir
        self._control_dir = control_dir
        self.info = info
        self._clock = clock
        self._renewed = clock.monotonic()  # taken before the write: conservative
        self._lost: LeaseLost | None = None
        self._lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None
        self._stop = threading.Event()

    @classmethod
    def acquire(cls, control_dir: str, job: str, ttl_seconds: float, details: dict | None = None,
                clock: Clock = SYSTEM_CLOCK) -> "Lease":
        """Take the lease on ``job``'s checkpoint.

        :param control_dir: ``<lake>/control/<job>``: a local path or an fsspec URL.
        :param job: the job's name.
        :param ttl_seconds: a heartbeat older than this lets another driver take over.
        :param details: free-form details to store (query id, Spark UI URL, ...).
        :param clock: the clocks it judges the current holder by, stamps its records with and measures its own
            renewals on (:data:`SYSTEM_CLOCK`; a test's clock it moves by hand).
        :raises LeaseHeld: another driver holds a live lease.
        """
        if ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be > 0, got {ttl_seconds!r}")
        fs, base = _split(control_dir)
        lease_dir = f"{base}/{LEASE_DIR}"
        _check_exclusive_create(fs, lease_dir)
        for _ in range(5):
            generations = _generations(fs, lease_dir)
            newest = generations[-1] if generations else 0
            current = _read_generation(fs, lease_dir, newest) if newest else None
            if current is not None and not current.expired(clock.now()):
                raise LeaseHeld(current, str(control_dir))
            now = clock.now()
            pid = os.getpid()
            info = LeaseInfo(generation=newest + 1, owner=uuid.uuid4().hex, job=job, pid=pid,
                             host=socket.gethostname(), started_at=iso(now), heartbeat_at=iso(now),
                             ttl_seconds=float(ttl_seconds), released=False, details=dict(details or {}),
                             pid_start=_process_start(pid))
            started = clock.monotonic()
            if _create_exclusive(fs, _gen_path(lease_dir, info.generation), _encode(info)):
                lease = cls(fs, lease_dir, info, str(control_dir), clock)
                lease._renewed = started
                lease._prune(generations)
                return lease
            # Another driver created this generation first: go round again and see who holds it.
        winner = read_lease(str(control_dir))
        if winner is not None:
            raise LeaseHeld(winner, str(control_dir))
        raise RuntimeError(f"could not take the lease in {control_dir}: every generation create raced; retry")

    def _prune(self, generations: list[int]) -> None:
        for old in generations[:-KEEP_GENERATIONS]:
            try:
                self._fs.rm_file(_gen_path(self._lease_dir, old))
            except (FileNotFoundError, OSError):
                pass

    def _newer_generation(self) -> int | None:
        generations = _generations(self._fs, self._lease_dir)
        newest = generations[-1] if generations else 0
        return newest if newest > self.info.generation else None

    def _fail(self, reason: str) -> None:
        if self._lost is None:
            self._lost = LeaseLost(f"lease generation {self.info.generation} on job {self.info.job} is lost: {reason}; "
                                   "this driver must stop without writing (a new run takes the lease anew)")
        raise self._lost

    def check(self) -> None:
        """Fail closed unless this driver may still write. Call it before every batch commit.

        :raises LeaseLost: the lease was released or lost before, a newer generation exists, or the
            own last successful renewal is older than the ttl (a paused driver that woke up).
        """
        if self._lost is not None:
            raise self._lost
        if self.info.released:
            self._fail("it was released")
        age = self._clock.monotonic() - self._renewed
        if age > self.info.ttl_seconds:
            self._fail(f"its last renewal was {age:.1f} s ago, more than the ttl of {self.info.ttl_seconds:g} s")
        newer = self._newer_generation()
        if newer is not None:
            self._fail(f"generation {newer} was taken by another driver")

    def renew(self, details: dict | None = None) -> None:
        """Write a new heartbeat (and merge ``details``) into this holder's own generation file.

        :raises LeaseLost: as :meth:`check` (a lost lease is never renewed).
        """
        with self._lock:
            self.check()
            started = self._clock.monotonic()
            info = LeaseInfo(**{**self.info.to_dict(), "heartbeat_at": iso(self._clock.now()),
                                "details": {**self.info.details, **(details or {})}})
            _overwrite(self._fs, _gen_path(self._lease_dir, info.generation), _encode(info))
            self.info = info
            self._renewed = started

    def release(self) -> None:
        """Let go (a clean stop): the lease file is marked released; the next driver takes over at once."""
        self.stop_heartbeat()
        with self._lock:
            if self.info.released:
                return
            info = LeaseInfo(**{**self.info.to_dict(), "heartbeat_at": iso(self._clock.now()), "released": True})
            if self._newer_generation() is None:
                _overwrite(self._fs, _gen_path(self._lease_dir, info.generation), _encode(info))
            self.info = info

    def start_heartbeat(self, interval_seconds: float | None = None) -> None:
        """Renew in a daemon thread every ``interval_seconds`` (default a third of the ttl).

        A renewal that fails leaves the lease lost: the next :meth:`check` raises :class:`LeaseLost`.
        """
        interval = interval_seconds if interval_seconds is not None else self.info.ttl_seconds / 3

        def beat() -> None:
            while not self._stop.wait(interval):
                try:
                    self.renew()
                except LeaseLost:
                    return
                except Exception as exc:  # noqa: BLE001 - a storage hiccup: the ttl decides
                    del exc

        self._stop.clear()
        self._heartbeat = threading.Thread(target=beat, name=f"lease-heartbeat-{self.info.job}", daemon=True)
        self._heartbeat.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        thread, self._heartbeat = self._heartbeat, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *_exc) -> None:
        self.release()
