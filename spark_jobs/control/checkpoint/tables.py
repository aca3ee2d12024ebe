"""Which micro-batches each output table already holds, read from the table's own log (no Spark).

- A Delta table records each idempotent write as a ``txn`` action: ``appId`` "<checkpoint query
  id>:<table>", ``version`` the batch id (Delta skips a write whose version is not above the last).
  Read with delta-rs (:meth:`deltalake.DeltaTable.transaction_version`) for local tables, and from
  the ``_delta_log`` (JSON commits and parquet checkpoints) on any fsspec filesystem, which also
  lists every app id (how a lost query id is recovered).

(A table of the previous version's file-sink layout is converted by ``python -m spark_jobs lake convert``.)
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field

from spark_jobs.model.object_store import delta_rs_options
from spark_jobs.control.checkpoint.store import Location

DELTA_COMMIT = re.compile(r"^(\d{20})\.json$")
DELTA_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")


@dataclass
class TableProgress:
    """What one table says about the stream's batches.

    :param name: the table.
    :param format: ``delta``, ``missing`` or ``unreadable``.
    :param batch: the last batch id it holds for this stream (None: none, or unknown).
    :param app_id: the Delta app id looked up (``<query id>:<table>``).
    :param app_ids: every Delta app id in the table's log, with its last version.
    :param error: why the table could not be read.
    """

    name: str
    format: str
    batch: int | None = None
    app_id: str | None = None
    app_ids: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict:
        return {"format": self.format, "batch": self.batch, "app_id": self.app_id, "error": self.error}


def delta_app_versions(table: Location) -> dict[str, int]:
    """Every ``txn`` app id in a Delta table's log with its last version (newest checkpoint + later commits)."""
    log = table.child("_delta_log")
    names = log.names()
    checkpoints = sorted({int(m.group(1)) for m in map(DELTA_CHECKPOINT.match, names) if m})
    start = checkpoints[-1] if checkpoints else -1
    versions: dict[str, int] = {}
    if checkpoints:
        import pyarrow.parquet as pq

        for name in names:
            match = DELTA_CHECKPOINT.match(name)
            if match and int(match.group(1)) == start:
                frame = pq.read_table(io.BytesIO(log.child(name).read_bytes()), columns=["txn"])
                for txn in frame.column("txn").to_pylist():
                    if txn and txn.get("appId") is not None:
                        versions[txn["appId"]] = int(txn["version"])
    commits = sorted(int(m.group(1)) for m in map(DELTA_COMMIT.match, names) if m)
    for version in commits:
        if version <= start:
            continue
        for line in log.child(f"{version:020d}.json").read_bytes().decode("utf-8").splitlines():
            if '"txn"' not in line:
                continue
            action = json.loads(line).get("txn")
            if action and action.get("appId") is not None:
                versions[action["appId"]] = int(action["version"])
    return versions


def delta_transaction_version(table: Location, app_id: str) -> int | None:
    """The last batch a Delta table committed for ``app_id``: delta-rs for a local table, else the log."""
    if table.local:
        from deltalake import DeltaTable

        try:
            return DeltaTable(table.path, storage_options=delta_rs_options(table.path)).transaction_version(app_id)
        except Exception:  # noqa: BLE001 - e.g. a table feature delta-rs does not read: the log itself says
            pass
    return delta_app_versions(table).get(app_id)


def table_progress(table: Location, name: str, query_id: str | None) -> TableProgress:
    """Which batches of the stream ``query_id`` the table at ``table`` holds."""
    try:
        if table.child("_delta_log").isdir():
            progress = TableProgress(name, "delta", app_ids=delta_app_versions(table))
            if query_id:
                progress.app_id = f"{query_id}:{name}"
                progress.batch = delta_transaction_version(table, progress.app_id)
            return progress
    except Exception as exc:  # noqa: BLE001 - reported, never fatal for an inspection
        return TableProgress(name, "unreadable", error=f"{type(exc).__name__}: {exc}")
    return TableProgress(name, "missing")


def recover_query_ids(tables: list[TableProgress]) -> dict[str, list[str]]:
    """Query ids that the tables' Delta app ids ``<query id>:<table>`` name: query id -> tables naming it."""
    found: dict[str, list[str]] = {}
    for table in tables:
        for app_id in table.app_ids:
            query_id, _, suffix = app_id.rpartition(":")
            if query_id and suffix == table.name:
                found.setdefault(query_id, []).append(table.name)
    return found
