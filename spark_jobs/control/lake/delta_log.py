"""A lake table's Delta log, read with delta-rs (no JVM): its versions and their times, the version an ``--as-of``
names, the history people read, and the plan of a restore.

Shared by ``python -m spark_jobs sql --as-of`` and ``lake history|restore`` (:mod:`spark_jobs.driver.sql`,
:mod:`spark_jobs.driver.lake_tools`) and by the on-call checks, which run in Airflow without pyspark
(:mod:`spark_jobs.control.oncall.requests`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from spark_jobs.model.errors import UsageError
from spark_jobs.model.times import utc_iso_millis
from spark_jobs.model.lake import Lake
from spark_jobs.model.object_store import delta_rs_options


@dataclass(frozen=True)
class AsOf:
    """A point in a table's history as given on the command line.

    :param text: what the person typed (for error messages).
    :param version: a version number, or None for a time.
    :param timestamp: an aware UTC datetime, or None for a version.
    """

    text: str
    version: int | None = None
    timestamp: datetime | None = None


def parse_as_of(text: str) -> AsOf:
    """``VERSION`` (a whole number >= 0) or ``TIMESTAMP`` (ISO-8601 date or time; UTC if no offset).

    :raises UsageError: naming the value when it is neither.
    """
    value = text.strip()
    if re.fullmatch(r"\d+", value):
        return AsOf(text, version=int(value))
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"--as-of {text!r} is neither a version (a whole number like 3) nor a time "
                         "(ISO-8601 like 2026-11-23T08:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return AsOf(text, timestamp=moment.astimezone(timezone.utc))


def commit_times(path: Path) -> dict[int, int]:
    """Each version in the table's log and its commit time (epoch ms), read with delta-rs (no JVM)."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path), storage_options=delta_rs_options(path))
    return {entry["version"]: entry["timestamp"] for entry in table.history()}


def resolve_version(table: str, path: Path, as_of: AsOf) -> int:
    """The version of ``table`` that ``as_of`` names.

    :raises UsageError: a version not in the log, or a time before the first commit, naming the value
        and the table's valid range.
    """
    times = commit_times(path)
    first, last = min(times), max(times)
    valid = (f"table {table} has versions {first}..{last}, committed {utc_iso_millis(times[first])} .. "
             f"{utc_iso_millis(times[last])}")
    if as_of.version is not None:
        if as_of.version not in times:
            raise UsageError(f"--as-of {as_of.text}: no such version; {valid}")
        return as_of.version
    millis = as_of.timestamp.timestamp() * 1000
    earlier = [version for version, at in times.items() if at <= millis]
    if not earlier:
        raise UsageError(f"--as-of {as_of.text} is before table {table} was created; {valid}")
    return max(earlier)


def delta_path(lake: Lake, table: str) -> Path:
    """The table's folder, checked to be a Delta table.

    :raises UsageError: when it is absent or in the old file-sink layout, with the way out.
    """
    path = lake.table_path(table)
    if (path / "_delta_log").is_dir():
        return path
    if (path / "_spark_metadata").is_dir():
        raise UsageError(f"table {table} at {path} is in the old file-sink layout; convert it first: "
                         f"python -m spark_jobs lake convert --table {table}")
    raise UsageError(f"table {table} has no Delta table at {path} yet (run its job first, or pass --lake)")


def int_or_none(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def latest_version(path: Path) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(path), storage_options=delta_rs_options(path)).version()


def version_rows(path: Path, version: int | None = None) -> int | None:
    """Rows in ``version`` (the latest if None) from the add actions' stats; None without stats."""
    from deltalake import DeltaTable

    actions = DeltaTable(str(path), version=version,
                         storage_options=delta_rs_options(path)).get_add_actions(flatten=True)
    if actions.num_rows == 0:
        return 0
    counts = actions.column("num_records").to_pylist() if "num_records" in actions.column_names else [None]
    return None if any(c is None for c in counts) else int(sum(counts))


def partitions_with_small_files(path: Path, column: str | None, below_bytes: int, min_files: int = 2) -> list[str]:
    """The values of partition ``column`` whose partition holds ``min_files`` or more files under ``below_bytes``,
    sorted: the partitions appends have written since they were last compacted. For an unpartitioned
    table (``column`` None) the table is one partition, listed as ``""``.

    A compacted (or Z-ordered) partition holds files near the target size and at most one smaller
    remainder, so it is not listed until appends add small files to it again; read from the table's
    snapshot (its add actions) with delta-rs, one row per file, without reading the data.
    """
    from collections import Counter

    from deltalake import DeltaTable

    actions = DeltaTable(str(path), storage_options=delta_rs_options(path)).get_add_actions(flatten=True)
    if actions.num_rows == 0:
        return []
    key = f"partition.{column}"
    values = actions.column(key).to_pylist() if column else [""] * actions.num_rows
    small = Counter(value for value, size in zip(values, actions.column("size_bytes").to_pylist()) if size < below_bytes)
    return sorted(str(value) for value, files in small.items() if files >= min_files and value is not None)


# operation -> (metric of rows added, metric of rows removed), from delta-spark's commitInfo.
_ROW_METRICS = {
    "WRITE": ("numOutputRows", None),
    "STREAMING UPDATE": ("numOutputRows", None),
    "CREATE TABLE AS SELECT": ("numOutputRows", None),
    "REPLACE TABLE AS SELECT": ("numOutputRows", None),
    "MERGE": ("numTargetRowsInserted", "numTargetRowsDeleted"),
    "DELETE": (None, "numDeletedRows"),
    "UPDATE": ("numUpdatedRows", "numUpdatedRows"),
    "OPTIMIZE": (None, None),
}


_FILE_METRICS = (("numFiles", None), ("numAddedFiles", "numRemovedFiles"),
                 ("numTargetFilesAdded", "numTargetFilesRemoved"),
                 ("numConvertedFiles", None), ("numRestoredFiles", "numRemovedFiles"), (None, "numDeletedFiles"))


def history(lake: Lake, table: str, limit: int = 20) -> list[dict]:
    """The table's newest ``limit`` versions, newest first, read from the log with delta-rs.

    Each entry: version, time (UTC), operation, rows_added, rows_removed (None where the operation
    does not say: an ``OPTIMIZE`` or ``VACUUM`` changes no rows, so 0), files_added, files_removed,
    and the operation's parameters.
    """
    from deltalake import DeltaTable

    entries = []
    path = delta_path(lake, table)
    for commit in DeltaTable(str(path), storage_options=delta_rs_options(path)).history(limit):
        operation = commit.get("operation") or ""
        metrics = commit.get("operationMetrics") or {}
        added_key, removed_key = _ROW_METRICS.get(operation, (None, None))
        rows_added = int_or_none(metrics.get(added_key)) if added_key else None
        rows_removed = int_or_none(metrics.get(removed_key)) if removed_key else None
        if operation in ("OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "CREATE TABLE"):
            rows_added, rows_removed = 0, 0
        files_added = files_removed = None
        for add_key, remove_key in _FILE_METRICS:
            if add_key and add_key in metrics and files_added is None:
                files_added = int_or_none(metrics[add_key])
            if remove_key and remove_key in metrics and files_removed is None:
                files_removed = int_or_none(metrics[remove_key])
        entries.append({
            "table": table,
            "version": commit.get("version"),
            "time": utc_iso_millis(commit.get("timestamp")),
            "operation": operation,
            "rows_added": rows_added,
            "rows_removed": rows_removed,
            "files_added": files_added,
            "files_removed": files_removed,
            "parameters": {k: v for k, v in (commit.get("operationParameters") or {}).items()},
        })
    return entries


@dataclass(frozen=True)
class RestorePlan:
    """What ``restore`` will do, worked out from the log before anything changes.

    :param table: the table.
    :param path: its folder.
    :param current_version: the newest version now.
    :param target_version: the version whose contents come back.
    :param target_time: that version's commit time (UTC).
    :param target_operation: the operation that made it.
    :param current_rows: rows now (None without stats).
    :param target_rows: rows in the target version (None without stats).
    """

    table: str
    path: Path
    current_version: int
    target_version: int
    target_time: str | None
    target_operation: str | None
    current_rows: int | None
    target_rows: int | None

    def describe(self) -> str:
        rows = (f" ({self.current_rows} rows now, {self.target_rows} rows then)"
                if self.current_rows is not None and self.target_rows is not None else "")
        return (f"restore {self.table} at {self.path} from version {self.current_version} to the contents of version "
                f"{self.target_version} ({self.target_operation}, committed {self.target_time}){rows}; this commits "
                f"version {self.current_version + 1} (a new version: the history stays and can be restored too). "
                "Rows the running job wrote after that version are removed and not ingested again")


def restore_plan(lake: Lake, table: str, to_version: int | None = None, to_timestamp: str | None = None) -> RestorePlan:
    """Resolve ``--to-version`` / ``--to-timestamp`` against the table's log (delta-rs, no JVM).

    :raises UsageError: neither or both given, a version or time outside the table's history, or the
        target is the current version.
    """
    if (to_version is None) == (to_timestamp is None):
        raise UsageError("restore needs exactly one of --to-version N or --to-timestamp TIME")
    path = delta_path(lake, table)
    if to_version is not None:
        as_of = AsOf(str(to_version), version=to_version)
    else:
        as_of = parse_as_of(to_timestamp)
        if as_of.timestamp is None:
            raise UsageError(f"--to-timestamp {to_timestamp!r} is not a time (ISO-8601 like 2026-11-23T08:00:00Z)")
    target = resolve_version(table, path, as_of)
    current = latest_version(path)
    if target == current:
        raise UsageError(f"{table} is already at version {current}; nothing to restore")
    operation = next((c.get("operation") for c in commit_infos(path) if c.get("version") == target), None)
    return RestorePlan(table, path, current, target, utc_iso_millis(commit_times(path)[target]), operation,
                       version_rows(path), version_rows(path, target))


def commit_infos(path: Path) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(path), storage_options=delta_rs_options(path)).history()
