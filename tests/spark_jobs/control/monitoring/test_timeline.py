"""A job's timeline from the records that exist: its catch-up and backfill runs, the supervisor's events, its incidents
and ops_audit, in time order, and as the health page renders it (no Airflow, no JVM)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from spark_jobs.control.monitoring.conditions import Condition
from spark_jobs.control.monitoring.incidents import IncidentStore
from spark_jobs.control.monitoring.runs import RunRecord, loaded_since, read_runs, record_run
from spark_jobs.control.oncall.audit import AuditRecord, append
from spark_jobs.control.supervision.state import append_event
from spark_jobs.control.monitoring.timeline import job_timeline
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
    record_run(control, RunRecord(job=JOB.name, kind="catch-up", dag_id="cloudtrail_etl_catchup", run_id="scheduled__1",
                                  try_number=1, outcome="succeeded", files=16, batches=6,
                                  started_at=iso(T0 + timedelta(minutes=4, seconds=30)),
                                  rows={"cloudtrail_events": 1255, "cloudtrail_quarantine": 7}))
    record_run(control, RunRecord(job=JOB.name, kind="catch-up", dag_id="cloudtrail_etl_catchup", run_id="manual__2",
                                  try_number=1, outcome="failed",
                                  reason="refused: input: the input folder /no/such does not exist"))


def times(lake: Lake) -> None:
    """The two runs' lines, dated 5 and 15 minutes after T0 (the file is the record; its times are what it says)."""
    import json

    path = lake.control_path(JOB.name) / "runs.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line, minutes in zip(lines, (5, 15)):
        line["time"] = iso(T0 + timedelta(minutes=minutes))
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_timeline_merges_the_records_in_time_order(tmp_path):
    lake = Lake(tmp_path / "lake")
    plant(lake)
    times(lake)
    entries = job_timeline(JOB, lake)
    assert [(e.at - T0, e.kind, e.outcome) for e in entries] == [
        (timedelta(0), "start", "driver started"), (timedelta(minutes=5), "catch-up", "succeeded"),
        (timedelta(minutes=10), "restart", "restarting in 1 s"), (timedelta(minutes=15), "catch-up", "failed"),
        (timedelta(minutes=20), "incident", "error"), (timedelta(minutes=30), "oncall", "succeeded")]
    loaded, failed = entries[1], entries[3]
    assert loaded.summary == ("catch-up run scheduled__1 (30 s): 1,255 rows into cloudtrail_events, 7 rows into "
                              "cloudtrail_quarantine from 16 files in 6 micro-batches")
    assert (loaded.rows, loaded.files) == (1262, 16)
    assert failed.summary == ("catch-up run manual__2 failed: refused: input: the input folder /no/such does not "
                              "exist")
    restart, incident, action = entries[2], entries[4], entries[5]
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

    from tests.helpers.project import PROJECT_ROOT

    sys.path.insert(0, str(PROJECT_ROOT / "plugins"))
    from streaming.health_page import _timeline

    lake = Lake(tmp_path / "lake")
    plant(lake)
    times(lake)
    html = _timeline(job_timeline(JOB, lake))
    assert html.index('data-kind="start"') < html.index('data-kind="catch-up"') < html.index('data-kind="restart"') \
        < html.index('data-kind="incident"') < html.index('data-kind="oncall"')
    assert 'data-outcome="succeeded" data-rows="1262" data-files="16"' in html
    assert '<span class="tl-kind">catch-up failed</span>catch-up run manual__2 failed: refused: input:' in html
    assert 'data-requested-by="alice" data-decided-by="bob" data-outcome="succeeded"' in html
    assert "nothing recorded yet" in _timeline([])


def test_a_runs_rows_and_files_are_its_streams_batches_since_it_started(tmp_path):
    from tests.helpers.plant import PlantedLake

    planted = PlantedLake(tmp_path)
    rows = planted.progress([(1.0, 2.0)] * 3, rows={"cloudtrail_events": 10, "cloudtrail_quarantine": 1},
                            seconds_apart=60)  # batches 3, 2 and 1 minutes ago
    later = planted.progress([(1.0, 2.0)] * 2, first_batch=3, rows={"cloudtrail_events": 5, "cloudtrail_quarantine": 0},
                             seconds_apart=1)
    assert loaded_since(str(planted.lake), JOB.name, later[0]["timestamp"]) == {
        "files": 8, "rows": {"cloudtrail_events": 10, "cloudtrail_quarantine": 0}, "batches": 2}
    assert loaded_since(str(planted.lake), JOB.name, rows[0]["timestamp"])["batches"] == 5
    assert loaded_since(str(planted.lake), f"{JOB.name}@backfill-x", rows[0]["timestamp"]) == {
        "files": 0, "rows": {}, "batches": 0}
    control = str(planted.control)
    assert read_runs(control) == []
    with pytest.raises(ValueError, match="unknown run outcome 'maybe'"):
        RunRecord(job=JOB.name, kind="catch-up", dag_id="d", run_id="r", try_number=1, outcome="maybe")


def test_a_refused_backfill_is_a_refusal_that_says_who_asked_not_a_failure(tmp_path):
    import sys

    from tests.helpers.project import PROJECT_ROOT

    sys.path.insert(0, str(PROJECT_ROOT / "plugins"))
    from streaming.health_page import _timeline

    lake = Lake(tmp_path / "lake")
    reason = "date_to: 2024-03-01 is before date_from 2024-03-05: the range runs backwards"
    record_run(str(lake.control_path(JOB.name)), RunRecord(
        job=JOB.name, kind="backfill", dag_id="cloudtrail_etl_backfill", run_id="manual__3", try_number=1,
        outcome="refused", reason=reason, requested_by="alice"))
    [entry] = job_timeline(JOB, lake)
    assert (entry.kind, entry.outcome, entry.requested_by) == ("backfill", "refused", "alice")
    assert entry.summary == f"backfill refused: {reason} (run manual__3); asked by alice"
    assert f'<span class="tl-kind">backfill refused</span>backfill refused: {reason}' in _timeline([entry])


def test_a_supervisor_stop_start_or_hold_says_who_asked(tmp_path):
    lake = Lake(tmp_path / "lake")
    control = str(lake.control_path(JOB.name))
    append(lake, AuditRecord(job=JOB.name, action="stop", parameters={}, reason="maintenance", dry_run=False,
                             triggered_by="alice", outcome="succeeded", time=T0))
    append(lake, AuditRecord(job=JOB.name, action="restart", parameters={}, reason="try", dry_run=True,
                             triggered_by="bob", outcome="dry_run", time=T0 + timedelta(minutes=30)))
    for minutes, kind, extra in [(1, "stop", {}), (20, "held", {"hold": {"by": "carol", "reason": "debugging"}}),
                                 (31, "stop", {}), (32, "start", {})]:
        append_event(control, {"time": iso(T0 + timedelta(minutes=minutes)), "job": JOB.name, "kind": kind,
                               "reason": "asked to stop" if kind == "stop" else kind, "outcome": "", **extra})
    entries = [e for e in job_timeline(JOB, lake) if e.kind != "oncall"]
    assert [(e.kind, e.requested_by) for e in entries] == [("stop", "alice"), ("held", "carol"), ("stop", None),
                                                           ("start", None)]
    assert entries[0].summary == "stop: asked to stop; asked by alice (on-call stop)"
    assert entries[1].summary == "held: held; asked by carol"
    # bob's restart was a dry run: the stop after it came from Airflow itself
    assert entries[2].summary == ("stop: asked to stop; asked from Airflow, not through on-call: a pause of "
                                  "cloudtrail_etl_continuous or a stop of its task (Browse > Audit Log names the user)")
    assert entries[3].summary == "start: start"


def test_a_rollout_and_its_rollback_are_on_the_timeline_with_who_asked(tmp_path):
    lake = Lake(tmp_path / "lake")
    control = str(lake.control_path(JOB.name))
    for minutes, kind, reason, outcome, extra in [
            (1, "rollout", "rollout of cloudtrail_etl from v2 to v4 asked by alice: deploy v4", "pre-flight: ...",
             {"asked_by": "alice", "version": "v4"}),
            (2, "handover", "handover to version v4: the driver (pid 7) stopped after its micro-batch in 2.4 s",
             "version v4's standby (pid 9) holds the lease ...", {}),
            (3, "rollback", "the driver exited with status 1: error: job cloudtrail_etl failed: RuntimeError: v4",
             "rolled back to v2: version v2 starts again from the same checkpoint (not a restart: none of the budget)",
             {})]:
        append_event(control, {"time": iso(T0 + timedelta(minutes=minutes)), "job": JOB.name, "kind": kind,
                               "reason": reason, "outcome": outcome, **extra})

    entries = job_timeline(JOB, lake)

    assert [(e.kind, e.requested_by) for e in entries] == [("rollout", "alice"), ("handover", None),
                                                           ("rollback", None)]
    assert entries[0].summary == ("rollout: rollout of cloudtrail_etl from v2 to v4 asked by alice: deploy v4; asked "
                                  "by alice")
    assert entries[2].summary == ("rollback: the driver exited with status 1: error: job cloudtrail_etl failed: "
                                  "RuntimeError: v4")
    assert entries[2].outcome.startswith("rolled back to v2")
