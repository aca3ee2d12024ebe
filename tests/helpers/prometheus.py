"""A real Prometheus on 127.0.0.1 for the tests: Debian's ``prometheus`` binary (``.ci/run`` installs it) with a generated
configuration that scrapes the product's exporter every second, finds the drivers through the exporter's ``file_sd``
file and evaluates ``docs/prometheus/alerts.yml`` (with chosen alerts' ``for`` cut short); queried through its HTTP
API."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.helpers.project import PROJECT_ROOT
from tools.ports import free_port


def require_prometheus() -> str:
    """The binary, or the test is skipped naming the package."""
    found = shutil.which("prometheus")
    if found is None:
        pytest.skip("prometheus is not installed: apt-get install prometheus (.ci/run does)")
    return found


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
    """A Prometheus on 127.0.0.1 scraping the exporter at ``exporter`` (``host:port``) every second.

    :param root: its folder (configuration, rules, TSDB, log).
    :param exporter: the exporter's address.
    :param targets_file: the drivers' ``file_sd`` file the exporter writes.
    :param metrics_path: the exporter's path (the CLI's ``/metrics``, the health plugin's
        ``/streaming-health/metrics``).
    :param token_file: a file holding a bearer token for the exporter (the plugin's routes need a logged-in user).
    :param alerts_for: alert name -> the ``for`` it gets here (the rest as shipped).
    """

    def __init__(self, root: Path, exporter: str, targets_file: Path, metrics_path: str = "/metrics",
                 token_file: Path | None = None, alerts_for: dict[str, str] | None = None) -> None:
        binary = require_prometheus()
        rules = yaml.safe_load((PROJECT_ROOT / "docs" / "prometheus" / "alerts.yml").read_text())
        for rule in (r for g in rules["groups"] for r in g["rules"]):
            if rule.get("alert") in (alerts_for or {}):
                rule["for"] = alerts_for[rule["alert"]]
        (root / "alerts.yml").write_text(yaml.safe_dump(rules))
        scrape = {"job_name": "streaming-health", "honor_labels": True, "metrics_path": metrics_path,
                  "static_configs": [{"targets": [exporter]}]}
        if token_file is not None:
            scrape["authorization"] = {"type": "Bearer", "credentials_file": str(token_file)}
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(root / "alerts.yml")],
            "scrape_configs": [
                scrape,
                {"job_name": "spark-drivers", "file_sd_configs": [{"files": [str(targets_file)],
                                                                   "refresh_interval": "1s"}]}]}
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.exporter = exporter
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(root / "prometheus.log", "w")
        self.process = subprocess.Popen(
            [binary, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("Prometheus to be ready", lambda: urllib.request.urlopen(f"{self.url}/-/ready", timeout=2))

    def query(self, promql: str) -> list[dict]:
        """``/api/v1/query``'s result vector for ``promql``."""
        found = get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert found["status"] == "success", found
        return found["data"]["result"]

    def alerts(self) -> list[dict]:
        """``/api/v1/alerts``: the pending and firing alerts."""
        return get(f"{self.url}/api/v1/alerts")["data"]["alerts"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()
