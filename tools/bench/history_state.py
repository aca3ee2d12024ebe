"""The checkpoint a stream leaves after ingesting a whole history, written without ingesting it.

``bench --only history_scale`` (:mod:`tools.bench.history_scale`) measures what a restart, a trigger,
``checkpoint inspect`` and the nothing-new check cost once a landing holds years of deliveries, all of them
ingested. Ingesting 1M files through Spark would take days on 2 cores, and what those code paths read is only the
state the stream left, so :func:`write_ingested_state` writes that state as a stream that took each delivery in
its own trigger (a long-running job: one manifest per new file) would have left it:

- **discovery's window** after all but the last :data:`REPLAYED` deliveries: one snapshot
  (:class:`~spark_jobs.control.discovery.state.Window`, written by
  :class:`~spark_jobs.control.discovery.state.DiscoveryLog`) with each stem's ``[newest, cut]``
  (``cut = newest - lookback``), every file delivered at or after its stem's cut (``seen``) and ``admitted``;
  computed in one pass over the keys with the job's key layout (its stems and delivery times), holding only
  the window in memory;
- **the last REPLAYED deliveries through the planner itself** (:class:`~spark_jobs.control.discovery.planner.
  Discovery`, one file per manifest, each committed as Spark commits it), over a store that lists the same keys
  from memory (:class:`KeyStore`, a local folder read per listing as :class:`~spark_jobs.control.discovery.
  listing.LocalStore` counts them). REPLAYED is past the planner's retention (``RETAINED`` manifests behind the
  newest snapshot, one snapshot every ``SNAPSHOT_EVERY``), so the manifests, snapshots and ``status.json`` left
  are the planner's own and the hand-made snapshot is deleted by its compaction;
- **Spark's files a resume reads**, byte for byte as Spark 4.2 writes them on this stack (checked against a real
  run: a ``v1`` line, no trailing newline, Hadoop's ``.crc`` beside each, CRC32 per 512 bytes): ``metadata``,
  ``offsets/0`` whose one source offset is the landing source's ``{"v": 1, "manifest": M}`` and ``commits/0``.

The tables are not written: the runner creates them empty at its start (an empty table holds no batch of the
stream, which the inspection and the restart accept, as after batches that wrote no row).

Why replay and not write every file by hand: the manifests' and snapshots' shape, their retention and the
status line then come from the product's code, and the test (``tests/spark_jobs/test_history_state.py``)
checks the hand-made part against a real planner run from scratch. No pyspark.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Sequence

from spark_jobs.control.checkpoint.store import Location
from spark_jobs.control.discovery.listing import Entry, Store, store_of
from spark_jobs.control.discovery.planner import Discovery, offset
from spark_jobs.control.discovery.settings import DiscoverySettings, discovery_settings
from spark_jobs.control.discovery.state import RETAINED, SNAPSHOT_EVERY, DiscoveryLog, Window
from spark_jobs.registry import get_job

JOB = get_job("cloudtrail_etl")
UTC = dt.timezone.utc
# Deliveries taken by the planner itself at the end of the history: past its retention, so what it keeps is its own.
REPLAYED = RETAINED + 2 * SNAPSHOT_EVERY
# The SQL settings Spark 4.2 stores in each offsets/N of this project's sessions (copied from offsets/0 of a real
# run of cloudtrail_etl on this stack); a restart reads them back.
OFFSETS_CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "2",
    "spark.sql.streaming.stateStore.rocksdb.formatVersion": "5",
    "spark.sql.streaming.queryEvolution.enableSourceEvolution": "false",
    "spark.sql.streaming.stateStore.encodingFormat": "unsaferow",
    "spark.sql.streaming.statefulOperator.useStrictDistribution": "true",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "2",
    "spark.sql.streaming.multipleWatermarkPolicy": "min",
    "spark.sql.streaming.stateStore.rowChecksum.enabled": "false",
    "spark.sql.streaming.aggregation.stateFormatVersion": "2",
    "spark.sql.function.protobufExtensions.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.streaming.join.stateFormatVersion": "2",
    "spark.sql.streaming.stateStore.compression.codec": "lz4",
    "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan": "false",
}
CRC_CHUNK = 512


class KeyStore(Store):
    """A landing known by its keys, listed from memory one folder level at a time.

    :param like: the real store of the same root (it names the files: ``file:/...``, ``s3a://bucket/...``).
    :param keys: the files' keys relative to the root.
    :param size: every file's size.
    :param mtime_ms: every file's modification time.
    """

    def __init__(self, like: Store, keys: Iterable[str], size: int, mtime_ms: int) -> None:
        self.root = like.root
        self._like = like
        self._size, self._mtime_ms = size, mtime_ms
        self._dirs: dict[str, set[str]] = {}
        self._files: dict[str, list[str]] = {}
        for key in keys:
            folder, name = key.rsplit("/", 1)
            names = self._files.get(folder)
            if names is None:
                names = self._files[folder] = []
                self._add_folder(folder)
            names.append(name)
        self.requests = 0

    def _add_folder(self, folder: str) -> None:
        parent, _, name = folder.rpartition("/")
        known = self._dirs.setdefault(parent, set())
        if name not in known:
            known.add(name)
            if parent:
                self._add_folder(parent)

    def list_folder(self, folder: str, start_after: str | None = None) -> tuple[list[str], list[Entry]]:
        self.requests += 1
        return (sorted(self._dirs.get(folder, ())),
                [Entry(name, self._size, self._mtime_ms) for name in self._files.get(folder, ())])

    def key(self, folder: str, name: str) -> str:
        return self._like.key(folder, name)

    def relative(self, key: str) -> str | None:
        return self._like.relative(key)


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def window_after(settings: DiscoverySettings, keys: Iterable[str], naming: Store) -> Window:
    """The window a planner holds after admitting ``keys`` (oldest delivery first), one manifest per key: each stem's
    ``[newest, newest - lookback]``, the files at or after their stem's cut, ``admitted`` and the manifest id."""
    layout, lookback_ms = settings.layout, int(settings.lookback_seconds * 1000)
    recent: dict[str, deque] = {}
    newest: dict[str, int] = {}
    count = 0
    for relative in keys:
        folder, name = relative.rsplit("/", 1)
        key = naming.key(folder, name)
        moment = layout.delivery_time(key)
        if moment is None:
            raise ValueError(f"{key} has no delivery time in its key: the history must be dated")
        delivered, stem = _ms(moment), layout.stem(key)
        if delivered < newest.get(stem, delivered):
            raise ValueError(f"{key} is delivered before a key listed ahead of it: give the keys oldest first")
        newest[stem] = delivered
        kept = recent.setdefault(stem, deque())
        kept.append((key, delivered))
        while kept[0][1] < delivered - lookback_ms:
            kept.popleft()
        count += 1
    seen = {key: moment for kept in recent.values() for key, moment in kept}
    stems = {stem: [top, top - lookback_ms] for stem, top in newest.items()}
    return Window(id=count, seen=seen, stems=stems, admitted=count)


def _crc(data: bytes) -> bytes:
    """Hadoop's checksum file of ``data`` (``crc\\0``, bytes per checksum, one CRC32 per chunk)."""
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i:i + CRC_CHUNK]) & 0xFFFFFFFF)
                    for i in range(0, len(data), CRC_CHUNK))
    return b"crc\x00" + struct.pack(">i", CRC_CHUNK) + sums


def _write_logged(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.with_name(f".{path.name}.crc").write_bytes(_crc(data))


def write_spark_log(checkpoint: Path, manifest: int, planned_ms: int, query_id: str | None = None) -> str:
    """Spark's ``metadata``, ``offsets/0`` and ``commits/0`` of a stream whose batch 0 ended at manifest ``manifest``;
    returns the query id."""
    query_id = query_id or str(uuid.uuid4())
    _write_logged(checkpoint / "metadata", json.dumps({"id": query_id}, separators=(",", ":")).encode())
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": planned_ms, "conf": OFFSETS_CONF}
    # Spark writes the Python source's offset as the source's json.dumps gives it (", " and ": ")
    _write_logged(checkpoint / "offsets" / "0",
                  b"v1\n" + json.dumps(meta, separators=(",", ":")).encode() + b"\n" + json.dumps(offset(manifest)).encode())
    _write_logged(checkpoint / "commits" / "0", b'v1\n{"nextBatchWatermarkMs":0}')
    return query_id


@dataclass(frozen=True)
class IngestedState:
    """What :func:`write_ingested_state` wrote.

    :param checkpoint: the stream's checkpoint folder.
    :param manifest: the last manifest (batch 0's end offset).
    :param admitted: files ingested.
    :param seen: files in the window (remembered as seen).
    :param query_id: the stream's id (``metadata``).
    :param seconds: how long writing took.
    """

    checkpoint: Path
    manifest: int
    admitted: int
    seen: int
    query_id: str
    seconds: float

    def to_dict(self) -> dict:
        return {"checkpoint": str(self.checkpoint), "manifest": self.manifest, "admitted": self.admitted,
                "seen": self.seen, "query_id": self.query_id, "seconds": self.seconds}


def write_ingested_state(lake: Path, root: str, keys: Sequence[str], *, size: int, mtime_ms: int,
                         replayed: int = REPLAYED, lookback: str | None = None,
                         now: dt.datetime | None = None) -> IngestedState:
    """The checkpoint of ``cloudtrail_etl`` in ``lake`` after ingesting ``keys`` (relative to the landing ``root``,
    oldest delivery first) one delivery per trigger; see the module docstring.

    :param size: every file's size (the replayed manifests record it).
    :param mtime_ms: every file's modification time.
    :param replayed: deliveries taken by the planner itself at the end (at least the planner's retention; fewer when
        the history is shorter); the hand-made window is written after ``len(keys) - replayed`` of them, rounded
        down to the planner's snapshot interval.
    :param lookback: the window's lookback (default: the job's key layout's, as a run without ``--lookback`` has it).
    :param now: the time the planner's status line and Spark's ``batchTimestampMs`` say (default: now).
    """
    started = time.monotonic()
    checkpoint = Path(lake) / "checkpoints" / JOB.name
    if checkpoint.exists():
        raise FileExistsError(f"{checkpoint} exists: write the ingested state into a new lake")
    settings = replace(discovery_settings(JOB, root, str(checkpoint), dict(JOB.file_source_options), lookback=lookback),
                       max_files=1)
    naming = store_of(root)
    head = max(0, (len(keys) - replayed) // SNAPSHOT_EVERY * SNAPSHOT_EVERY)
    log = DiscoveryLog(Location.of(str(checkpoint)))
    log.write_snapshot(window_after(settings, keys[:head], naming))
    moment = now or dt.datetime.now(UTC)
    discovery = Discovery(settings, store_factory=lambda _root: KeyStore(naming, keys, size, mtime_ms),
                          clock=lambda: moment)
    start = offset(head)
    for _ in range(len(keys) - head):
        end = discovery.latest(start, 1)
        if end == start:
            raise AssertionError(f"the planner found nothing new after manifest {start['manifest']} of {len(keys)}")
        start = end
        discovery.committed(end)  # Spark commits each batch before it plans the next
    window = log.window(settings.layout)
    if (window.id, window.admitted) != (len(keys), len(keys)):
        raise AssertionError(f"the planner's window ends at manifest {window.id} with {window.admitted} files "
                             f"admitted, expected {len(keys)}")
    query_id = write_spark_log(checkpoint, window.id, _ms(moment))
    return IngestedState(checkpoint, window.id, window.admitted, len(window.seen), query_id,
                         round(time.monotonic() - started, 2))
