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

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from tests.helpers.plant import JOB, PlantedLake
from tests.helpers.project import PROJECT_ROOT
from tools.ports import free_port

NOT_IN_THE_FAST_TIER = "waits out Prometheus' scrapes and rule evaluations in real time (about 10 s)"
STALL_FOR = "2s"


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def wait_for(what: str, check, timeout: float = 60.0):
    """``check()``'s first truthy value, polled every 0.5 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = check()
        except OSError:
            found = None
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Prometheus:
    """A Prometheus on 127.0.0.1 scraping the exporter at ``exporter_port``, every second."""

    def __init__(self, root, exporter_port: int, targets_file) -> None:
        rules = yaml.safe_load((PROJECT_ROOT / "docs" / "prometheus" / "alerts.yml").read_text())
        [stall] = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "StreamingJobStalled"]
        stall["for"] = STALL_FOR
        (root / "alerts.yml").write_text(yaml.safe_dump(rules))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(root / "alerts.yml")],
            "scrape_configs": [
                {"job_name": "streaming-health", "honor_labels": True,
                 "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}]},
                {"job_name": "spark-drivers", "file_sd_configs": [{"files": [str(targets_file)],
                                                                   "refresh_interval": "1s"}]}]}
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.exporter = f"127.0.0.1:{exporter_port}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(root / "prometheus.log", "w")
        self.process = subprocess.Popen(
            [shutil.which("prometheus"), f"--config.file={root / 'prometheus.yml'}",
             f"--storage.tsdb.path={root / 'tsdb'}", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def query(self, promql: str) -> list[dict]:
        """``/api/v1/query``'s result vector for ``promql``."""
        found = get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert found["status"] == "success", found
        return found["data"]["result"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


@pytest.fixture
def scraped(tmp_path):
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed: apt-get install prometheus (.ci/run does)")
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
        prometheus = Prometheus(tmp_path, port, planted.lake / "control" / "prometheus_targets.json")
        wait_for("Prometheus to be ready", lambda: urllib.request.urlopen(f"{prometheus.url}/-/ready", timeout=2))
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
    [alert] = [a for a in get(f"{prometheus.url}/api/v1/alerts")["data"]["alerts"]
               if a["labels"]["alertname"] == "StreamingJobStalled"]
    assert alert["annotations"]["oncall_action"] == "restart"
    assert alert["annotations"]["runbook_url"] == "docs/monitoring.md#streamingjobstalled"

    # the driver's Spark UI, named in its lease, is a target found through the exporter's file_sd file
    drivers = wait_for("the driver's target", lambda: prometheus.query('up{job="spark-drivers"}'))
    assert [(d["metric"]["instance"], d["metric"]["streaming_job"], d["metric"]["holder_kind"]) for d in drivers] == [
        ("127.0.0.1:4040", "cloudtrail_etl", "continuous")]
