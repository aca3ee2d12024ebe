"""The trigger behind :class:`~streaming.sensors.checkpoint_health.CheckpointHealthSensor`: a job's checkpoint health.

It runs in the triggerer, so it lives here (``plugins/`` is on the triggerer's ``sys.path``), not in
the DAG bundle. Each poll reads the checkpoint with :func:`spark_jobs.control.checkpoint.inspect.inspect_checkpoint`
in a thread (listing a folder or a bucket must not block the triggerer's event loop) and asks the
API server for the state of the watched task (``supervise``) in the same run.

Each poll is also where the job's alerts are decided: :func:`spark_jobs.control.monitoring.health.check_job`
evaluates the registry's ``AlertThresholds``, :class:`spark_jobs.control.monitoring.incidents.IncidentStore`
opens or resolves incidents (persisted in ``<lake>/control/<job>/incidents.json``, so a restarted
sensor does not alert again), and every alert not delivered yet goes through Airflow's notifier
mechanism, awaited here in the triggerer (:class:`~streaming.notifiers.HealthAlertNotifier`: a log line
always, a webhook when configured), once when an incident opens and once when it resolves.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TaskSuccessEvent, TriggerEvent

# Statuses that mean the same to a person watching: a batch in flight is a healthy job at work.
SAME_AS = {"in_flight": "healthy"}
FINISHED_TASK_STATES = frozenset({"success", "failed", "upstream_failed", "skipped", "removed"})
# The supervisor's states once the watched task is ending (it was asked to stop, or gave up).
ENDING_SUPERVISOR_STATES = frozenset({"stopping", "stopped", "given_up"})


def health_level(status: str | None) -> str | None:
    """The status as the sensor reports changes of it (``in_flight`` counts as ``healthy``)."""
    return SAME_AS.get(status, status)


class CheckpointHealthTrigger(BaseTrigger):
    """Wait until a job's checkpoint health changes, or until the watched task has finished.

    Yields one event and returns:

    - a :class:`TriggerEvent` ``{"status", "previous", "report"}`` when the health level (see
      :func:`health_level`) differs from ``last_status`` on ``confirm_polls`` polls in a row; the
      sensor logs it, pushes it to XCom and defers again. Not once the job's supervisor is ending
      (:data:`ENDING_SUPERVISOR_STATES`: the DAG was paused, or the supervisor gave up): a sensor sent
      back to a worker then would wait for the scheduler, which starts no task of a paused DAG, so it
      would never end; the change is logged here instead, and the task's end follows;
    - a :class:`TaskSuccessEvent` with the last report in XCom ``health`` once ``watch_task_id``
      in run ``run_id`` has finished: the job is no longer supervised, so there is nothing left to
      watch. The task ends from the triggerer, without a worker, so it ends even when the DAG is
      paused (the scheduler starts no task of a paused DAG).

    :param job: the registry job.
    :param lake_root: the lake (a path or fsspec URL) holding ``checkpoints/<job>``.
    :param dag_id: the DAG of the watched task.
    :param run_id: the run of the watched task.
    :param watch_task_id: the task whose end ends this trigger.
    :param input_path: the job's input folder (for the backlog); None: the job's default.
    :param last_status: the health level reported last; None: report the first one seen.
    :param poll_interval: seconds between polls.
    :param confirm_polls: polls a new level must hold before it is reported (no flapping).
    :param alerts: evaluate the job's alert conditions at each poll and deliver its incidents' alerts.
    """

    def __init__(self, job: str, lake_root: str, dag_id: str, run_id: str, watch_task_id: str = "supervise",
                 input_path: str | None = None, last_status: str | None = None, poll_interval: float = 5.0,
                 confirm_polls: int = 2, alerts: bool = True) -> None:
        super().__init__()
        self.job = job
        self.lake_root = lake_root
        self.dag_id = dag_id
        self.run_id = run_id
        self.watch_task_id = watch_task_id
        self.input_path = input_path
        self.last_status = last_status
        self.poll_interval = poll_interval
        self.confirm_polls = confirm_polls
        self.alerts = alerts

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job": self.job,
                "lake_root": self.lake_root,
                "dag_id": self.dag_id,
                "run_id": self.run_id,
                "watch_task_id": self.watch_task_id,
                "input_path": self.input_path,
                "last_status": self.last_status,
                "poll_interval": self.poll_interval,
                "confirm_polls": self.confirm_polls,
                "alerts": self.alerts,
            },
        )

    def inspect(self) -> dict:
        """The checkpoint report as a dict (blocking: run it in a thread)."""
        from spark_jobs.control.checkpoint.inspect import inspect_checkpoint
        from spark_jobs.registry import get_job

        try:
            return inspect_checkpoint(get_job(self.job), self.lake_root, input_path=self.input_path).to_dict()
        except Exception as error:  # noqa: BLE001 - reported as a status, the trigger keeps watching
            return {"status": "unknown", "problems": [{
                "code": "inspect_failed", "severity": "error",
                "explanation": f"inspecting the checkpoint failed: {type(error).__name__}: {error}",
                "action": f"run `python -m spark_jobs checkpoint inspect {self.job} --lake {self.lake_root}`"}]}

    def check(self) -> tuple[dict, list[dict]]:
        """The checkpoint report (with the job's ``health`` state and conditions) and, when alerts are
        on, the alerts waiting for delivery after this evaluation updated the incidents (blocking: run
        it in a thread)."""
        from spark_jobs.control.monitoring.health import check_job
        from spark_jobs.control.monitoring.incidents import IncidentStore
        from spark_jobs.registry import get_job

        try:
            health = check_job(get_job(self.job), self.lake_root, self.input_path, incidents=[])
        except Exception:  # noqa: BLE001 - the same failure report as inspect(), no alerts decided
            return self.inspect(), []
        report = {**health.report, "health": {"state": health.state, "reason": health.reason,
                                              "conditions": [c.to_dict() for c in health.conditions]}}
        if not self.alerts:
            return report, []
        store = IncidentStore(health.report["control"])
        store.update(health.job, health.conditions, state=health.state)
        return report, store.pending()

    async def deliver(self, control: str, alerts: list[dict]) -> None:
        """Send each alert through :class:`~streaming.notifiers.HealthAlertNotifier`, then mark it delivered."""
        from spark_jobs.control.monitoring.incidents import IncidentStore
        from streaming.notifiers import HealthAlertNotifier

        store = IncidentStore(control)
        for alert in alerts:
            await HealthAlertNotifier(context={"health_alert": alert, "dag_id": self.dag_id, "run_id": self.run_id})
            await asyncio.to_thread(store.mark_delivered, [alert["alert_id"]])

    async def poll_once(self) -> dict:
        """One look at the job: its report, after its alerts were decided and delivered."""
        report, alerts = await asyncio.to_thread(self.check)
        if alerts:
            await self.deliver(report["control"], alerts)
        return report

    async def watched_task_state(self) -> str | None:
        from asgiref.sync import sync_to_async

        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        states = await sync_to_async(RuntimeTaskInstance.get_task_states)(
            dag_id=self.dag_id, task_ids=[self.watch_task_id], run_ids=[self.run_id])
        return (states.get(self.run_id) or {}).get(self.watch_task_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        candidate, seen = None, 0
        report: dict = {}
        logged = self.last_status
        while True:
            report = await self.poll_once()
            task_state = await self.watched_task_state()
            if task_state in FINISHED_TASK_STATES:
                self.log.info("%s is %s: checkpoint health of %s ends at %s", self.watch_task_id, task_state,
                              self.job, report.get("status"))
                yield TaskSuccessEvent(xcoms={"health": report})
                return
            level = health_level(report.get("status"))
            ending = (report.get("supervisor") or {}).get("state")
            if ending in ENDING_SUPERVISOR_STATES:
                if level != logged:
                    self.log.info("checkpoint health of %s: %s -> %s (the supervisor is %s: waiting for %s to end)",
                                  self.job, logged, level, ending, self.watch_task_id)
                    logged = level
                candidate, seen = None, 0
            elif level == self.last_status:
                candidate, seen = None, 0
            else:
                seen = seen + 1 if level == candidate else 1
                candidate = level
                if seen >= self.confirm_polls:
                    yield TriggerEvent({"status": level, "previous": self.last_status, "report": report})
                    return
            await asyncio.sleep(self.poll_interval)
