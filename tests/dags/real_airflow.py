"""A real Airflow on loopback for a test module: free ports, its REST API, waiting for what it does.

The modules that need a running scheduler (the continuous DAG's supervision, Airflow's own backfill)
each start one :class:`tools.local_airflow.LocalAirflow` with its own home, port and lake, and
talk to it through :class:`RestApi` (``SIMPLE_AUTH_MANAGER_ALL_ADMINS``: no login).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.dags.conftest import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "plugins"))
from tools.local_airflow import free_port  # noqa: E402,F401  (the modules' one port finder)

WAIT = 600  # seconds any one step may take on a busy 2-core machine (a Delta batch under load: minutes)


class RestApi:
    """Airflow's ``/api/v2`` at ``url`` (an API server that lets everyone in)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(f"{self.url}/api/v2{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response) if response.status != 204 else {}

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self("PATCH", f"/dags/{dag_id}", {"is_paused": paused})

    def runs(self, dag_id: str) -> list[dict]:
        found, offset = [], 0
        while True:
            page = self("GET", f"/dags/{dag_id}/dagRuns?order_by=id&limit=100&offset={offset}")["dag_runs"]
            found += page
            if len(page) < 100:
                return found
            offset += 100

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        tis = self("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in tis}

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str):
        try:
            entry = self("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}")
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise
        value = entry["value"]
        return json.loads(value) if isinstance(value, str) else value


def wait_for(what: str, check, timeout: float = WAIT, every: float = 1.0):
    """Poll ``check()`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (urllib.error.URLError, OSError, ValueError, KeyError) as error:
            last = error
        else:
            if last:
                return last
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})", pytrace=False)
