"""The Prometheus metrics of every job's health, on planted states (:mod:`tests.helpers.plant`): each value equals
the number ``check_job`` (the health page's source) and ``python -m spark_jobs status --json`` give for the same
lake; enums have one series per value with exactly the current one at 1; the drivers' ``file_sd`` file follows the
lease. Nothing runs Spark here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from prometheus_client.parser import text_string_to_metric_families

from spark_jobs.control.monitoring.health import check_job
from spark_jobs.control.monitoring.metrics import SUPERVISOR_STATES, exposition
from spark_jobs.control.monitoring.progress import SCHEMA, progress_table_path
from spark_jobs.registry import JOBS
from tests.helpers.plant import JOB, PlantedLake
from tests.helpers.project import PROJECT_ROOT, run_cli
from tools.ports import free_port

ETL = (("job", JOB.name),)


@pytest.fixture
def planted(tmp_path, monkeypatch) -> PlantedLake:
    lake = PlantedLake(tmp_path)
    monkeypatch.setenv(JOB.input_env_var, str(lake.landing))
    return lake


def samples(text: str) -> dict[tuple, float]:
    """``(sample name, sorted labels) -> value`` of one scrape."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(planted: PlantedLake) -> dict[tuple, float]:
    return samples(exposition(str(planted.lake)).decode())


def of(found: dict, name: str, **labels) -> dict[tuple, float]:
    """The series of ``name`` whose labels include ``labels``, by their other labels."""
    return {tuple(kv for kv in key if kv[0] not in labels): value for (metric, key), value in found.items()
            if metric == name and all((k, v) in key for k, v in labels.items())}


def status_json(planted: PlantedLake) -> dict:
    done = run_cli("status", "--lake", str(planted.lake), "--json", env={JOB.input_env_var: str(planted.landing)})
    assert done.returncode == 0, done.stderr
    return {job["job"]: job for job in json.loads(done.stdout)["jobs"]}[JOB.name]


def test_a_stalled_jobs_metrics_equal_its_health_and_status_numbers(planted):
    planted.stalled()
    planted.progress([(1.0, 5.0)] * 2, rows={"cloudtrail_events": 90, "cloudtrail_quarantine": 10})

    found, health, status = scrape(planted), check_job(JOB, planted.lake), status_json(planted)
    assert found[("streaming_backlog_files", ETL)] == health.backlog_files == status["backlog_files"] == 6
    assert found[("streaming_last_commit_batch", ETL)] == health.latest_commit_batch == status[
        "latest_commit_batch"] == 2
    assert found[("streaming_last_commit_age_seconds", ETL)] == pytest.approx(health.last_commit_age_seconds, abs=2)
    assert health.last_commit_age_seconds == pytest.approx(1200, abs=30)
    # Spark's file source (this planted checkpoint's) knows no landing times: no series, as the page shows none
    assert (health.backlog_age_seconds, health.freshness_seconds, status["freshness_seconds"]) == (None, None, None)
    assert {"streaming_backlog_oldest_age_seconds", "streaming_freshness_seconds"} & {n for n, _ in found} == set()
    assert found[("streaming_quarantine_ratio", ETL)] == health.quarantine_share == status["quarantine_share"] == 0.1
    assert of(found, "streaming_last_batch_rows", job=JOB.name) == {
        (("quarantine", "false"), ("table", "cloudtrail_events")): 90.0,
        (("quarantine", "true"), ("table", "cloudtrail_quarantine")): 10.0}
    assert found[("streaming_restarts_total", ETL)] == status["restarts"]["all_time"] == 1
    assert found[("streaming_restarts_in_window", ETL)] == status["restarts"]["in_window"] == 1
    assert found[("streaming_restart_budget", ETL)] == status["max_restarts"] == 5
    assert found[("streaming_restart_window_seconds", ETL)] == 1800.0
    assert found[("streaming_supervisor_consecutive_failures", ETL)] == 0.0
    assert {k: v for k, v in of(found, "streaming_job_state", job=JOB.name).items() if v} == {
        (("state", health.state),): 1.0} == {(("state", "stalled"),): 1.0}
    assert {k: v for k, v in of(found, "streaming_condition", job=JOB.name).items() if v} == {
        (("condition", c["code"]),): 1.0 for c in status["conditions"]} == {
        (("condition", "stalled"),): 1.0, (("condition", "quarantine_high"),): 1.0}
    assert of(found, "streaming_lease_holder", job=JOB.name)[(("kind", "continuous"),)] == 1.0
    assert found[("streaming_standby_ready", ETL)] == 0.0
    assert of(found, "streaming_incident_open", job=JOB.name) == {
        (("condition", code),): 0.0 for code in ("stalled", "falling_behind", "backlog_high", "quarantine_high",
                                                 "restarts_over_budget", "take_over_failed")}
    assert found[("streaming_quarantine_ratio_threshold", ETL)] == JOB.alerts.max_quarantine_rate
    # the planted landing files are empty: 6 wait, of 0 bytes
    assert found[("streaming_backlog_bytes", ETL)] == health.backlog_bytes == status["backlog_bytes"] == 0
    assert of(found, "streaming_quarantined_records", job=JOB.name) == {
        (("reason", "invalid_json"), ("table", "cloudtrail_quarantine")): 3.0,
        (("reason", "bad_event_time"), ("table", "cloudtrail_quarantine")): 1.0}
    assert health.quarantine_reasons == status["quarantine_reasons"] == {
        "cloudtrail_quarantine": {"invalid_json": 3, "bad_event_time": 1}}
    assert found[("streaming_exporter_scrape_duration_seconds", ())] > 0


def test_a_discovering_streams_backlog_age_and_freshness_equal_its_health(planted):
    """Batch 0 read two files that landed 100 and 90 s ago and committed 30 s ago (freshness 70 s); three files that
    landed 300, 290 and 280 s ago wait (the oldest has waited 300 s)."""
    planted.discovering(committed_ago=30, read_landed_ago=100, waiting=3, waiting_landed_ago=300)

    health = check_job(JOB, planted.lake)
    found = scrape(planted)
    assert (health.backlog_files, health.freshness_seconds) == (3, 70.0)
    assert found[("streaming_backlog_files", ETL)] == 3.0
    assert found[("streaming_backlog_bytes", ETL)] == health.backlog_bytes == 6  # three files of 2 bytes
    assert found[("streaming_freshness_seconds", ETL)] == 70.0
    assert health.backlog_age_seconds == pytest.approx(300, abs=3)
    assert found[("streaming_backlog_oldest_age_seconds", ETL)] == pytest.approx(health.backlog_age_seconds, abs=3)


def test_the_quarantined_records_by_reason_follow_each_new_commit_of_the_quarantine_table(planted):
    planted.commit_batches(1, files_per_batch=1, committed_ago=5)
    assert of(scrape(planted), "streaming_quarantined_records", job=JOB.name) == {}  # no quarantine table yet
    planted.quarantined({"invalid_json": 2})
    assert of(scrape(planted), "streaming_quarantined_records", job=JOB.name) == {
        (("reason", "invalid_json"), ("table", "cloudtrail_quarantine")): 2.0}
    planted.quarantined({"missing_event_id": 1, "invalid_json": 1})  # a new version: counted again
    assert of(scrape(planted), "streaming_quarantined_records", job=JOB.name) == {
        (("reason", "invalid_json"), ("table", "cloudtrail_quarantine")): 3.0,
        (("reason", "missing_event_id"), ("table", "cloudtrail_quarantine")): 1.0}
    assert check_job(JOB, planted.lake).quarantine_reasons == {
        "cloudtrail_quarantine": {"invalid_json": 3, "missing_event_id": 1}}


def test_every_job_of_the_registry_has_its_state_and_one_that_never_ran_no_backlog(planted):
    found = scrape(planted)
    for job in JOBS:
        states = of(found, "streaming_job_state", job=job)
        assert len(states) == 7 and sum(states.values()) == 1.0, job
        assert states[(("state", "not_started"),)] == 1.0
        assert ("streaming_backlog_files", (("job", job),)) not in found  # a job that never ran owns no backlog
        assert of(found, "streaming_lease_holder", job=job)[(("kind", "none"),)] == 1.0
    continuous = {job for job, spec in JOBS.items() if spec.continuous_trigger}
    assert {dict(key)["job"] for (name, key) in found if name == "streaming_supervisor_state"} == continuous


def test_restarts_count_the_event_log_over_supervisors_and_the_enums_follow_the_supervisor(planted):
    planted.commit_batches(2, files_per_batch=1, committed_ago=5)
    planted.hold_lease(started_ago=30, trigger="available-now")  # a catch-up run holds the checkpoint
    planted.event("restart", reason="the driver was killed by SIGKILL", ago=3 * 3600)  # outside the 30-min window
    planted.event("restart", reason="the driver stalled", ago=600, take_over=True)
    planted.event("restart", reason="the driver exited with status 1", ago=120)
    planted.supervisor(state="backing_off", is_backing_off=True, consecutive_failures=2, restarts_in_window=1,
                       standby="warming", standby_pid=None)

    found, status = scrape(planted), status_json(planted)
    assert status["restarts"] | {"last_at": None, "last_reason": None} == {
        "this_run": 0, "in_window": 2, "all_time": 3, "take_overs": 1, "window_seconds": 1800.0, "last_at": None,
        "last_reason": None}
    assert found[("streaming_restarts_total", ETL)] == 3.0
    assert found[("streaming_standby_take_overs_total", ETL)] == 1.0
    assert found[("streaming_restarts_in_window", ETL)] == 2.0
    assert found[("streaming_supervisor_consecutive_failures", ETL)] == 2.0
    assert of(found, "streaming_supervisor_state", job=JOB.name) == {
        (("state", state),): float(state == "backing_off") for state in SUPERVISOR_STATES}
    assert of(found, "streaming_lease_holder", job=JOB.name) == {
        (("kind", kind),): float(kind == "catch-up") for kind in ("continuous", "catch-up", "on-call", "driver", "none")}
    assert status["standby"]["state"] == "warming"
    assert of(found, "streaming_standby_state", job=JOB.name) == {
        (("state", state),): float(state == "warming") for state in ("off", "absent", "warming", "warm")}
    assert found[("streaming_standby_ready", ETL)] == 0.0

    planted.supervisor(standby="warm", standby_pid=4711)
    assert scrape(planted)[("streaming_standby_ready", ETL)] == 1.0


def test_an_open_incident_is_a_series_of_its_condition(planted):
    from spark_jobs.control.monitoring.incidents import IncidentStore

    planted.stalled()
    IncidentStore(planted.control).update(JOB.name, check_job(JOB, planted.lake).conditions)
    found = scrape(planted)
    assert {k: v for k, v in of(found, "streaming_incident_open", job=JOB.name).items() if v} == {
        (("condition", "stalled"),): 1.0}


def test_the_event_time_lag_is_the_last_batchs_trigger_time_minus_its_newest_event(planted):
    planted.healthy()
    [last] = planted.progress([(0.4, 3.0)], first_batch=4)
    late = {**last, "batch_id": 5, "timestamp": last["timestamp"] + timedelta(seconds=10),
            "event_time_max": last["timestamp"] + timedelta(seconds=10) - timedelta(seconds=42.5)}
    write_deltalake(str(progress_table_path(planted.lake)), pa.Table.from_pylist([late], schema=SCHEMA),
                    mode="append", partition_by=["date"])

    health = check_job(JOB, planted.lake)
    assert health.event_time_lag_seconds == 42.5
    assert scrape(planted)[("streaming_event_time_lag_seconds", ETL)] == 42.5
    assert status_json(planted)["event_time_lag_seconds"] == 42.5


def test_the_drivers_targets_file_follows_the_lease(planted):
    targets = planted.lake / "control" / "prometheus_targets.json"
    planted.healthy()  # a continuous driver whose lease names its UI, http://127.0.0.1:4040
    scrape(planted)
    assert json.loads(targets.read_text()) == [{"targets": ["127.0.0.1:4040"], "labels": {
        "streaming_job": JOB.name, "holder_kind": "continuous", "__metrics_path__": "/metrics/prometheus/"}}]
    written = targets.stat().st_mtime_ns
    time.sleep(0.01)
    scrape(planted)
    assert targets.stat().st_mtime_ns == written  # unchanged: not rewritten

    planted.release_lease()  # the driver ended
    scrape(planted)
    assert json.loads(targets.read_text()) == []
    assert [p.name for p in targets.parent.iterdir() if p.name.startswith(".prometheus_targets")] == []


def test_the_cli_prints_a_scrape_and_serves_one_over_http(planted):
    planted.stalled()
    env = {JOB.input_env_var: str(planted.landing)}
    printed = run_cli("metrics", "--lake", str(planted.lake), env=env)
    assert printed.returncode == 0, printed.stderr
    assert samples(printed.stdout)[("streaming_backlog_files", ETL)] == 6.0

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "spark_jobs", "metrics", "--lake", str(planted.lake),
                               "--serve", str(port)], cwd=PROJECT_ROOT, env={**__import__("os").environ, **env},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        assert line.strip() == f"serving the streaming metrics of {planted.lake} at http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            served = samples(response.read().decode())
        assert served[("streaming_backlog_files", ETL)] == 6.0
        assert served[("streaming_restarts_total", ETL)] == 1.0
    finally:
        server.terminate()
        server.wait(timeout=30)

    refused = run_cli("metrics", "--lake", str(planted.lake), "--serve", "0")
    assert refused.returncode == 2 and "--serve 0: a port is 1-65535" in refused.stderr
