"""Airflow's REST API, for the on-call actions that pause, unpause or clear a continuous DAG: the project's one client
of it (the tests' and tools' REST calls go through it too).

A task may not touch Airflow's metadata database (Airflow 3 blocks the ORM inside tasks, and its CLI
in a task's subprocess), and the Task SDK can read a DAG's state but not change it; the public REST API
(``/api/v2``) is Airflow's own way to do that, with Airflow's own permissions.

Where it is and who calls it: the HTTP connection ``airflow_api`` (host: the API server's base URL,
e.g. ``http://127.0.0.1:8080``; login and password of a service user allowed to edit the continuous DAGs:
``USER`` role or above with the simple auth manager, DAG edit permission with FAB); a token is asked
for at ``/auth/token``. ``make airflow`` and ``docker-compose.yml`` define it with a service user of their own
(``streaming_service``; see ``tools/local_airflow.py``). Without the connection: Airflow's own ``[api] base_url``
and no token, which only an API server that lets everyone in accepts (``SIMPLE_AUTH_MANAGER_ALL_ADMINS``, tests).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

API_CONN_ID = "airflow_api"
TIMEOUT_S = 30


class AirflowApiError(RuntimeError):
    """The API could not be reached or refused a request (the message says which and why).

    :param message: what failed.
    :param status: the HTTP status of a refusal (None when the API could not be reached).
    :param detail: the refusal's body.
    """

    def __init__(self, message: str, status: int | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class AirflowApi:
    """A small client of Airflow's public REST API.

    :param base_url: the API server's base URL (``http://host:port``).
    :param token: a JWT from ``/auth/token``, or ``None``.
    """

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token

    @classmethod
    def login(cls, base_url: str, username: str, password: str) -> "AirflowApi":
        """A client with ``username``'s token (``POST /auth/token``; the simple auth manager's users)."""
        client = cls(base_url)
        client.token = client._request("POST", "/auth/token", {"username": username,
                                                                "password": password})["access_token"]
        return client

    @classmethod
    def from_airflow(cls, conn_id: str = API_CONN_ID) -> "AirflowApi":
        """The client for the connection ``conn_id`` if it exists, else for ``[api] base_url`` without a token."""
        from airflow.sdk import BaseHook

        try:
            conn = BaseHook.get_connection(conn_id)
        except Exception:  # noqa: BLE001 - no such connection: the API's own address, no login
            from airflow.configuration import conf

            return cls(conf.get("api", "base_url", fallback="http://localhost:8080/"))
        base = conn.host if "://" in (conn.host or "") else f"{conn.schema or 'http'}://{conn.host}"
        if conn.port:
            base = f"{base.rstrip('/')}:{conn.port}"
        return cls.login(base, conn.login, conn.password or "") if conn.login else cls(base)

    def _request(self, method: str, path: str, body: dict | None = None) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.base_url}{path}", method=method, headers=headers,
                                         data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                text = response.read().decode()
                return json.loads(text) if text else {}
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:500]
            hint = (f"; define the connection {API_CONN_ID} (the API's URL and a user allowed to edit the DAG)"
                    if error.code in (401, 403) else "")
            raise AirflowApiError(f"{method} {self.base_url}{path} answered {error.code}: {detail}{hint}", error.code,
                                  detail) from None
        except (urllib.error.URLError, OSError) as error:
            raise AirflowApiError(f"cannot reach Airflow's REST API at {self.base_url} ({error}); define the "
                                  f"connection {API_CONN_ID} with the API server's URL") from None

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        """``method`` on ``/api/v2<path>``."""
        return self._request(method, f"/api/v2{path}", body)

    def dag(self, dag_id: str) -> dict:
        return self.api("GET", f"/dags/{dag_id}")

    def set_paused(self, dag_id: str, paused: bool) -> dict:
        return self.api("PATCH", f"/dags/{dag_id}", {"is_paused": paused})

    def running_runs(self, dag_id: str) -> list[dict]:
        return self.api("GET", f"/dags/{dag_id}/dagRuns?state=running")["dag_runs"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        tis = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in tis}

    def clear_task(self, dag_id: str, run_id: str, task_id: str) -> dict:
        """Clear one task of one run (Airflow stops it if it runs, then runs it again)."""
        return self.api("POST", f"/dags/{dag_id}/clearTaskInstances",
                        {"dry_run": False, "only_failed": False, "task_ids": [task_id], "dag_run_id": run_id})
