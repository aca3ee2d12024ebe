"""A real Prometheus scrapes ``python -m spark_jobs metrics --serve`` over a planted lake and evaluates the shipped
alert rules: what its HTTP API (``/api/v1/query``) returns is what the health says.

Debian's ``prometheus`` binary (``.ci/run`` installs it) runs on 127.0.0.1 with a generated configuration: the
exporter as one scrape job (``honor_labels``, as docs/monitoring.md says), the drivers' ``file_sd`` file the exporter
writes as another, and ``docs/prometheus/alerts.yml`` with the stall alert's ``for`` cut from 5 minutes to 2 seconds
(the rule otherwise as shipped). The lake is planted (:mod:`tests.helpers.plant`): a continuous driver (this test
process holds its lease) that committed nothing for 20 minutes while three files wait, the oldest landed 5 minutes
ago, after two restarts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.helpers.plant import JOB, PlantedLake
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.prometheus import Prometheus, require_prometheus, wait_for
from tools.ports import free_port

NOT_IN_THE_FAST_TIER = "waits out Prometheus' scrapes and rule evaluations in real time (about 10 s)"
STALL_FOR = "2s"


@pytest.fixture
def scraped(tmp_path):
    require_prometheus()
    planted = PlantedLake(tmp_path / "state")
    planted.discovering(committed_ago=20 * 60, read_landed_ago=21 * 60, waiting=3, waiting_landed_ago=300)
    planted.hold_lease(started_ago=30 * 60)
    planted.supervisor(restarts_in_window=2, restarts_total=2, last_reason="the driver was killed by SIGKILL")
    planted.event("restart", reason="the driver was killed by SIGKILL", ago=25 * 60)
    planted.event("restart", reason="the driver was killed by SIGKILL", ago=24 * 60, take_over=True)

    port = free_port()
    exporter = subprocess.Popen([sys.executable, "-m", "spark_jobs", "metrics", "--lake", str(planted.lake),
                                 "--serve", str(port)], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, JOB.input_env_var: str(planted.landing)})
    prometheus = None
    try:
        assert exporter.stdout.readline().startswith("serving the streaming metrics of ")
        prometheus = Prometheus(tmp_path, f"127.0.0.1:{port}", planted.lake / "control" / "prometheus_targets.json",
                                alerts_for={"StreamingJobStalled": STALL_FOR})
        yield planted, prometheus
    finally:
        if prometheus is not None:
            prometheus.stop()
        exporter.terminate()
        exporter.wait(timeout=30)


def test_prometheus_returns_the_restarts_the_backlog_age_and_a_firing_stall_alert(scraped):
    planted, prometheus = scraped
    started = time.monotonic()
    restarts = wait_for("a scrape", lambda: prometheus.query('streaming_restarts_total{job="cloudtrail_etl"}'))
    assert [(r["metric"]["job"], r["metric"]["instance"], r["value"][1]) for r in restarts] == [
        ("cloudtrail_etl", prometheus.exporter, "2")]  # honor_labels: the registry job, the exporter's address
    assert prometheus.query('streaming_standby_take_overs_total{job="cloudtrail_etl"}')[0]["value"][1] == "1"

    [age] = prometheus.query('streaming_backlog_oldest_age_seconds{job="cloudtrail_etl"}')
    assert 300 <= float(age["value"][1]) <= 300 + (time.monotonic() - started) + 10
    [files] = prometheus.query('streaming_backlog_files{job="cloudtrail_etl"}')
    assert files["value"][1] == "3"
    [state] = prometheus.query('streaming_job_state{job="cloudtrail_etl"} == 1')
    assert state["metric"]["state"] == "stalled"

    firing = wait_for("the stall alert to fire", lambda: prometheus.query(
        'ALERTS{alertname="StreamingJobStalled", alertstate="firing"}'), timeout=30)
    assert [(a["metric"]["job"], a["metric"]["severity"], a["value"][1]) for a in firing] == [
        ("cloudtrail_etl", "page", "1")]
    [alert] = [a for a in prometheus.alerts() if a["labels"]["alertname"] == "StreamingJobStalled"]
    assert alert["annotations"]["oncall_action"] == "restart"
    assert alert["annotations"]["runbook_url"] == "docs/monitoring.md#streamingjobstalled"

    # the driver's Spark UI, named in its lease, is a target found through the exporter's file_sd file
    drivers = wait_for("the driver's target", lambda: prometheus.query('up{job="spark-drivers"}'))
    assert [(d["metric"]["instance"], d["metric"]["streaming_job"], d["metric"]["holder_kind"]) for d in drivers] == [
        ("127.0.0.1:4040", "cloudtrail_etl", "continuous")]
