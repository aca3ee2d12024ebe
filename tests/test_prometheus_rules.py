"""The shipped Prometheus alert rules and Alertmanager example (docs/prometheus/), checked with Debian's own tools:
``promtool check rules``, ``promtool test rules`` (one unit test per alert) and ``amtool check-config``, plus the
contracts a person on call relies on: every alert's runbook anchor exists in docs/monitoring.md, it names the
on-call form's action, and it reads only metrics the exporter serves. A missing binary skips with the apt package to
install (``.ci/run`` installs both). The Grafana dashboard (docs/grafana/) is held to the same: served metrics only,
queries promtool parses.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from spark_jobs.control.monitoring.metrics import health_families
from spark_jobs.control.oncall.requests import ACTIONS
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.markdown import anchors

FOLDER = PROJECT_ROOT / "docs" / "prometheus"
RULES = FOLDER / "alerts.yml"


def tool(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed: apt-get install {package} (.ci/run does)")
    return found


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=FOLDER, capture_output=True, text=True, timeout=120)


def alerts() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"] if "alert" in rule]


def test_the_alert_rules_pass_promtool_check_rules():
    done = run(tool("promtool", "prometheus"), "check", "rules", "alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts()) + 1} rules found" in done.stdout  # the alerts and the freshness SLI's record


def test_every_alert_has_a_passing_promtool_unit_test():
    tests = yaml.safe_load((FOLDER / "alerts_test.yml").read_text())["tests"]
    tested = [{check["alertname"] for check in test["alert_rule_test"]} for test in tests]
    assert tested == [{rule["alert"]} for rule in alerts()]  # one test per alert, in the rules' order
    for test in tests:  # each test says the alert is silent before it fires, then fires
        fired = [bool(check["exp_alerts"]) for check in test["alert_rule_test"]]
        assert len(fired) >= 2 and fired[-1] and not any(fired[:-1]), test["name"]

    done = run(tool("promtool", "prometheus"), "test", "rules", "alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout and "FAILED" not in done.stdout


def test_every_alert_links_its_runbook_and_names_the_oncall_action():
    documented = anchors(PROJECT_ROOT / "docs" / "monitoring.md")
    for rule in alerts():
        notes = rule["annotations"]
        page, _, anchor = notes["runbook_url"].partition("#")
        assert (page, anchor in documented) == ("docs/monitoring.md", True), rule["alert"]
        named = set(re.findall(r"[a-z_]+", notes["oncall_action"])) & set(ACTIONS)
        assert named or notes["oncall_action"].startswith("none"), rule["alert"]
        assert rule["labels"]["severity"] in ("page", "ticket"), rule["alert"]


def served_metrics() -> set[str]:
    served = {family.name + ("_total" if family.type == "counter" else "") for family in health_families([])}
    return served | {"streaming_exporter_scrape_duration_seconds"}


def test_the_alerts_read_only_metrics_the_exporter_serves():
    served = served_metrics()
    exprs = [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    used = {name for expr in exprs for name in re.findall(r"\bstreaming_[a-z_]+", expr)}
    assert {"streaming_job_state", "streaming_restarts_total", "streaming_backlog_oldest_age_seconds"} <= used
    assert used - served == set()


@pytest.mark.parametrize("labels, receiver", [
    (["alertname=StreamingJobStalled", "severity=page", "job=cloudtrail_etl"], "streaming-oncall-pager"),
    (["alertname=StreamingQuarantineBurst", "severity=ticket", "job=cloudtrail_etl"], "streaming-tickets"),
])
def test_the_alertmanager_example_passes_amtool_and_routes_pages_to_the_pager(labels, receiver):
    amtool = tool("amtool", "prometheus-alertmanager")
    done = run(amtool, "check-config", "alertmanager.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
    routed = run(amtool, "config", "routes", "test", "--config.file=alertmanager.yml", *labels)
    assert (routed.returncode, routed.stdout.strip()) == (0, receiver), routed.stderr


def dashboard_exprs() -> list[str]:
    board = json.loads((PROJECT_ROOT / "docs" / "grafana" / "streaming-health.json").read_text())
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def test_the_grafana_dashboard_reads_only_served_metrics_and_promtool_parses_every_query(tmp_path):
    """Each panel's query, with the dashboard's variables given values, is a recording rule for ``promtool check
    rules``: a query Prometheus cannot parse fails here, not on the on-call's screen."""
    exprs = dashboard_exprs()
    used = {name for expr in exprs for name in re.findall(r"\bstreaming_[a-z_]+", expr)}
    assert used - served_metrics() == set()
    assert {"streaming_backlog_bytes", "streaming_quarantined_records", "streaming_freshness_seconds"} <= used
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:panel_{i}", "expr": expr.replace("$job", ".*")} for i, expr in enumerate(exprs)]}]}
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump(rules))
    done = subprocess.run([tool("promtool", "prometheus"), "check", "rules", str(tmp_path / "dashboard.yml")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout
