"""Airflow's REST API, for the on-call actions that pause, unpause or clear a continuous DAG: the project's one client
of it (the tests', the benchmark's and ``tools/local_airflow.py``'s REST calls go through it too).

A task may not touch Airflow's metadata database (Airflow 3 blocks the ORM inside tasks, and its CLI
in a task's subprocess), and the Task SDK can read a DAG's state but not change it; the public REST API
(``/api/v2``) is Airflow's own way to do that, with Airflow's own permissions.

Where it is and who calls it: the HTTP connection ``airflow_api`` (host: the API server's base URL,
e.g. ``http://127.0.0.1:8080``; login and password of a service user allowed to edit the continuous DAGs:
``USER`` role or above with the simple auth manager, DAG edit permission with FAB); a token is asked
for at ``/auth/token``. ``make airflow`` and ``docker-compose.yml`` define it with a service user of their own
(``streaming_service``; see ``tools/local_airflow.py``). Without the connection: Airflow's own ``[api] base_url``
and no token, which only an API server that lets everyone in accepts (``SIMPLE_AUTH_MANAGER_ALL_ADMINS``, tests).

Why our own (urllib, ~150 lines) and not Airflow's ``airflow-client-python`` or the HTTP provider's hook: neither is
installed, the tools and tests use this module without Airflow (it imports nothing of it at its top), and the calls
are a handful. tenacity does the retrying; this module says what is retryable (:func:`retryable`): a request Airflow
cannot have acted on (the connection was refused; 429 Too Many Requests, 503 Service Unavailable) is tried again
whatever its method; one it may have acted on (a timeout or a reset after it was sent; 502, 504 from a proxy) only
when doing it twice does what doing it once does (``GET``, ``PUT``, ``PATCH``, ``DELETE``: a second ``POST`` of a DAG
run would trigger two runs); anything else (an error status of Airflow's own, a body that is not JSON) at once.
Every error names the call (method and URL) and why; a password or token sent is never in a message or a log.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import urllib.error
import urllib.request

from tenacity import Retrying, before_sleep_log, retry_if_exception, stop_after_attempt, wait_random_exponential

log = logging.getLogger("streaming.hooks.airflow_api")

API_CONN_ID = "airflow_api"
TIMEOUT_S = 30
ATTEMPTS = 4  # with the backoff below: about 3 s of retrying at most before the error is raised
# Statuses with which a server says it did nothing (try again later), and methods safe to send twice.
NOT_DONE_STATUSES = frozenset({429, 503})
MAYBE_DONE_STATUSES = frozenset({502, 504})
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE"})
SECRET_KEYS = ("password", "token", "access_token")
PAGE = 100


class AirflowApiError(RuntimeError):
    """The API could not be reached or refused a request (the message names the call and says why).

    :param message: what failed.
    :param status: the HTTP status of a refusal (None when the API could not be reached).
    :param detail: the refusal's body (any secret of the request masked).
    :param retryable: whether trying the same call again may succeed (:func:`retryable`).
    """

    def __init__(self, message: str, status: int | None = None, detail: str | None = None,
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail
        self.retryable = retryable


def retryable(method: str, status: int | None, reason: BaseException | None = None) -> bool:
    """Whether a failed ``method`` call may be tried again: Airflow did not act on it (a refused connection,
    :data:`NOT_DONE_STATUSES`), or acting twice is acting once (:data:`IDEMPOTENT_METHODS`) and the failure says
    nothing about the request itself (a timeout, a reset, :data:`MAYBE_DONE_STATUSES`).

    :param status: the HTTP status (None: no answer).
    :param reason: why there was no answer.
    """
    if status is not None:
        return status in NOT_DONE_STATUSES or (status in MAYBE_DONE_STATUSES and method in IDEMPOTENT_METHODS)
    if isinstance(reason, ConnectionRefusedError):
        return True
    return method in IDEMPOTENT_METHODS and isinstance(reason, (TimeoutError, socket.timeout, ConnectionError,
                                                                  http.client.HTTPException))


def _masked(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


class AirflowApi:
    """A small client of Airflow's public REST API.

    :param base_url: the API server's base URL (``http://host:port``).
    :param token: a JWT from ``/auth/token``, or ``None``.
    :param timeout: seconds one attempt may take.
    :param attempts: attempts of a retryable call (1: no retry, for a probe polled anyway).
    """

    def __init__(self, base_url: str, token: str | None = None, timeout: float = TIMEOUT_S,
                 attempts: int = ATTEMPTS) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.attempts = attempts

    @classmethod
    def login(cls, base_url: str, username: str, password: str, **options) -> "AirflowApi":
        """A client with ``username``'s token (``POST /auth/token``; the simple auth manager's users).

        :param options: the constructor's ``timeout`` and ``attempts``.
        """
        client = cls(base_url, **options)
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
        """``method`` on ``<base_url><path>``, tried again while :func:`retryable` says so.

        :raises AirflowApiError: naming the call, after the last attempt.
        """
        retrying = Retrying(retry=retry_if_exception(lambda error: isinstance(error, AirflowApiError)
                                                     and error.retryable),
                            stop=stop_after_attempt(max(1, self.attempts)),
                            wait=wait_random_exponential(multiplier=0.25, max=2), reraise=True,
                            before_sleep=before_sleep_log(log, logging.WARNING))
        try:
            return retrying(self._send, method, path, body)
        except AirflowApiError as error:
            tried = retrying.statistics.get("attempt_number", 1)
            if tried > 1:
                error.args = (f"{error.args[0]} (after {tried} attempts)",)
            raise

    def _send(self, method: str, path: str, body: dict | None) -> dict:
        call = f"{method} {self.base_url}{path}"
        secrets = [value for key, value in (body or {}).items() if key in SECRET_KEYS and isinstance(value, str)
                   and value] + ([self.token] if self.token else [])
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.base_url}{path}", method=method, headers=headers,
                                         data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status, text = response.status, response.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            detail = _masked(error.read().decode(errors="replace")[:500], secrets)
            hint = (f"; define the connection {API_CONN_ID} (the API's URL and a user allowed to edit the DAG)"
                    if error.code in (401, 403) else "")
            raise AirflowApiError(f"{call} answered {error.code}: {detail}{hint}", error.code, detail,
                                  retryable(method, error.code)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            reason = error.reason if isinstance(error, urllib.error.URLError) else error
            reason = reason if isinstance(reason, BaseException) else None
            raise AirflowApiError(f"{call}: cannot reach Airflow's REST API at {self.base_url} "
                                  f"({_masked(str(error), secrets)}); define the connection {API_CONN_ID} with the "
                                  "API server's URL", retryable=retryable(method, None, reason or error)) from None
        try:
            return json.loads(text) if text else {}
        except ValueError:
            raise AirflowApiError(f"{call} answered {status} with a body that is not JSON: "
                                  f"{_masked(text[:200], secrets)!r}", status, text[:500]) from None

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        """``method`` on ``/api/v2<path>``."""
        return self._request(method, f"/api/v2{path}", body)

    def dag(self, dag_id: str) -> dict:
        return self.api("GET", f"/dags/{dag_id}")

    def set_paused(self, dag_id: str, paused: bool) -> dict:
        return self.api("PATCH", f"/dags/{dag_id}", {"is_paused": paused})

    def runs(self, dag_id: str, state: str | None = None) -> list[dict]:
        """Every run of ``dag_id`` (in ``state`` if given), oldest first, page by page."""
        found: list[dict] = []
        where = f"&state={state}" if state else ""
        while True:
            page = self.api("GET", f"/dags/{dag_id}/dagRuns?order_by=id&limit={PAGE}&offset={len(found)}{where}")
            found += page["dag_runs"]
            if len(page["dag_runs"]) < PAGE:
                return found

    def running_runs(self, dag_id: str) -> list[dict]:
        return self.runs(dag_id, state="running")

    def trigger(self, dag_id: str, conf: dict | None = None) -> str:
        """Trigger a run of ``dag_id`` now (``POST``: not retried once sent); its run id."""
        return self.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}})["dag_run_id"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        tis = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in tis}

    def clear_task(self, dag_id: str, run_id: str, task_id: str) -> dict:
        """Clear one task of one run (Airflow stops it if it runs, then runs it again)."""
        return self.api("POST", f"/dags/{dag_id}/clearTaskInstances",
                        {"dry_run": False, "only_failed": False, "task_ids": [task_id], "dag_run_id": run_id})
