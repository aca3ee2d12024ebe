"""On-call requests: every bad field and every action that does not fit the job's state is refused by name
before anything runs; the plan of each action says what it would do; reset_checkpoint backs up under the lease.

No Spark: the lake's tables are written with delta-rs, the job's state is real lease, supervisor and
hold files.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from spark_jobs.control.checkpoint.lease import Lease, read_lease
from spark_jobs.model.lake import Lake
from spark_jobs.control.oncall.requests import AirflowView, OncallRefused, check_request, reset_checkpoint
from spark_jobs.registry import get_job
from spark_jobs.control.supervision.hold import place_hold
from spark_jobs.control.supervision.state import SupervisorState, write_supervisor_state

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)
JOB = get_job("cloudtrail_etl")
DAG = "cloudtrail_etl_continuous"
RUNNING = AirflowView(DAG, paused=False, running_run_id="scheduled__1", supervise_state="running")
PAUSED = AirflowView(DAG, paused=True)
UNREACHABLE = AirflowView(DAG, paused=None, error="cannot reach Airflow's REST API at http://127.0.0.1:9")
INPUT_FILES = ("AWSLogs/1/CloudTrail/us-east-1/2024/03/01/1_CloudTrail_us-east-1_20240301T0800Z_a.json.gz",
               "AWSLogs/1/CloudTrail/us-east-1/2024/03/02/1_CloudTrail_us-east-1_20240302T0900Z_b.json.gz",
               "AWSLogs/1/CloudTrail/us-east-1/2024/03/02/1_CloudTrail_us-east-1_20240302T1800Z_c.json.gz",
               "exports/undated.json")


@pytest.fixture()
def lake(tmp_path, monkeypatch) -> Lake:
    """A lake whose events table has versions 0..2 (delta-rs), and an input folder with three dated files."""
    lake = Lake(tmp_path / "lake")
    events = lake.table_path("cloudtrail_events")
    for version, ids in enumerate((["a"], ["b", "c"], ["d"])):
        write_deltalake(str(events), pa.table({"eventID": ids, "date": ["2024-03-01"] * len(ids)}),
                        mode="append", partition_by=["date"])
    landing = tmp_path / "landing"
    for name in INPUT_FILES:
        (landing / name).parent.mkdir(parents=True, exist_ok=True)
        (landing / name).write_text("{}")
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT", str(landing))
    return lake


def check(lake, action="stop", reason="the on-call's reason", dry_run=False, airflow=RUNNING, job="cloudtrail_etl",
          **fields):
    return check_request(job, action, reason, dry_run, lake=lake, airflow=airflow, now=NOW, **fields)


def refused(lake, **request) -> OncallRefused:
    with pytest.raises(OncallRefused) as caught:
        check(lake, **request)
    return caught.value


@pytest.mark.parametrize("request_, field, message", [
    (dict(job="no_such_job"), "job", "unknown job 'no_such_job'"),
    (dict(job=None), "job", "is required: choose the job to act on (one of cloudtrail_activity, "),
    (dict(action=None), "action", "is required: choose what to do (one of restart, stop, "),
    (dict(action="reboot"), "action", "'reboot' is not an action; one of: restart, stop, pause_supervision"),
    (dict(reason=None), "reason", "is required: say why"),
    (dict(reason="   "), "reason", "is required: say why"),
    (dict(reason="x" * 2001), "reason", "is 2001 characters; at most 2000"),
    (dict(dry_run="yes"), "dry_run", "'yes' is not true or false"),
    (dict(action="stop", from_time="2024-03-02T00:00:00Z"), "from_time", "is only for reprocess_from, not stop"),
    (dict(action="reprocess_from", table="cloudtrail_events"), "table", "is only for rollback_table"),
    (dict(action="reset_checkpoint", table_version=1), "table_version", "is only for rollback_table"),
    (dict(action="reprocess_from"), "from_time", "is required for reprocess_from"),
    (dict(action="reprocess_from", from_time="yesterday"), "from_time", "'yesterday' is not a time (ISO-8601"),
    (dict(action="reprocess_from", from_time="2024-03-02T00:00:00Z; rm -rf /"), "from_time", "is not a time"),
    (dict(action="reprocess_from", from_time="2026-11-24T00:00:00Z"), "from_time", "is in the future"),
    (dict(action="reprocess_from", from_time="2025-01-01T00:00:00Z"), "from_time",
     "was delivered at or after 2025-01-01T00:00:00Z: nothing to replay"),
    (dict(action="reprocess_from", from_time="2024-03-02T00:00:00Z", job="cloudtrail_activity"), "job",
     "cloudtrail_activity reads the Delta table cloudtrail_events into tables of update mode: use reset_checkpoint"),
    (dict(action="reprocess_from", from_time="2024-03-02T00:00:00Z", job="word_count"), "job",
     "word_count reads text files into tables of complete mode"),
    (dict(action="rollback_table"), "table", "is required for rollback_table: one of cloudtrail_events, "
                                             "cloudtrail_quarantine"),
    (dict(action="rollback_table", table="../cloudtrail_events"), "table", "is not a table of cloudtrail_etl"),
    (dict(action="rollback_table", table="cloudtrail_events"), "table_version", "is required for rollback_table"),
    (dict(action="rollback_table", table="cloudtrail_events", table_version="1; ls"), "table_version",
     "is not a version (a whole number >= 0)"),
    (dict(action="rollback_table", table="cloudtrail_events", table_version=7), "table_version",
     "no such version; table cloudtrail_events has versions 0..2"),
    (dict(action="rollback_table", table="cloudtrail_events", table_version=2), "table_version",
     "cloudtrail_events is already at version 2; nothing to restore"),
    (dict(action="rollback_table", table="cloudtrail_quarantine", table_version=0), "table_version",
     "table cloudtrail_quarantine has no Delta table"),
    (dict(action="set_warm_standby"), "warm_standby", "is required for set_warm_standby: on, off, or default"),
    (dict(action="set_warm_standby", warm_standby="maybe"), "warm_standby", "'maybe' is not on, off or default"),
    (dict(action="stop", warm_standby="on"), "warm_standby", "is only for set_warm_standby, not stop"),
    (dict(action="rollout"), "version", "is required for rollout: a release's name"),
    (dict(action="rollout", version="v9"), "version", "unknown version 'v9' (releases in "),
    (dict(action="stop", version="v2"), "version", "is only for rollout, rollout_destructive, not stop"),
    (dict(action="rollout_destructive"), "version", "is required for rollout_destructive: a release's name"),
    (dict(action="rollout_destructive", version="v9"), "version", "unknown version 'v9' (releases in "),
    (dict(action="rollout_destructive", version="v9", job="cloudtrail_kafka"), "version",
     "cloudtrail_kafka reads the Kafka topics cloudtrail-events (connection cloudtrail_kafka): a destructive rollout "
     "rebuilds the tables from the job's whole input on a new checkpoint, and a topic keeps only what its retention "
     "holds; roll out a version that fits the checkpoint (rollout) instead"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_each_bad_field_is_refused_by_name(lake, request_, field, message):
    error = refused(lake, **request_)
    assert error.field == field
    assert str(error).startswith(f"{field}: ")
    assert message in str(error)


def test_a_version_whose_files_are_gone_cannot_be_rolled_back_to(lake):
    events = lake.table_path("cloudtrail_events")
    os.remove(sorted((events / "date=2024-03-01").glob("*.parquet"), key=os.path.getmtime)[0])  # version 0's file
    error = refused(lake, action="rollback_table", table="cloudtrail_events", table_version=0)
    assert (error.field, str(error)) == ("table_version", "table_version: version 0 of cloudtrail_events references "
                                                          "1 files that are no longer on disk (vacuumed or deleted): it "
                                                          "cannot be restored; choose a later version")


def _hold_lease(lake: Lake, trigger: str = "processing-time:10s") -> Lease:
    """The job's lease, held as a driver of ``trigger`` (the continuous one's by default)."""
    return Lease.acquire(str(lake.control_path(JOB.name)), JOB.name, 30, details={"trigger": trigger})


def _supervisor(lake: Lake, state: str = "running") -> None:
    write_supervisor_state(str(lake.control_path(JOB.name)), SupervisorState(JOB.name, 1800, 5, state=state))


@pytest.mark.parametrize("action, setup, airflow, message", [
    ("restart", None, RUNNING, "no driver is running (no live lease)"),
    ("restart", "lease", PAUSED, "does not run under cloudtrail_etl_continuous, which is paused"),
    ("restart", "lease", replace(RUNNING, running_run_id=None, supervise_state=None),
     "has no running run whose `supervise` runs"),
    ("restart", "lease", UNREACHABLE, "Airflow cannot be asked about cloudtrail_etl_continuous: cannot reach"),
    ("restart", "catch-up lease", RUNNING, "the checkpoint is held by the catch-up run pid "),
    ("stop", None, PAUSED, "it is already stopped: cloudtrail_etl_continuous is paused and no driver holds the lease"),
    ("stop", "lease", PAUSED, "does not run under cloudtrail_etl_continuous, which is paused: stop it where"),
    ("pause_supervision", None, None, "no supervisor is running (supervisor.json: none); nothing to pause"),
    ("pause_supervision", "stale supervisor", None, "no supervisor is running (supervisor.json: running)"),
    ("pause_supervision", "hold", None, "supervision is already paused (by alice at"),
    ("resume_supervision", None, RUNNING, "supervision is not paused (no hold) and cloudtrail_etl_continuous is "
                                          "not paused"),
    ("reset_checkpoint", "lease", None, "a driver holds the checkpoint (pid "),
    ("reset_checkpoint", "catch-up lease", None, "s ago, ttl 30 s): the catch-up run); stop the job first"),
    ("reset_checkpoint", "supervisor", None, "its supervisor is running (it would start a driver)"),
    ("reset_checkpoint", None, None, "there is no checkpoint at "),
])
def test_an_action_that_does_not_fit_the_jobs_state_is_refused(lake, action, setup, airflow, message):
    lease = None
    if setup == "lease":
        lease = _hold_lease(lake)
    elif setup == "catch-up lease":
        lease = _hold_lease(lake, "available-now")
    elif setup in ("supervisor", "hold"):
        _supervisor(lake)
        if setup == "hold":
            place_hold(str(lake.control_path(JOB.name)), "alice", "looking at a thread dump")
    elif setup == "stale supervisor":
        _supervisor(lake)
        path = lake.control_path(JOB.name) / "supervisor.json"
        state = json.loads(path.read_text())
        path.write_text(json.dumps({**state, "updated_at": "2026-11-23T10:00:00+00:00"}))
    try:
        error = refused(lake, action=action, airflow=airflow)
    finally:
        if lease:
            lease.release()
    assert error.field == "action"
    assert str(error).startswith(f"action: {action} does not fit the state of cloudtrail_etl: ")
    assert message in str(error)


def test_each_action_that_fits_says_what_it_will_do(lake):
    control = lake.control_path(JOB.name)
    lease = _hold_lease(lake)
    try:
        restart = check(lake, action="restart").plan()
        stop = check(lake, action="stop").plan()
        _supervisor(lake)
        pause = check(lake, action="pause_supervision", airflow=None).plan()
    finally:
        lease.release()
    assert restart[0].startswith("clear the task `supervise` of run scheduled__1 of cloudtrail_etl_continuous: its "
                                 "driver (pid ")
    assert stop[0].startswith("pause cloudtrail_etl_continuous: its supervisor stops the driver (pid ")
    assert pause[0].startswith(f"write the hold {control}/supervision_hold.json: the supervisor (state running)")
    place_hold(str(control), "alice", "debugging")
    resume = check(lake, action="resume_supervision", airflow=PAUSED).plan()
    assert resume[0].startswith(f"remove the hold {control}/supervision_hold.json (placed by alice at ")
    assert resume[1] == "unpause cloudtrail_etl_continuous: a new run starts the driver from the same checkpoint"

    rollback = check(lake, action="rollback_table", table="cloudtrail_events", table_version=1)
    assert rollback.plan()[0].startswith(f"restore cloudtrail_events at {lake.table_path('cloudtrail_events')} from "
                                         "version 2 to the contents of version 1 (WRITE, committed ")
    assert rollback.spark_args("id") == ["lake", "restore", "--table", "cloudtrail_events", "--to-version", "1",
                                         "--yes"]
    assert rollback.parameters() == {"job": JOB.name, "action": "rollback_table", "dry_run": False,
                                     "table": "cloudtrail_events", "table_version": 1}

    replay = check(lake, action="reprocess_from", from_time="2024-03-02T00:00:00+00:00", dry_run=True)
    lines = replay.plan()
    landing = Path(os.environ["CLOUDTRAIL_ETL_INPUT"]).resolve()
    assert lines[0] == (f"replay 2 input files of {landing} delivered at or after 2024-03-02T00:00:00Z; not replayed: "
                        "every file delivered before it (their date folders are not listed) and 1 without a delivery "
                        "time")
    assert replay.spark_args("0c0ffee0-0000-4000-8000-000000000000") == [
        "reprocess", JOB.name, "--from-time", "2024-03-02T00:00:00Z", "--audit-id", "0c0ffee0-0000-4000-8000-000000000000"]
    # A naive time is UTC; an offset is converted.
    assert check(lake, action="reprocess_from", from_time="2024-03-02T01:00:00+01:00").from_time == \
        dt.datetime(2024, 3, 2, tzinfo=dt.timezone.utc)


def test_a_damaged_partition_is_named_in_the_reprocess_plan(lake):
    events = lake.table_path("cloudtrail_events")
    for part in (events / "date=2024-03-01").glob("*.parquet"):
        os.remove(part)
    lines = check(lake, action="reprocess_from", from_time="2024-03-01T00:00:00Z", dry_run=True).plan()
    assert any(line.startswith("damaged: cloudtrail_events partition date=2024-03-01: 3 files in the Delta log are "
                               "missing on disk") for line in lines), lines


def test_reset_checkpoint_moves_the_checkpoint_to_a_backup_under_the_lease(lake):
    checkpoint = lake.checkpoint_path(JOB.name)
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"q1"}')
    (checkpoint / "offsets" / "0").write_text("v1")
    stopped = Lease.acquire(str(lake.control_path(JOB.name)), JOB.name, 60)  # the driver that ran last, stopped
    stopped.release()
    request = check(lake, action="reset_checkpoint", airflow=None)
    backup = lake.control_path(JOB.name) / "backups" / "20261123T120000.000000Z-reset" / "checkpoint"
    take, move = request.plan()[:2]
    assert re.fullmatch(rf"take the job's lease \(no driver can start meanwhile; no driver holds it: the last one, pid "
                        rf"{os.getpid()} on host \S+, released it -?\d+ s ago\)", take), take
    assert move == (f"move the checkpoint {checkpoint} to {backup} (the backup; move it back to undo, while the job "
                    "is stopped)")  # the name it gets: the time it was asked for

    done = reset_checkpoint(request)

    assert Path(done["backup"]) == backup
    assert not checkpoint.exists()
    assert (backup / "metadata").read_text() == '{"id":"q1"}' and (backup / "offsets" / "0").read_text() == "v1"
    lease = read_lease(str(lake.control_path(JOB.name)))
    assert lease.released and lease.details == {"holder": "streaming_oncall reset_checkpoint"}
    error = refused(lake, action="reset_checkpoint", airflow=None)
    assert "there is no checkpoint at" in str(error)
    checkpoint.mkdir()
    with pytest.raises(OncallRefused, match="exists already: this request was carried out before"):
        reset_checkpoint(request)  # the same request twice moves nothing over its own backup


def test_set_warm_standby_is_kept_for_every_later_run_and_says_so(lake):
    from spark_jobs.control.supervision.job_settings import set_warm_standby, warm_standby

    control = str(lake.control_path(JOB.name))
    off = check(lake, action="set_warm_standby", warm_standby="off", airflow=None)
    assert off.parameters() == {"job": JOB.name, "action": "set_warm_standby", "dry_run": False, "warm_standby": "off"}
    assert off.plan()[0] == (f"keep the warm standby of {JOB.name} off from now on, in {control}/settings.json (now: "
                             "on (the registry's default)): every later run of cloudtrail_etl_continuous follows it, "
                             "after an unpause or resume_supervision too; a run's own warm_standby param still "
                             "overrides it for that run")
    set_warm_standby(control, off.warm_standby, by="alice", reason="memory is short tonight")
    assert warm_standby(JOB, control).describe().startswith("off (set by alice at ")
    back = check(lake, action="set_warm_standby", warm_standby="default", airflow=None)
    assert back.warm_standby is None and "the registry's default (on)" in back.plan()[0]
    set_warm_standby(control, back.warm_standby, by="bob")
    assert warm_standby(JOB, control).describe() == "on (the registry's default)"


def test_rollout_destructive_takes_only_a_version_its_preflight_refused_and_waits_for_four_eyes(lake, tmp_path,
                                                                                                 monkeypatch):
    from spark_jobs.control.oncall.approval import needs_approval
    from spark_jobs.control.rollout.preflight_state import write_preflight
    from spark_jobs.control.rollout.request import request_rollout
    from spark_jobs.launch.releases import RELEASES_ENV, add_release
    from tests.helpers.project import PROJECT_ROOT

    monkeypatch.setenv(RELEASES_ENV, str(tmp_path / "releases"))
    add_release("v3", package_dir=PROJECT_ROOT / "spark_jobs", root=tmp_path / "releases")
    control = lake.control_path(JOB.name)
    assert needs_approval("rollout_destructive") and not needs_approval("rollout")
    error = refused(lake, action="rollout_destructive", version="v3", airflow=None)
    assert str(error).startswith("version: no supervisor runs cloudtrail_etl now (state none)")
    _supervisor(lake)
    lease = _hold_lease(lake)
    try:
        error = refused(lake, action="rollout_destructive", version="v3", airflow=None)
        assert str(error) == ("version: version v3 has no pre-flight verdict for cloudtrail_etl: ask `python -m "
                              "spark_jobs rollout cloudtrail_etl v3` (or the on-call action rollout) first; its "
                              "pre-flight checks it against the live checkpoint and tables while the driver runs on, "
                              "and only a version it refuses needs a destructive rollout")
        write_preflight(str(control), "v3", "c0de", [], ["sources"], 1.0)
        error = refused(lake, action="rollout_destructive", version="v3", airflow=None)
        assert re.fullmatch(r"version: version v3 passed its pre-flight for cloudtrail_etl \(at \S+\): it runs on the "
                            r"job's checkpoint and tables, without a new checkpoint or a rebuild; use rollout",
                            str(error)), error
        found = {"code": "output_schema_changed", "explanation": "table cloudtrail_events does not take what this "
                 "version writes: column sourceIPAddress changes type from string to int", "action": "..."}
        write_preflight(str(control), "v3", "c0de", [found], ["outputs"], 1.0)
        (lake.checkpoint_path("cloudtrail_kafka") / "offsets").mkdir(parents=True)  # it shares cloudtrail_events
        error = refused(lake, action="rollout_destructive", version="v3", airflow=None)
        assert str(error).startswith("version: table cloudtrail_events of cloudtrail_etl is also written by "
                                     "cloudtrail_kafka (its checkpoint is in this lake): moving it aside would drop "
                                     "cloudtrail_kafka's rows")
        (lake.checkpoint_path("cloudtrail_kafka") / "offsets").rmdir()
        lake.checkpoint_path("cloudtrail_kafka").rmdir()

        asked = check(lake, action="rollout_destructive", version="v3", airflow=None)
        assert asked.parameters() == {"job": JOB.name, "action": "rollout_destructive", "dry_run": False,
                                      "version": "v3"}
        plan = asked.plan()
        assert plan[0].startswith("pre-flight refused v3 for cloudtrail_etl at ") and plan[0].endswith(
            ": table cloudtrail_events does not take what this version writes: column sourceIPAddress changes type "
            "from string to int")
        assert plan[1:] == [
            f"write the rollout request {control}/rollout.json (destructive): cloudtrail_etl from the checkout's code "
            "to v3; its supervisor carries it out",
            f"stop: the supervisor stops the job's standby, then the driver ({asked.state.driver()}) after its "
            "micro-batch",
            f"reset: holding the job's lease, move the checkpoint {lake.checkpoint_path(JOB.name)} and the tables "
            f"cloudtrail_events, cloudtrail_quarantine to {control}/backups/rollout-<the request's id>/ (checkpoint/, "
            "tables/<table>/), kept for the record",
            "start v3 on a new checkpoint (not a restart: none of the budget): it reads the whole input of "
            "cloudtrail_etl again and writes every table anew with its code and schema, each record once",
            "during the rebuild the tables hold only what the new version has written so far: readers see them fill "
            "up from empty until its backlog is 0 (python -m spark_jobs checkpoint inspect cloudtrail_etl); input no "
            "longer in the landing (deleted since) is only in the backup's tables",
            "no probation and no rollback by itself (the old checkpoint does not fit the new tables): the way back is "
            "a destructive rollout to the checkout's code, or the backup moved back while the job is stopped",
            "then reset_checkpoint of cloudtrail_activity, cloudtrail_alerts, cloudtrail_ocsf (each reads one of "
            "these tables as a stream; its checkpoint points into the tables moved aside)"]
        request_rollout(str(control), JOB.name, "v2", None, "alice", "parser fix")
        error = refused(lake, action="rollout_destructive", version="v3", airflow=None)
        assert str(error).startswith("version: a rollout of cloudtrail_etl to v2 is under way (phase requested, "
                                     "asked by alice)")
    finally:
        lease.release()


def test_rollout_is_checked_like_the_cli_and_says_what_will_happen(lake, tmp_path, monkeypatch):
    from spark_jobs.control.rollout.request import read_rollout, request_rollout
    from spark_jobs.launch.releases import RELEASES_ENV, add_release
    from tests.helpers.project import PROJECT_ROOT

    monkeypatch.setenv(RELEASES_ENV, str(tmp_path / "releases"))
    add_release("v2", package_dir=PROJECT_ROOT / "spark_jobs", root=tmp_path / "releases")
    control = str(lake.control_path(JOB.name))

    error = refused(lake, action="rollout", version="v2", airflow=None)
    assert str(error).startswith("version: no supervisor runs cloudtrail_etl now (state none): a rollout needs the "
                                 "running job; start it")
    _supervisor(lake)
    lease = _hold_lease(lake)
    try:
        asked = check(lake, action="rollout", version="v2", airflow=None)
        assert asked.parameters() == {"job": JOB.name, "action": "rollout", "dry_run": False, "version": "v2"}
        assert asked.plan()[0] == f"write the rollout request {control}/rollout.json: cloudtrail_etl from the " \
                                  "checkout's code to v2"
        assert asked.plan()[3] == ("probation: 3 batches and 300 s; a crash or a stall rolls it back to the "
                                   "checkout's code by itself")
        request_rollout(control, JOB.name, "v2", None, "alice", "parser fix")
        error = refused(lake, action="rollout", version="v2", airflow=None)
        assert str(error).startswith("version: a rollout of cloudtrail_etl to v2 is under way (phase requested, "
                                     "asked by alice)")
        assert read_rollout(control)["phase"] == "requested"
    finally:
        lease.release()
