"""A job's timeline from the records that exist: the supervisor's events, its incidents and ops_audit, in time order,
and as the health page renders it (no Airflow, no JVM)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from spark_jobs.control.monitoring.conditions import Condition
from spark_jobs.control.monitoring.incidents import IncidentStore
from spark_jobs.control.ops_audit import AuditRecord, append
from spark_jobs.control.supervision.state import append_event
from spark_jobs.control.timeline import job_timeline
from spark_jobs.model.lake import Lake
from spark_jobs.registry import JOBS

JOB = JOBS["cloudtrail_etl"]
T0 = datetime(2026, 11, 25, 2, 0, tzinfo=timezone.utc)


def iso(moment: datetime) -> str:
    return moment.isoformat()


def plant(lake: Lake) -> None:
    control = str(lake.control_path(JOB.name))
    append(lake, AuditRecord(job=JOB.name, action="rollback_table", parameters={}, reason="bad deploy", dry_run=False,
                             triggered_by="alice", outcome="succeeded", time=T0 + timedelta(minutes=30),
                             decision="approved", decided_by="bob", decided_at=T0 + timedelta(minutes=31)))
    append(lake, AuditRecord(job="word_count", action="stop", parameters={}, reason="other job", dry_run=False,
                             triggered_by="carol", outcome="succeeded", time=T0 + timedelta(minutes=5)))
    append_event(control, {"time": iso(T0 + timedelta(minutes=10)), "job": JOB.name, "kind": "restart",
                           "reason": "driver exited with code 137", "outcome": "restarting in 1 s",
                           "restarts_in_window": 1, "max_restarts": 5})
    store = IncidentStore(lake.control_path(JOB.name))
    store.update(JOB.name, [Condition("stalled", "error", "no commit for 20 min while 12 files wait", "restart it")],
                 now=T0 + timedelta(minutes=20))
    append_event(control, {"time": iso(T0), "job": JOB.name, "kind": "start", "reason": "supervision started",
                           "outcome": "driver started"})


def test_the_timeline_merges_the_records_in_time_order(tmp_path):
    lake = Lake(tmp_path / "lake")
    plant(lake)
    entries = job_timeline(JOB, lake)
    assert [(e.at - T0, e.kind) for e in entries] == [
        (timedelta(0), "start"), (timedelta(minutes=10), "restart"), (timedelta(minutes=20), "incident"),
        (timedelta(minutes=30), "oncall")]
    restart, incident, action = entries[1:]
    assert restart.summary == "restart: driver exited with code 137 (1/5 restarts in the window)"
    assert incident.summary == "incident stalled opened: no commit for 20 min while 12 files wait"
    assert (action.requested_by, action.decided_by, action.outcome) == ("alice", "bob", "succeeded")
    assert action.summary == "on-call rollback_table: succeeded; asked by alice, approved by bob; reason: bad deploy"
    assert job_timeline(JOB, lake, limit=2) == entries[-2:]


def test_a_resolved_incident_has_two_entries_and_an_empty_lake_none(tmp_path):
    lake = Lake(tmp_path / "lake")
    assert job_timeline(JOB, lake) == []
    store = IncidentStore(lake.control_path(JOB.name))
    store.update(JOB.name, [Condition("stalled", "error", "stalled", "restart it")], now=T0)
    for minute in (1, 2, 3):
        store.update(JOB.name, [], now=T0 + timedelta(minutes=minute))
    kinds = [(e.kind, e.summary) for e in job_timeline(JOB, lake)]
    assert kinds[0] == ("incident", "incident stalled opened: stalled") and kinds[-1] == (
        "resolved", "incident stalled resolved")


def test_the_health_page_lists_it_per_job(tmp_path):
    import sys

    from tests.conftest import PROJECT_ROOT

    sys.path.insert(0, str(PROJECT_ROOT / "plugins"))
    from streaming.health_page import _timeline

    lake = Lake(tmp_path / "lake")
    plant(lake)
    html = _timeline(job_timeline(JOB, lake))
    assert html.index('data-kind="start"') < html.index('data-kind="restart"') < html.index('data-kind="incident"') \
        < html.index('data-kind="oncall"')
    assert 'data-requested-by="alice" data-decided-by="bob" data-outcome="succeeded"' in html
    assert "nothing recorded yet" in _timeline([])
