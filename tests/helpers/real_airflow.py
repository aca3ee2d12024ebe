"""A real Airflow on loopback for a test module: free ports, its REST API, waiting for what it does.

The modules that need a running scheduler (the continuous DAG's supervision, Airflow's own backfill)
each start one :class:`tools.local_airflow.LocalAirflow` with its own home, port and lake, and
talk to it through :class:`RestApi`: the project's own client (:class:`streaming.hooks.airflow_api.AirflowApi`),
without a token for an API server that lets everyone in (``SIMPLE_AUTH_MANAGER_ALL_ADMINS``), or logged in
(:meth:`RestApi.login`).
"""

from __future__ import annotations

import json
import time
import urllib.error

import pytest

from streaming.hooks.airflow_api import AirflowApi, AirflowApiError
from tools.local_airflow import free_port  # noqa: F401  (the modules' one port finder)

WAIT = 600  # seconds any one step may take on a busy 2-core machine (a Delta batch under load: minutes)


class RestApi(AirflowApi):
    """Airflow's ``/api/v2`` at ``url``, called as ``api(method, path, body)``, and the reads only the tests need."""

    def __call__(self, method: str, path: str, body: dict | None = None) -> dict:
        return self.api(method, path, body)

    @property
    def url(self) -> str:
        return self.base_url

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str):
        try:
            entry = self("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}")
        except AirflowApiError as error:
            if error.status == 404:
                return None
            raise
        value = entry["value"]
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError:  # a plain string
            return value


def wait_for(what: str, check, timeout: float = WAIT, every: float = 1.0, until=None):
    """Poll ``check()`` until it returns something truthy (or, with ``until``, something ``until`` accepts);
    fail naming ``what`` and the last value seen otherwise."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (urllib.error.URLError, OSError, ValueError, KeyError, AirflowApiError) as error:
            last = error
        else:
            if until(last) if until else last:
                return last
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})", pytrace=False)
