"""The discovery's own log in a job's checkpoint: which files each offset stands for, and what was seen lately.

::

    <checkpoint>/discovery/manifests/<M>.json   the files of manifest M (a source offset {"v": 1, "manifest": M}):
                                               fixed once written, so batch N reads the same files after any crash
    <checkpoint>/discovery/snapshots/<M>.json   the window after manifest M: every file admitted with a delivery
                                               time at or after the cut, the newest delivery, the cut, counts
    <checkpoint>/discovery/status.json          the last poll (listing cost, queue backlog): monitoring only
    <checkpoint>/discovery/skipped.json         notification mode: every queue message deleted without loading a
                                               file, counted by reason (written before the messages are deleted)

A manifest is written before the source returns its offset, and a restart that finds a manifest past the
offset Spark resumes from returns that same manifest (the files of an offset never change). Every tenth
committed manifest a snapshot is written with the files seen inside the window only; a restart reads the
newest snapshot and the manifests after it: O(window), never the history. Manifests and snapshots older than
:data:`RETAINED` manifests behind the newest snapshot are deleted (Spark keeps the offsets of its last 100
batches; the same horizon here lets ``checkpoint inspect`` name the files of a recent batch).

Why a log of its own and not Spark's file-source log (``sources/0``): that log holds every file ever seen and
is rewritten whole every ten batches; its size is the history's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from spark_jobs.control.checkpoint.store import Location
from spark_jobs.control.discovery.listing import Candidate

FORMAT = 1
SNAPSHOT_EVERY = 10
RETAINED = 100
SKIPS_REMEMBERED = 500  # message ids kept to count a message once, however often it comes back
_NAME = re.compile(r"^(\d+)\.json$")


class DiscoveryStateError(Exception):
    """The discovery log cannot be read; the message names the file and the way out."""


@dataclass
class Manifest:
    """The files one source offset stands for.

    :param id: its number (the offset ``{"v": 1, "manifest": id}``).
    :param files: the files, in the order they were admitted.
    :param stems: the windows it moved: stem -> ``[newest_ms, cut_ms]`` after it (see :class:`Window`).
    :param listing: what the discovery that made it cost (requests, folders, seconds).
    :param messages: queue receipts to delete once the manifest's batch is committed (notification mode).
    :param dropped: notifications dropped, by reason (notification mode).
    """

    id: int
    files: list[Candidate]
    stems: dict[str, list[int]] = field(default_factory=dict)
    listing: dict = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps({"v": FORMAT, "manifest": self.id, "stems": self.stems, "listing": self.listing,
                           "messages": self.messages, "dropped": self.dropped,
                           "files": [f.row() for f in self.files]}, separators=(",", ":")).encode()

    @classmethod
    def of_json(cls, data: bytes) -> "Manifest":
        value = json.loads(data)
        return cls(int(value["manifest"]), [Candidate.of_row(r) for r in value["files"]],
                   {str(k): [int(v[0]), int(v[1])] for k, v in (value.get("stems") or {}).items()},
                   value.get("listing") or {}, list(value.get("messages") or []), dict(value.get("dropped") or {}))


@dataclass
class Window:
    """What discovery remembers after manifest ``id``: one window per *stem* (the folder a file's date folders
    hang from, :meth:`~spark_jobs.model.layout.KeyLayout.stem`).

    A stem's window is ``[newest_ms, cut_ms]``: the newest delivery admitted from it, and the time before which
    its files are no longer looked for (``newest - lookback``, never past a file of it still waiting). A stem
    not in :attr:`stems` is new: it is listed whole (from :attr:`floor_ms`, when a start was given).

    :param id: the last manifest folded in.
    :param seen: key -> delivery time (ms) of every file admitted and delivered at or after its stem's cut.
    :param stems: stem -> ``[newest_ms, cut_ms]``.
    :param admitted: files admitted in all (every manifest, and what a migration took over).
    :param migrated: how the window was taken over from Spark's file-source log, if it was.
    :param floor_ms: no file delivered before this is looked for, in any stem (``--start-at``).
    """

    id: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    stems: dict[str, list[int]] = field(default_factory=dict)
    admitted: int = 0
    migrated: dict | None = None
    floor_ms: int | None = None

    @property
    def newest_ms(self) -> int | None:
        return max((newest for newest, _ in self.stems.values()), default=self.floor_ms)

    def cut_of(self, stem: str) -> int | None:
        """Files of ``stem`` delivered before this are not looked for (``None``: the stem is listed whole)."""
        window = self.stems.get(stem)
        return window[1] if window is not None else self.floor_ms

    def fold(self, manifest: Manifest, layout) -> None:
        """Take ``manifest`` in (its files seen, its stems' windows), then forget what fell behind the cuts."""
        for file in manifest.files:
            self.seen[file.key] = file.delivered_ms
        self.admitted += len(manifest.files)
        self.stems.update({stem: list(window) for stem, window in manifest.stems.items()})
        self.id = manifest.id
        self.prune(layout)

    def prune(self, layout) -> None:
        cuts = {stem: window[1] for stem, window in self.stems.items()}
        if not cuts and self.floor_ms is None:
            return
        kept = {}
        for key, moment in self.seen.items():
            cut = cuts.get(layout.stem(key), self.floor_ms) if layout is not None else self.floor_ms
            if cut is None or moment >= cut:
                kept[key] = moment
        self.seen = kept

    def to_json(self) -> bytes:
        return json.dumps({"v": FORMAT, "manifest": self.id, "stems": self.stems, "admitted": self.admitted,
                           "migrated": self.migrated, "floor_ms": self.floor_ms, "seen": sorted(self.seen.items())},
                          separators=(",", ":")).encode()

    @classmethod
    def of_json(cls, data: bytes) -> "Window":
        value = json.loads(data)
        return cls(int(value["manifest"]), {str(k): int(v) for k, v in value.get("seen") or ()},
                   {str(k): [int(v[0]), int(v[1])] for k, v in (value.get("stems") or {}).items()},
                   int(value.get("admitted") or 0), value.get("migrated"), value.get("floor_ms"))


def _write(target: Location, data: bytes) -> None:
    """Write ``target`` whole or not at all: locally a hidden temp file renamed over it (the name Spark's own
    temp files have, so ``checkpoint repair`` knows a left-over one); on an object store one PUT."""
    if not target.local:
        target.fs.pipe_file(target.path, data)
        return
    import os
    import uuid

    folder, name = os.path.split(target.path)
    os.makedirs(folder, exist_ok=True)
    temp = os.path.join(folder, f".{name}.{uuid.uuid4()}.tmp")
    with open(temp, "wb") as handle:
        handle.write(data)
    os.replace(temp, target.path)


class DiscoveryLog:
    """The ``discovery/`` folder of one checkpoint (any fsspec location).

    :param checkpoint: the stream's checkpoint folder.
    """

    def __init__(self, checkpoint: Location) -> None:
        self.checkpoint = checkpoint
        self.folder = checkpoint.child("discovery")
        self.manifests = self.folder.child("manifests")
        self.snapshots = self.folder.child("snapshots")

    def exists(self) -> bool:
        return bool(self.snapshot_ids() or self.manifest_ids())

    @staticmethod
    def _ids(folder: Location) -> list[int]:
        return sorted(int(m.group(1)) for m in map(_NAME.match, folder.names()) if m)

    def manifest_ids(self) -> list[int]:
        return self._ids(self.manifests)

    def snapshot_ids(self) -> list[int]:
        return self._ids(self.snapshots)

    def _read(self, folder: Location, number: int, parse):
        target = folder.child(f"{number}.json")
        try:
            return parse(target.read_bytes())
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise DiscoveryStateError(
                f"{target.url} is damaged ({exc}): the files behind that offset are unknown; restore the "
                "checkpoint from a backup, or reset it (streaming_oncall reset_checkpoint) and backfill") from None

    def read_manifest(self, number: int) -> Manifest | None:
        return self._read(self.manifests, number, Manifest.of_json)

    def read_snapshot(self, number: int) -> Window | None:
        return self._read(self.snapshots, number, Window.of_json)

    def write_manifest(self, manifest: Manifest) -> None:
        _write(self.manifests.child(f"{manifest.id}.json"), manifest.to_json())

    def write_snapshot(self, window: Window) -> None:
        _write(self.snapshots.child(f"{window.id}.json"), window.to_json())

    def window(self, layout, upto: int | None = None) -> Window:
        """The window after manifest ``upto`` (default: the newest manifest): the newest snapshot at or before it,
        with the manifests after that snapshot folded in (``layout``: the job's key layout, which names stems).

        :raises DiscoveryStateError: a manifest between the snapshot and ``upto`` is missing or damaged.
        """
        snapshots = [s for s in self.snapshot_ids() if upto is None or s <= upto]
        window = (self.read_snapshot(snapshots[-1]) if snapshots else None) or Window()
        manifests = [m for m in self.manifest_ids() if m > window.id and (upto is None or m <= upto)]
        for number in manifests:
            manifest = self.read_manifest(number)
            if manifest is None or manifest.id != window.id + 1:
                raise DiscoveryStateError(
                    f"{self.manifests.url}: manifest {window.id + 1} is missing after snapshot {window.id}: the "
                    "files behind that offset are unknown; restore the checkpoint from a backup, or reset it and "
                    "backfill")
            window.fold(manifest, layout)
        return window

    def compact(self, window: Window) -> None:
        """Write ``window`` as a snapshot when it is :data:`SNAPSHOT_EVERY` manifests past the newest one, then
        delete manifests and snapshots more than :data:`RETAINED` manifests behind the newest snapshot."""
        snapshots = self.snapshot_ids()
        if window.id - (snapshots[-1] if snapshots else 0) >= SNAPSHOT_EVERY:
            self.write_snapshot(window)
            snapshots.append(window.id)
        if not snapshots:
            return
        horizon = snapshots[-1] - RETAINED
        for number in self.manifest_ids():
            if number <= horizon:
                self.manifests.child(f"{number}.json").remove()
        for number in snapshots[:-1]:
            if number < horizon:
                self.snapshots.child(f"{number}.json").remove()

    def record_skips(self, entries: list[tuple[str, str, str | None]], at: str, deferred: int = 0) -> dict:
        """Add queue messages deleted without loading a file (``(message_id, reason, key)``) to ``skipped.json``
        before they are deleted, and ``deferred`` messages put back for later; returns the file's content.

        A message counted and then not deleted (a kill in between) comes back with the same id: it is counted once
        while its id is among the last :data:`SKIPS_REMEMBERED`."""
        value = self.skips()
        total, remembered = value["total"], {row[0] for row in value["recent"]}
        for message_id, reason, key in entries:
            if message_id not in remembered:
                total[reason] = total.get(reason, 0) + 1
                remembered.add(message_id)
                value["recent"].append([message_id, reason, key, at])
        value["recent"] = value["recent"][-SKIPS_REMEMBERED:]
        value["deferred"] += deferred
        value["at"] = at
        _write(self.folder.child("skipped.json"), json.dumps(value, sort_keys=True).encode())
        return value

    def skips(self) -> dict:
        """``skipped.json``: ``total`` (reason -> messages deleted without a file loaded), ``deferred`` (messages
        put back for a later micro-batch or run, each time), ``recent`` (``[message_id, reason, key, at]``)."""
        try:
            value = json.loads(self.folder.child("skipped.json").read_bytes())
        except (FileNotFoundError, ValueError):
            value = {}
        return {"v": FORMAT, "total": dict(value.get("total") or {}), "deferred": int(value.get("deferred") or 0),
                "recent": list(value.get("recent") or []), "at": value.get("at")}

    def write_status(self, status: dict) -> None:
        _write(self.folder.child("status.json"), json.dumps(status, sort_keys=True).encode())

    def status(self) -> dict | None:
        try:
            return json.loads(self.folder.child("status.json").read_bytes())
        except (FileNotFoundError, ValueError):
            return None
