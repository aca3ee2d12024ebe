"""A continuous run serves Spark's streaming gauges for Prometheus on its driver's UI.

One real driver (``python -m spark_jobs run --trigger processing-time:1s``, its own JVM) with the UI
on a free port; the test scrapes ``<spark_ui>/metrics/prometheus/`` as Prometheus would, then stops
the driver with SIGTERM (after its micro-batch, exit 0).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from spark_jobs.checkpoint.lease import read_lease
from spark_jobs.lake import PROJECT_ROOT
from spark_jobs.monitoring.prometheus import PROMETHEUS_PATH
from spark_jobs.sample_data import write_sample_landing
from tests.spark_jobs.monitoring.plant import JOB

PREFIX = f"metrics_{JOB.name}_driver_spark_streaming_{JOB.name}_"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, check, timeout: float = 600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def gauges(text: str) -> dict[str, float]:
    """``name -> value`` of the query's gauges in Prometheus' text format (the servlet writes each gauge
    as ``<name>_Number`` and ``<name>_Value``, type ``gauges``)."""
    found = {}
    for line in text.splitlines():
        metric, _, value = line.rpartition(" ")
        if metric.startswith(PREFIX) and metric.endswith('_Value{type="gauges"}'):
            found[metric[len(PREFIX):-len('_Value{type="gauges"}')]] = float(value)
    return found


def test_a_continuous_run_serves_its_streaming_gauges_for_prometheus(tmp_path):
    write_sample_landing(tmp_path / "landing", files=3, records_per_file=5, include_bad_files=False)
    lake, port = tmp_path / "lake", free_port()
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": f"--conf spark.ui.port={port} pyspark-shell"}
    with open(tmp_path / "driver.log", "wb") as log:
        driver = subprocess.Popen([sys.executable, "-m", "spark_jobs", "run", JOB.name, "--trigger", "processing-time:1s",
                                   "--lake", str(lake), "--input", str(tmp_path / "landing")], cwd=PROJECT_ROOT,
                                  env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for("the first commit", lambda: (lake / "checkpoints" / JOB.name / "commits" / "0").exists()
                 or driver.poll() is not None)
        assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        ui = read_lease(str(lake / "control" / JOB.name)).details["spark_ui"]
        assert ui.endswith(f":{port}")

        def scrape() -> dict[str, float]:
            with urllib.request.urlopen(f"{ui}{PROMETHEUS_PATH}/", timeout=30) as response:
                assert response.status == 200
                found = gauges(response.read().decode())
            return found if found.get("latency", 0) > 0 else {}

        found = wait_for("the query's gauges", scrape, timeout=120)
        assert {"inputRate_total", "processingRate_total", "latency", "eventTime_watermark", "states_rowsTotal",
                "states_usedBytes"} <= set(found)
        assert found["states_rowsTotal"] == 0  # no stateful operator in this job
    finally:
        driver.send_signal(signal.SIGTERM)
        code = driver.wait(timeout=180)
    assert code == 0, (tmp_path / "driver.log").read_text()[-3000:]
