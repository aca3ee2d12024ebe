"""Named users of a test Airflow and its human-in-the-loop REST API, as people use them: the simple auth manager
with users of real roles (``AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS``) and their passwords in the Airflow home's
passwords file, a JWT from the API server's ``POST /auth/token`` per user, and the ``hitlDetails`` routes that
list and answer required actions; and a test module's Airflow, started and stopped.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.helpers.real_airflow import AirflowApiError, RestApi

# Who is who in the tests: alice and bob may trigger DAGs and answer required actions (the USER role), vic may only
# look (VIEWER), admin sets the stage.
USERS = {"admin": "admin", "alice": "user", "bob": "user", "vic": "viewer"}


def user_settings(home: Path) -> dict[str, str]:
    """The environment of an Airflow with the simple auth manager that knows :data:`USERS` with known passwords (written to
    ``home``'s passwords file before the API server starts; it keeps the passwords it finds there)."""
    home.mkdir(parents=True, exist_ok=True)
    passwords = home / "simple_auth_manager_passwords.json.generated"
    passwords.write_text(json.dumps({name: f"{name}-secret" for name in USERS}))
    from tools.local_airflow import SIMPLE_AUTH_MANAGER

    return {"AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{n}:{r}" for n, r in USERS.items()),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords)}


class UserApi(RestApi):
    """Airflow's ``/api/v2`` at ``url`` as ``user`` (a bearer token from ``/auth/token``, the project's own client;
    the password :func:`user_settings` gives them unless another is given)."""

    def __init__(self, url: str, user: str, password: str | None = None) -> None:
        super().__init__(url, RestApi.login(url, user, password or f"{user}-secret").token)
        self.user = user

    def status(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict | str]:
        """(HTTP status, body) without raising on an error status."""
        try:
            return 200, self(method, path, body)
        except AirflowApiError as error:
            if error.status is None:
                raise
            return error.status, error.detail or ""

    def required_actions(self, dag_id: str, run_id: str = "~") -> list[dict]:
        """The HITL details of ``dag_id``'s runs (``~``: every run), answered or not."""
        return self("GET", f"/dags/{dag_id}/dagRuns/{run_id}/hitlDetails")["hitl_details"]

    def answer(self, dag_id: str, run_id: str, task_id: str, option: str) -> tuple[int, dict | str]:
        """Answer the required action of ``task_id`` in ``run_id`` with ``option`` (``Approve`` / ``Reject``)."""
        return self.status("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails",
                           {"chosen_options": [option]})


def pending(api: UserApi, dag_id: str) -> list[dict]:
    """The unanswered required actions of ``dag_id`` whose task waits for them."""
    return [d for d in api.required_actions(dag_id) if not d["response_received"]
            and d["task_instance"]["state"] == "awaiting_input"]


def wait_parked(airflow, dag_id: str, task_id: str, run_id: str) -> None:
    """Wait for the scheduler's report of ``run_id``'s parked attempt (awaiting a person's answer).

    A person answers seconds later, not within the seconds the task takes to park: with Airflow 3.3.2's
    LocalExecutor an answer that reaches the scheduler before the executor's report of the parked attempt makes it
    fail the resumed task ("finished with state success, but the task instance's state attribute is queued"; the
    worker took 5 s from parking to that report under load). So an answer waits for that report.
    """
    from tests.helpers.real_airflow import wait_for

    parked = (f"Received executor event with state success for task instance TaskInstanceKey(dag_id='{dag_id}', "
              f"task_id='{task_id}', run_id='{run_id}', try_number=1")
    scheduler_log = airflow.output_file("scheduler")
    wait_for(f"the scheduler's report of {run_id}'s parked attempt",
             lambda: parked in scheduler_log.read_text(errors="replace"), every=0.5)


@contextmanager
def running(airflow, what: str, ready) -> Iterator[None]:
    """``airflow`` (a :class:`tools.local_airflow.LocalAirflow`) started, ``ready()`` awaited (``what`` names it),
    stopped at the end, and nothing it started left running."""
    from tests.helpers.real_airflow import wait_for
    from tools.local_airflow import marked_processes

    try:
        airflow.start()
        wait_for(what, ready)
        yield
    finally:
        airflow.stop(grace=20)
    assert marked_processes(str(airflow.home)) == {}, "processes of the test Airflow outlived `stop`"
