"""A real Airflow on loopback for a test module: free ports, its REST API, waiting for what it does.

The modules that need a running scheduler (the continuous DAG's supervision, Airflow's own backfill)
each start one :class:`tools.local_airflow.LocalAirflow` with its own home, port and lake, and
talk to it through :class:`RestApi`: the project's own client (:class:`streaming.hooks.airflow_api.AirflowApi`),
without a token for an API server that lets everyone in (``SIMPLE_AUTH_MANAGER_ALL_ADMINS``), or logged in
(:meth:`RestApi.login`). :class:`HarnessAirflow` is one started and stopped by ``make airflow``'s own harness.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
from contextlib import contextmanager
from pathlib import Path

import pytest

from streaming.hooks.airflow_api import AirflowApi, AirflowApiError
from tests.helpers.project import PROJECT_ROOT
from tools.local_airflow import SIMPLE_AUTH_MANAGER, LocalAirflow, free_port, marked_processes

HARNESS = PROJECT_ROOT / "tools" / "local_airflow.py"

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


class HarnessAirflow:
    """A test module's own Airflow, started and stopped as ``make airflow`` / ``make stop`` do it
    (``python tools/local_airflow.py start|stop``), with the simple auth manager's login page and two people, admin
    and alice (role user); its home, SQLite database, lake and landing folder in ``root``.

    :param env: more environment of every component (the caller's own policy, trigger, webhook...).
    """

    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.landing, self.lake, self.home = root / "landing", root / "lake", root / "airflow_home"
        self.env = {
            # Logged in, as a team is: no let-everyone-in shortcut, and none of the caller's supervisor policy.
            **{k: v for k, v in os.environ.items()
               if k not in ("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "STREAMING_SUPERVISOR_POLICY")},
            "AIRFLOW_HOME": str(self.home),
            # The simple auth manager's login page and users (identity is tests/plugins/test_identity.py's, on FAB).
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,alice:user",  # a second user, as a team has
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "LAKE_ROOT": str(self.lake),
            "CLOUDTRAIL_ETL_INPUT": str(self.landing),
            **(env or {}),
        }
        # The harness's own object, for its URL, files and passwords (the start and stop are its command line's).
        self.airflow = LocalAirflow(self.home, free_port(), self.env)

    def harness(self, action: str) -> subprocess.CompletedProcess:
        """``python tools/local_airflow.py start|stop`` as ``make airflow`` / ``make stop`` run it."""
        return subprocess.run([sys.executable, str(HARNESS), action, "--port", str(self.airflow.port)], env=self.env,
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)

    def login(self, user: str) -> RestApi:
        return RestApi.login(self.airflow.url, user, self.airflow.password(user))

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        """The REST API as admin."""
        if getattr(self, "_admin", None) is None:
            self._admin = self.login("admin")
        return self._admin(method, path, body)

    @contextmanager
    def running(self, *dag_ids: str):
        """Airflow started by the harness, once its dag-processor has parsed ``dag_ids``, until the block ends; then
        stopped, with no process of it left. Yields the start's output."""
        try:
            started = self.harness("start")
            assert started.returncode == 0, started.stdout + started.stderr
            wait_for(f"the dag-processor to parse {', '.join(dag_ids)}",
                     lambda: all(self.api("GET", f"/dags/{dag_id}") for dag_id in dag_ids))
            yield started
        finally:
            stopped = self.harness("stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert marked_processes(str(self.home)) == {}, "processes of the test Airflow outlived `stop`"
