"""The operator that keeps a continuous job's Spark driver running: Airflow's side of supervision."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from spark_jobs.launch.submit import SPARK_CONN_ID

# Overrides read at execute time, for tests and drills (short backoffs, a fast trigger); unset in
# production, where the registry's values apply.
POLICY_ENV = "STREAMING_SUPERVISOR_POLICY"  # JSON object of RestartPolicy fields, e.g. {"max_restarts": 2}
TRIGGER_ENV = "STREAMING_CONTINUOUS_TRIGGER"  # e.g. processing-time:1s instead of the registry's
NOTIFIED_KINDS = ("restart", "give_up", "take_over_failed")


def as_flag(value: bool | str | None, name: str) -> bool | None:
    """A rendered boolean field (``True``/``False`` as text after templating); ``None`` and empty: not given.

    :raises ValueError: naming the value and the ones accepted.
    """
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "none"):
        return None
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"{name}={value!r} is not a boolean; give true or false")


def restart_policy(job) -> Any:
    """The job's :class:`~spark_jobs.model.policies.RestartPolicy` with ``$STREAMING_SUPERVISOR_POLICY`` applied.

    :raises ValueError: naming the bad value and the fields that exist.
    """
    raw = os.environ.get(POLICY_ENV)
    if not raw:
        return job.restart
    try:
        overrides = json.loads(raw)
        if not isinstance(overrides, dict):
            raise TypeError("not a JSON object")
        return dataclasses.replace(job.restart, **overrides)
    except (ValueError, TypeError) as error:
        fields = ", ".join(f.name for f in dataclasses.fields(job.restart))
        raise ValueError(f"${POLICY_ENV}={raw!r} is not a JSON object of RestartPolicy fields ({error}); "
                         f"fields: {fields}") from None


class StreamingSupervisorOperator(BaseOperator):
    """Run a registry job's driver with its continuous trigger and keep it running.

    The task wraps :class:`spark_jobs.control.supervision.supervisor.Supervisor`: it spark-submits the job
    (``run <job> --trigger <continuous trigger>``: the :class:`~spark_jobs.launch.submit.Submission` of the
    catch-up DAG, same jars and conf, as the command the Spark provider builds for ``conn_id``), restarts
    a driver that died or stalled from the same checkpoint with the registry's backoff and restart
    budget, and ends:

    - successfully when the DAG is paused (asked every ``pause_poll_seconds``): the driver is
      stopped after its micro-batch (SIGTERM to the Python driver; its process group is killed only
      after ``RestartPolicy.stop_grace_seconds``);
    - failed, without retry (:class:`AirflowFailException`), when the supervisor gives up: with
      ``max_consecutive_failed_dag_runs=1`` the DAG then pauses itself, so the job stays stopped
      until a person unpauses it;
    - when the task is marked failed or cleared, Airflow sends SIGTERM and :meth:`on_kill` asks the
      supervisor to stop the driver the same graceful way. Airflow's Task SDK escalates to SIGKILL
      5 s later; the driver was started with ``PR_SET_PDEATHSIG``, so if the task process dies first
      the kernel stops the driver (its interrupted batch is re-run on the next start, exactly once).

    The supervisor's state is pushed to XCom ``supervisor`` on every change, and each restart and
    the give-up go to ``notifier``.

    **One worker slot per continuous job, for as long as it runs.** In client mode (``local[*]``,
    the ``spark_default`` here) the Spark driver lives in spark-submit's process, a child of this
    task: the task has to stay alive to own it, so it cannot defer. That ownership is the point:
    the driver dies with the task, so a retried or cleared task can never leave a second driver
    writing (apache/airflow#17479), and the single-writer lease refuses one anyway.

    :param job: the registry job.
    :param input_path: the job's input folder (templated); empty: ``$<JOB>_INPUT``, else the
        registry's default.
    :param conn_id: the Spark connection (master, deploy mode, spark-submit binary).
    :param notifier: called for each restart and give-up with the context plus
        ``supervisor_event`` and ``supervisor_state``; default: a
        :class:`~streaming.notifiers.SupervisorEventNotifier`.
    :param pause_poll_seconds: how often the DAG's pause flag is asked for.
    :param warm_standby: keep a warm standby driver beside the running one, for this run only (templated; empty:
        the job's setting, :mod:`spark_jobs.control.supervision.job_settings`: on-call's choice, else the registry's
        ``RestartPolicy.warm_standby``); see :mod:`spark_jobs.control.supervision.supervisor`.
    """

    template_fields = ("input_path", "warm_standby")
    ui_color = "#fdf1e0"

    def __init__(self, *, job: str, input_path: str | None = None, conn_id: str = SPARK_CONN_ID,
                 notifier=None, pause_poll_seconds: float = 5.0, warm_standby: bool | str | None = None,
                 **kwargs) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.job = job
        self.input_path = input_path
        self.conn_id = conn_id
        self.notifier = notifier
        self.pause_poll_seconds = pause_poll_seconds
        self.warm_standby = warm_standby
        self._stop_requested: threading.Event | None = None  # made in execute(): set by on_kill()

    def driver_command(self, trigger: str, input_path: str | None, lineage_parent: dict | None = None) -> list[str]:
        """The spark-submit command of the driver for the connection ``conn_id`` (looked up now, through
        Airflow), the command the Spark provider would build for it; with Spark's streaming metrics served
        for Prometheus on the driver's UI (:mod:`spark_jobs.control.monitoring.prometheus`) and this task run as
        every driver's OpenLineage parent (``lineage_parent``, :func:`streaming.lineage.parent_conf`)."""
        from airflow.sdk import BaseHook

        from spark_jobs.control.monitoring.prometheus import STREAMING_METRICS_CONF
        from spark_jobs.launch.submit import SparkConnection, Submission

        args = ["run", self.job, "--trigger", trigger] + (["--input", input_path] if input_path else [])
        found = BaseHook.get_connection(self.conn_id)
        connection = SparkConnection.from_fields(found.conn_type, found.host, found.port, found.extra_dejson)
        return Submission.of(args, name=self.job, extra_conf={**STREAMING_METRICS_CONF, **(lineage_parent or {})},
                             long_running=True).argv(connection)

    def execute(self, context) -> str:
        from spark_jobs.model.lake import PROJECT_ROOT, Lake
        from spark_jobs.registry import get_job
        from spark_jobs.control.supervision.supervisor import Supervisor
        from streaming.job_connections import connection_env
        from streaming.notifiers import SupervisorEventNotifier
        from streaming.sensors.checkpoint_health import job_input_path

        self._stop_requested = threading.Event()
        job = get_job(self.job)
        trigger = os.environ.get(TRIGGER_ENV) or job.continuous_trigger
        if not trigger:
            raise AirflowFailException(f"job {job.name!r} has no continuous_trigger in the registry: set one "
                                       f"(e.g. processing-time:10s) to supervise it")
        policy = restart_policy(job)
        standby = as_flag(self.warm_standby, "warm_standby")  # this run's own choice; None: the job's setting
        notifier = self.notifier or SupervisorEventNotifier()
        ti = context["ti"]
        dag_id = context["dag"].dag_id
        paused = {"at": 0.0, "value": False}

        def should_stop() -> bool:
            if self._stop_requested.is_set():
                return True
            if time.monotonic() - paused["at"] >= self.pause_poll_seconds:
                try:
                    paused["value"] = bool(ti.get_dag(dag_id).is_paused)
                except Exception as error:  # noqa: BLE001 - the API server is away: keep the job running
                    self.log.warning("could not ask whether %s is paused: %s", dag_id, error)
                paused["at"] = time.monotonic()
                if paused["value"]:
                    self.log.info("%s is paused: stopping the driver after its micro-batch", dag_id)
            return paused["value"]

        def on_state(state: dict) -> None:
            ti.xcom_push(key="supervisor", value=state)
            self.log.info("supervisor of %s: %s (consecutive failures %s, restarts in window %s/%s, next attempt "
                          "%s, last reason %s)", job.name, state.get("state"), state.get("consecutive_failures"),
                          state.get("restarts_in_window"), state.get("max_restarts"), state.get("next_attempt_at"),
                          state.get("last_reason"))

        supervisor: Supervisor | None = None

        def notify(event: dict) -> None:
            if event.get("kind") in NOTIFIED_KINDS:
                notifier({**context, "supervisor_event": event,
                          "supervisor_state": supervisor.state.to_dict() if supervisor else None})

        input_path = self.input_path or None
        from streaming.lineage import parent_conf

        command = self.driver_command(trigger, input_path, parent_conf(context))
        self.log.info("supervising %s with %s; policy %s", job.name, trigger, policy)
        connection = connection_env(job)  # a Kafka job's Airflow connection, for the driver's environment
        supervisor = Supervisor(job, Lake.at(), command, policy=policy, notify=notify, should_stop=should_stop,
                                on_state=on_state, input_path=job_input_path(job.name, input_path),
                                cwd=str(PROJECT_ROOT), env={**os.environ, **connection} if connection else None,
                                warm_standby=standby)
        outcome = supervisor.run()
        if outcome == "given_up":
            raise AirflowFailException(
                f"the supervisor of {job.name} gave up: {supervisor.state.last_reason}. The DAG pauses itself; "
                f"fix the cause, then unpause {dag_id}. Events: {supervisor.control}/events.jsonl, driver log: "
                f"{supervisor.driver.log_path}")
        return outcome

    def on_kill(self) -> None:
        """Marked failed, cleared or timed out: stop the driver after its micro-batch (see the class doc)."""
        self.log.info("the task is being stopped: asking the supervisor to stop the driver of %s", self.job)
        if self._stop_requested is not None:
            self._stop_requested.set()
