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

from spark_jobs.checkpoint.store import Location

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


def _data_adds(log: Location, version: int) -> list[str]:
    """The paths of the data files commit ``version`` added (``dataChange`` true), in commit order."""
    paths = []
    for line in log.child(f"{version:020d}.json").read_bytes().decode("utf-8").splitlines():
        if '"add"' in line:
            add = json.loads(line).get("add")
            if add and add.get("dataChange", True):
                paths.append(add["path"])
    return paths


def _snapshot_files(log: Location, names: list[str], version: int) -> int | None:
    """How many files the table's snapshot of ``version`` holds (None: its log is gone)."""
    checkpoints = sorted(int(m.group(1)) for m in map(CHECKPOINT.match, names) if m and int(m.group(1)) <= version)
    files: set[str] = set()
    start = -1
    if checkpoints:
        import pyarrow.parquet as pq

        start = checkpoints[-1]
        for name in names:
            match = CHECKPOINT.match(name)
            if match and int(match.group(1)) == start:
                table = pq.read_table(io.BytesIO(log.child(name).read_bytes()), columns=["add"])
                files.update(a["path"] for a in table.column("add").to_pylist() if a)
    commits = {int(m.group(1)) for m in map(COMMIT.match, names) if m}
    for number in range(start + 1, version + 1):
        if number not in commits:
            return None
        for line in log.child(f"{number:020d}.json").read_bytes().decode("utf-8").splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                files.add(action["add"]["path"])
            elif "remove" in action:
                files.discard(action["remove"]["path"])
    return len(files)


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
