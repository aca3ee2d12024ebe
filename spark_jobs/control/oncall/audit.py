"""``ops_audit``: one row per on-call action (refused ones and dry runs too), a Delta table in the lake.

Written with delta-rs (``deltalake.write_deltalake``, an append: one small Parquet file and one commit
per row), so an audit row never waits for a JVM and is written from the Airflow worker itself. Read
like every lake table: ``python -m spark_jobs sql "SELECT * FROM ops_audit"`` (both engines: it is a
view of that name, see :mod:`spark_jobs.driver.sql`), and ``python -m spark_jobs lake history``.

Columns:

==================  ==========================================================================
``audit_id``        a uuid4, also in the Delta commit of a Spark action (``userMetadata``)
``time``            when the action was asked for (UTC)
``triggered_by``    the Airflow user who triggered the run (``dag_run.triggering_user_name``)
``dag_id, run_id``  the Airflow run
``job, action``     what was asked
``parameters``      the checked form values as JSON (``from_time``, ``table``, ``table_version`` ...)
``reason``          the reason the person gave
``dry_run``         a dry run changes nothing
``outcome``         ``refused`` | ``dry_run`` | ``succeeded`` | ``failed`` | ``rejected`` | ``expired``
``message``         the refusal naming the field, the plan of a dry run, or what was done
``versions_before`` each table of the job -> its Delta version before the action
``versions_after``  ... and after it (the same for a refusal or a dry run)
``finished``        when the row was written (UTC)
``decision``        an action that needs a second user's approval: ``approved`` | ``rejected`` |
                    ``expired`` (nobody answered in time) | a refused answer: ``self_approval``
                    (the requester), ``not_an_approver``, ``service_identity`` (the API
                    connection's login), ``after_expiry``; null for the others and for rows
                    written before approvals. A refused answer on the health page is a row
                    of its own (same ``run_id``, outcome ``refused``); the request stays open
``decided_by``      who approved or rejected it (the Airflow user; null when it expired)
``decided_at``      when (UTC; the expiry for an expired request)
``expires_at``      when the request would expire (UTC)
==================  ==========================================================================

``triggered_by`` is the requester. Rows written before the approval columns existed read them as nulls: the
first append after the upgrade adds the columns to the table (delta-rs schema evolution, ``schema_mode="merge"``),
and :func:`read_rows` fills them for a table that has not been appended to since.

No pyspark here.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from spark_jobs.model.lake import Lake
from spark_jobs.model.object_store import delta_rs_options
from spark_jobs.registry import OPS_AUDIT

log = logging.getLogger("spark_jobs")

AUDIT_TABLE = OPS_AUDIT.name
OUTCOMES = ("refused", "dry_run", "succeeded", "failed", "rejected", "expired")
DECISIONS = ("approved", "rejected", "expired", "self_approval", "not_an_approver", "service_identity",
             "after_expiry")
# Columns added after the first release of the table (nullable; older rows read null).
APPROVAL_COLUMNS = ("decision", "decided_by", "decided_at", "expires_at")
# The same columns as Spark DDL: the Spark engine's empty view before the first row is written.


def arrow_schema():
    """The table's Arrow schema (delta-rs writes it; Spark and DuckDB read it)."""
    import pyarrow as pa

    versions = pa.map_(pa.string(), pa.int64())
    return pa.schema([
        ("audit_id", pa.string()), ("time", pa.timestamp("us", tz="UTC")), ("triggered_by", pa.string()),
        ("dag_id", pa.string()), ("run_id", pa.string()), ("job", pa.string()), ("action", pa.string()),
        ("parameters", pa.string()), ("reason", pa.string()), ("dry_run", pa.bool_()), ("outcome", pa.string()),
        ("message", pa.string()), ("versions_before", versions), ("versions_after", versions),
        ("finished", pa.timestamp("us", tz="UTC")),
        ("decision", pa.string()), ("decided_by", pa.string()), ("decided_at", pa.timestamp("us", tz="UTC")),
        ("expires_at", pa.timestamp("us", tz="UTC")),
    ])


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class AuditRecord:
    """One row of ``ops_audit``; :meth:`append` writes it.

    :param job: the job the action is about (as given, even when it is unknown).
    :param action: the action (as given).
    :param parameters: the form's values (checked where checking succeeded).
    :param reason: the reason given.
    :param dry_run: whether it was a dry run.
    :param triggered_by: who triggered it.
    :param dag_id: the Airflow DAG (empty from a command line).
    :param run_id: the Airflow run.
    :param decision: an action that needs approval: one of :data:`DECISIONS` (``None`` for the others).
    :param decided_by: who approved or rejected it.
    :param decided_at: when.
    :param expires_at: when the request would expire.
    """

    job: str
    action: str
    parameters: dict
    reason: str
    dry_run: bool
    triggered_by: str | None = None
    dag_id: str | None = None
    run_id: str | None = None
    audit_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    time: datetime = field(default_factory=utc_now)
    outcome: str | None = None
    message: str = ""
    versions_before: dict[str, int] = field(default_factory=dict)
    versions_after: dict[str, int] = field(default_factory=dict)
    decision: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    expires_at: datetime | None = None

    def to_row(self) -> dict:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is not one of {', '.join(OUTCOMES)}")
        if self.decision is not None and self.decision not in DECISIONS:
            raise ValueError(f"decision {self.decision!r} is not one of {', '.join(DECISIONS)}")
        return {"audit_id": self.audit_id, "time": self.time, "triggered_by": self.triggered_by,
                "dag_id": self.dag_id, "run_id": self.run_id, "job": self.job, "action": self.action,
                "parameters": json.dumps(self.parameters, sort_keys=True, default=str), "reason": self.reason,
                "dry_run": bool(self.dry_run), "outcome": self.outcome, "message": self.message,
                "versions_before": sorted(self.versions_before.items()),
                "versions_after": sorted(self.versions_after.items()), "finished": utc_now(),
                "decision": self.decision, "decided_by": self.decided_by, "decided_at": self.decided_at,
                "expires_at": self.expires_at}


def audit_path(lake: Lake) -> Path:
    return lake.table_path(AUDIT_TABLE)


def append(lake: Lake, record: AuditRecord) -> dict:
    """Append ``record`` to ``<lake>/tables/ops_audit`` (created by the first row) in one Delta commit.

    A commit that loses a race with another writer (two on-call runs at once, or two creating the
    table) is retried. A table written before the approval columns existed gets them (nulls in its old rows).

    :returns: the row as written.
    """
    import pyarrow as pa

    from spark_jobs.control.lake import delta_append

    row = record.to_row()
    table = pa.Table.from_pylist([row], schema=arrow_schema())
    path = audit_path(lake)
    delta_append.append(str(path), table, schema_mode="merge", storage_options=delta_rs_options(path),
                        configuration={"delta.enableDeletionVectors": "false"})
    return row


def read_rows(lake: Lake) -> list[dict]:
    """Every row of ``ops_audit``, oldest first (delta-rs; [] before the first row)."""
    from deltalake import DeltaTable

    path = audit_path(lake)
    if not (path / "_delta_log").is_dir():
        return []
    rows = DeltaTable(str(path), storage_options=delta_rs_options(path)).to_pyarrow_table().to_pylist()
    for row in rows:
        for key in ("versions_before", "versions_after"):
            row[key] = dict(row[key] or [])
        for key in APPROVAL_COLUMNS:  # a table not appended to since the columns were added
            row.setdefault(key, None)
    return sorted(rows, key=lambda row: (row["time"], row["finished"]))
