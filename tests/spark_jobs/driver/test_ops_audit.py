"""ops_audit: rows appended with delta-rs (no JVM) read the same through both sql engines, empty before any."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone

import pytest

from spark_jobs.model.lake import Lake
from spark_jobs.control.oncall.audit import AuditRecord, append, read_rows
from spark_jobs.driver.sql import print_result, register_tables, run_duckdb

QUERY = ("SELECT action, outcome, triggered_by, dry_run, parameters, versions_before, versions_after, time "
         "FROM ops_audit ORDER BY time")


def record(action: str, outcome: str, minute: int, **extra) -> AuditRecord:
    return AuditRecord(job="cloudtrail_etl", action=action, parameters={"job": "cloudtrail_etl", "action": action},
                       reason="disk full on the driver host", dry_run=outcome == "dry_run", triggered_by="alice",
                       dag_id="streaming_oncall", run_id=f"manual__{minute}", outcome=outcome,
                       time=datetime(2026, 11, 23, 9, minute, 30, 250000, tzinfo=timezone.utc), **extra)


def spark_json(spark, lake: Lake, query: str) -> str:
    register_tables(spark, lake)
    out = io.StringIO()
    print_result(spark.sql(query), "json", 1000, out)
    return out.getvalue()


def duckdb_json(lake: Lake, query: str) -> str:
    out = io.StringIO()
    run_duckdb(query, lake, {}, "json", 1000, out=out)
    return out.getvalue()


@pytest.fixture()
def audited(tmp_path) -> Lake:
    lake = Lake(tmp_path / "lake")
    append(lake, record("stop", "refused", 1, message="action: stop does not fit the state of cloudtrail_etl: ..."))
    append(lake, record("rollback_table", "dry_run", 2, versions_before={"cloudtrail_events": 4},
                        versions_after={"cloudtrail_events": 4}))
    append(lake, record("rollback_table", "succeeded", 3, versions_before={"cloudtrail_events": 4,
                                                                           "cloudtrail_quarantine": 2},
                        versions_after={"cloudtrail_events": 5, "cloudtrail_quarantine": 2}))
    return lake


def test_rows_are_one_delta_commit_each_and_read_back_exactly(audited):
    from deltalake import DeltaTable

    assert DeltaTable(str(audited.table_path("ops_audit"))).version() == 2
    rows = read_rows(audited)
    assert [(r["action"], r["outcome"], r["dry_run"]) for r in rows] == [
        ("stop", "refused", False), ("rollback_table", "dry_run", True), ("rollback_table", "succeeded", False)]
    assert rows[2]["versions_before"] == {"cloudtrail_events": 4, "cloudtrail_quarantine": 2}
    assert rows[2]["versions_after"] == {"cloudtrail_events": 5, "cloudtrail_quarantine": 2}
    assert rows[0]["message"].startswith("action: stop does not fit")
    assert json.loads(rows[1]["parameters"]) == {"job": "cloudtrail_etl", "action": "rollback_table"}


def test_both_sql_engines_read_the_same_rows(spark, audited):
    from_spark, from_duckdb = spark_json(spark, audited, QUERY), duckdb_json(audited, QUERY)
    assert from_spark == from_duckdb
    last = json.loads(from_spark.splitlines()[-1])
    assert last == {"action": "rollback_table", "outcome": "succeeded", "triggered_by": "alice", "dry_run": False,
                    "parameters": '{"action": "rollback_table", "job": "cloudtrail_etl"}',
                    "versions_before": {"cloudtrail_events": 4, "cloudtrail_quarantine": 2},
                    "versions_after": {"cloudtrail_events": 5, "cloudtrail_quarantine": 2},
                    "time": "2026-11-23T09:03:30.250Z"}


def test_before_any_action_the_table_is_an_empty_view_in_both_engines(spark, tmp_path):
    lake = Lake(tmp_path / "empty")
    assert spark_json(spark, lake, "SELECT count(*) AS n FROM ops_audit") == '{"n":0}\n'
    assert duckdb_json(lake, "SELECT count(*) AS n FROM ops_audit") == '{"n":0}\n'
    assert read_rows(lake) == []


def test_an_unknown_outcome_is_not_written(tmp_path):
    with pytest.raises(ValueError, match="outcome 'maybe' is not one of refused, dry_run, succeeded, failed"):
        append(Lake(tmp_path), record("stop", "maybe", 1))
