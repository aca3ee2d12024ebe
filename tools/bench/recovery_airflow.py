"""The recovery trial through a running Airflow: the supervised job is ``<job>_continuous``'s ``supervise`` task.

Usage::

    python -m spark_jobs trial recovery --through airflow --kills 5

The trial of :mod:`tools.bench.recovery` runs the supervisor as ``python -m spark_jobs supervise``;
with ``--through airflow`` it runs it as a person does in production: a real Airflow on loopback (api-server,
scheduler, dag-processor and triggerer: :class:`tools.local_airflow.LocalAirflow`, the code behind
``make airflow``) with its own home, port and SQLite database in the trial's folder, the lake and the
landing folder given to every component through ``$LAKE_ROOT`` and ``$CLOUDTRAIL_ETL_INPUT``, and the
trial's restart-policy override through the operator's ``$STREAMING_SUPERVISOR_POLICY``. The trial
unpauses ``cloudtrail_etl_continuous`` through the REST API; the scheduler starts its run, whose
``supervise`` task spark-submits the driver. Each ``kill -9`` then hits the driver that task started,
and the time to the next commit includes everything the scheduler-run supervisor does (its polling,
backoff and spark-submit). The end is a graceful stop as a person does it: pausing the DAG (the driver
stops after its micro-batch and ``supervise`` succeeds), then stopping Airflow; any process left with
the instance's marker is reported.

Nothing here is Airflow's own: the trial reads the supervisor's files in the lake's control folder
(lease, ``supervisor.json``, ``events.jsonl``) exactly as the CLI variant does.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tools.bench.supervised_job import JOB, SupervisedJob
from spark_jobs.model.lake import PROJECT_ROOT, Lake

DAG_ID = f"{JOB.name}_continuous"
PARSE_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 300.0
RUN_CHECK_EVERY_S = 10.0


def wait_for_api(what: str, check, timeout: float, every: float = 1.0):
    """``check()``'s first truthy value; API errors while waiting count as not yet."""
    from streaming.hooks.airflow_api import AirflowApiError

    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except AirflowApiError as error:
            last = error
        time.sleep(every)
    raise TimeoutError(f"{what} did not happen within {timeout:g} s (last: {last})")


def _plugins_on_path() -> None:
    plugins = str(PROJECT_ROOT / "plugins")
    if plugins not in sys.path:
        sys.path.insert(0, plugins)


def airflow_env(home: Path, lake: Path, landing: Path, trigger: str | None, policy: dict | None) -> dict[str, str]:
    """The environment of the trial's Airflow components: this process's, with the trial's own database,
    lake, landing folder, and the operator's test overrides of the trigger and the restart policy."""
    env = {
        **os.environ,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        # The trial's Airflow lets everyone in: Airflow's simple auth manager (identity is not what it measures).
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
        "LAKE_ROOT": str(lake),
        JOB.input_env_var: str(landing),
    }
    if trigger:
        env["STREAMING_CONTINUOUS_TRIGGER"] = trigger
    if policy:
        env["STREAMING_SUPERVISOR_POLICY"] = json.dumps(policy)
    return env


class AirflowSupervisedJob(SupervisedJob):
    """The job supervised by the ``supervise`` task of ``<job>_continuous`` under a running Airflow.

    :param landing: the input folder.
    :param lake: the lake root.
    :param trigger: the continuous trigger (None: the registry's).
    :param workdir: the trial folder; Airflow's home is ``<workdir>/airflow``.
    :param policy: restart-policy fields that override the registry's.
    """

    def __init__(self, landing: Path, lake: Path, trigger: str | None, workdir: Path, policy: dict | None = None) -> None:
        _plugins_on_path()
        from streaming.hooks.airflow_api import AirflowApi
        from tools.local_airflow import LocalAirflow, free_port

        self.lake = Lake(lake)
        self.control = self.lake.control_path(JOB.name)
        self.checkpoint = self.lake.checkpoint_path(JOB.name)
        self.stderr = workdir / "airflow" / "logs" / "scheduler.out"
        self.airflow = LocalAirflow(workdir / "airflow", free_port(), airflow_env(workdir / "airflow", lake, landing,
                                                                                    trigger, policy))
        self.api = AirflowApi(self.airflow.url)
        self.airflow.start()
        wait_for_api(f"the dag-processor to parse {DAG_ID}", lambda: self.api.api("GET", f"/dags/{DAG_ID}"),
                     PARSE_TIMEOUT_S)
        self._runs_checked_at = 0.0
        self.api.set_paused(DAG_ID, False)

    def check_alive(self) -> None:
        """Raise if an Airflow component died, or a continuous run failed (its supervisor gave up)."""
        dead = self.airflow.dead_components()
        if dead:
            tail = "\n".join(self.airflow.output_file(dead[0]).read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"Airflow's {', '.join(dead)} exited during the trial:\n{tail}")
        if time.monotonic() - self._runs_checked_at >= RUN_CHECK_EVERY_S:
            self._runs_checked_at = time.monotonic()
            failed = [run_id for run_id, state in self.run_states() if state == "failed"]
            if failed:
                raise RuntimeError(f"run {failed[0]} of {DAG_ID} failed (the supervisor gave up?); see "
                                   f"{self.control}/events.jsonl and the task log under {self.airflow.home}/logs")

    def run_states(self) -> list[tuple[str, str]]:
        """(run id, state) of every run of the continuous DAG, oldest first."""
        runs = self.api.api("GET", f"/dags/{DAG_ID}/dagRuns?order_by=id")["dag_runs"]
        return [(r["dag_run_id"], r["state"]) for r in runs]

    def stop(self, timeout: float) -> tuple[int | None, float, list[int]]:
        """Pause the DAG (the driver stops after its micro-batch, ``supervise`` succeeds), then stop Airflow.

        :returns: 0 if ``supervise`` of every run succeeded (else 1), seconds the pause took to stop
            the driver, and the pids of processes of this instance left after Airflow's stop.
        """
        from tools.local_airflow import marked_processes

        started = time.monotonic()
        status: int | None = 1
        try:
            self.api.set_paused(DAG_ID, True)
            run_ids = [run_id for run_id, _ in self.run_states()]
            states = wait_for_api("supervise to end after the pause",
                                  lambda: (s := [self.api.task_states(DAG_ID, r).get("supervise") for r in run_ids])
                                  and all(x in ("success", "failed", "upstream_failed") for x in s) and s,
                                  max(timeout, STOP_TIMEOUT_S))
            status = 0 if all(s == "success" for s in states) else 1
        except Exception as error:  # noqa: BLE001 - report it, stop Airflow anyway
            print(f"trial: the graceful stop through the pause failed: {error}", file=sys.stderr)
        took = time.monotonic() - started
        self.airflow.stop(grace=30)
        left = sorted(marked_processes(str(self.airflow.home)))
        lease = self.lease()
        if lease is not None and lease.alive_locally():
            left = sorted(set(left) | {lease.pid})
        return status, took, left
