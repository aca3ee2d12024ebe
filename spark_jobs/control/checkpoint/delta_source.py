"""How far a stream reading a Delta table is behind it, from the checkpoint's offsets and the table's log (no Spark).

Delta's streaming source writes offsets like ``{"sourceVersion": 1, "reservoirId": "<table id>",
"reservoirVersion": V, "index": I, "isStartingVersion": B}``: everything before version ``V`` is
read, and of version ``V`` the files up to position ``I`` (``-1``: none of it). ``isStartingVersion``
is true while the stream's first batches read the table's snapshot of version ``V`` (its files sorted
by modification time and path), then it reads each later commit's added files. The backlog is the
data files (``add`` actions with ``dataChange``) the stream has not read: the rest of the snapshot, then
every commit after ``V``. The table's ``_delta_log`` gives both: its newest checkpoint (Parquet) and
the JSON commits after it.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass

from spark_jobs.control.checkpoint.store import Location

COMMIT = re.compile(r"^(\d{20})\.json$")
CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")


@dataclass(frozen=True)
class DeltaOffset:
    """A Delta streaming source's offset.

    :param table_id: the table's id (``reservoirId``).
    :param version: the version being read (``reservoirVersion``).
    :param index: the last file read of that version (-1: none).
    :param starting: whether the version is the starting snapshot.
    """

    table_id: str | None
    version: int
    index: int
    starting: bool


def delta_source_offset(offset: dict | None) -> DeltaOffset | None:
    """Parse a Delta source's offset; None for anything else (a file source's ``{"logOffset": N}``)."""
    if not isinstance(offset, dict) or not isinstance(offset.get("reservoirVersion"), int):
        return None
    return DeltaOffset(offset.get("reservoirId"), offset["reservoirVersion"], int(offset.get("index", -1)),
                       bool(offset.get("isStartingVersion", False)))


@dataclass
class DeltaBacklog:
    """What a Delta source table holds that a stream has not read.

    :param latest_version: the table's newest version.
    :param files: data files not read yet (None: the log no longer holds the versions needed).
    :param versions: commits after the offset's version.
    """

    latest_version: int | None
    files: int | None
    versions: int

    def to_dict(self) -> dict:
        return {"latest_version": self.latest_version, "backlog_files": self.files, "backlog_versions": self.versions}


def _data_adds(log: Location, version: int, skip_change_commits: bool = False) -> list[str]:
    """The paths of the data files commit ``version`` added (``dataChange`` true), in commit order; none
    for a commit that also removed data when ``skip_change_commits`` (Delta's source skips it whole)."""
    paths, removes = [], False
    for line in log.child(f"{version:020d}.json").read_bytes().decode("utf-8").splitlines():
        if '"add"' in line or '"remove"' in line:
            action = json.loads(line)
            add, remove = action.get("add"), action.get("remove")
            if add and add.get("dataChange", True):
                paths.append(add["path"])
            if remove and remove.get("dataChange", True):
                removes = True
    return [] if skip_change_commits and removes else paths


def _snapshot_adds(log: Location, names: list[str], version: int) -> dict[str, int] | None:
    """The files of the table's snapshot of ``version`` with their modification times (None: its log is gone)."""
    checkpoints = sorted(int(m.group(1)) for m in map(CHECKPOINT.match, names) if m and int(m.group(1)) <= version)
    files: dict[str, int] = {}
    start = -1
    if checkpoints:
        import pyarrow.parquet as pq

        start = checkpoints[-1]
        for name in names:
            match = CHECKPOINT.match(name)
            if match and int(match.group(1)) == start:
                table = pq.read_table(io.BytesIO(log.child(name).read_bytes()), columns=["add"])
                files.update((a["path"], int(a.get("modificationTime") or 0))
                             for a in table.column("add").to_pylist() if a)
    commits = {int(m.group(1)) for m in map(COMMIT.match, names) if m}
    for number in range(start + 1, version + 1):
        if number not in commits:
            return None
        for line in log.child(f"{number:020d}.json").read_bytes().decode("utf-8").splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                files[action["add"]["path"]] = int(action["add"].get("modificationTime") or 0)
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
    return files


def _snapshot_files(log: Location, names: list[str], version: int) -> int | None:
    """How many files the table's snapshot of ``version`` holds (None: its log is gone)."""
    files = _snapshot_adds(log, names, version)
    return None if files is None else len(files)


@dataclass(frozen=True)
class BatchInput:
    """The data one micro-batch of a Delta source read, as Delta's source admits it.

    :param snapshot_version: read the whole snapshot of this version (``None``: no snapshot part).
    :param files: and these data files (paths relative to the table, as its log writes them).
    """

    snapshot_version: int | None
    files: tuple[str, ...]


def batch_input(table: Location, start: DeltaOffset | None, end: DeltaOffset,
                skip_change_commits: bool = False) -> BatchInput:
    """The files of the micro-batch that read from ``start`` (exclusive; ``None``: the stream's first batch)
    to ``end`` (inclusive), the way Delta's source orders them: the starting snapshot's files sorted by
    modification time and path, then each later commit's data files in commit order; an offset
    ``(version, index)`` is the position of the last file read (``index`` -1: none of that version yet).

    :raises LogDamage: when the table's log no longer holds the versions needed.
    """
    from spark_jobs.control.checkpoint.logs import LogDamage

    log = table.child("_delta_log")
    names = log.names()
    if start is None and not end.starting:
        # the first batch read the whole snapshot (and maybe commits after it): for a table that only
        # grows, that is the snapshot before the end offset's version, plus the end version's files read
        files = _version_files(log, end.version, -1, end.index, skip_change_commits) if end.index >= 0 else []
        return BatchInput(end.version - 1, tuple(files))
    files: list[str] = []
    if start is None or start.starting:
        snapshot_version = end.version if start is None else start.version
        adds = _snapshot_adds(log, names, snapshot_version)
        if adds is None:
            raise LogDamage(f"the log of {table.url} no longer holds version {snapshot_version}")
        ordered = sorted(adds, key=lambda path: (adds[path], path))
        first = -1 if start is None else start.index
        last = end.index if end.starting else len(ordered) - 1
        files += ordered[first + 1:last + 1]
        if end.starting:
            return BatchInput(None, tuple(files))
        version, after = snapshot_version + 1, -1
    else:
        version, after = start.version, start.index
    while version < end.version or (version == end.version and end.index >= 0):
        if not log.child(f"{version:020d}.json").exists():
            raise LogDamage(f"the log of {table.url} no longer holds version {version}")
        upto = end.index if version == end.version else None
        files += _version_files(log, version, after, upto, skip_change_commits)
        version, after = version + 1, -1
    return BatchInput(None, tuple(files))


def _version_files(log: Location, version: int, after: int, upto: int | None, skip: bool) -> list[str]:
    adds = _data_adds(log, version, skip)
    return adds[after + 1:None if upto is None else upto + 1]


def delta_backlog(table: Location, offset: DeltaOffset | None) -> DeltaBacklog:
    """The data files of ``table`` a stream at ``offset`` has not read (``None``: it has not started)."""
    log = table.child("_delta_log")
    names = log.names()
    commits = sorted(int(m.group(1)) for m in map(COMMIT.match, names) if m)
    checkpoints = [int(m.group(1)) for m in map(CHECKPOINT.match, names) if m]
    latest = max(commits + checkpoints, default=None)
    if latest is None:
        return DeltaBacklog(None, 0, 0)
    if offset is None:
        return DeltaBacklog(latest, _snapshot_files(log, names, latest), latest + 1)
    pending = 0
    first_later = offset.version + 1
    if offset.starting:
        total = _snapshot_files(log, names, offset.version)
        if total is None:
            return DeltaBacklog(latest, None, latest - offset.version)
        pending += max(0, total - (offset.index + 1))
    else:
        first_later = offset.version
    available = set(commits)
    for version in range(first_later, latest + 1):
        if version not in available:
            return DeltaBacklog(latest, None, latest - offset.version)
        adds = _data_adds(log, version)
        pending += len(adds[offset.index + 1:]) if version == offset.version else len(adds)
    return DeltaBacklog(latest, pending, max(0, latest - offset.version + (0 if offset.starting else 1)))
