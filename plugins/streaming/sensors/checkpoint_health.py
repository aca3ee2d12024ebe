"""The deferrable sensor that watches a continuous job's checkpoint health beside its supervisor."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from streaming.triggers.checkpoint_health import CheckpointHealthTrigger


def job_input_path(job_name: str, given: str | None = None) -> str | None:
    """The job's input folder as its driver resolves it: ``given``, else ``$<JOB>_INPUT``, else the
    registry's ``default_input`` (relative to the project root). For a job reading a Delta table or
    Kafka topics: ``given`` or ``None`` (the table's folder in the lake; the registry's topics)."""
    from spark_jobs.model.inputs import input_path
    from spark_jobs.registry import get_job

    job = get_job(job_name)
    if not job.source.lands_files:  # a table in the lake, or topics: no folder to resolve
        return given or None
    return str(input_path(job, given))


class CheckpointHealthSensor(BaseOperator):
    """Watch a job's checkpoint health for as long as its ``supervise`` task runs; waiting holds no
    worker slot (the wait is a :class:`~streaming.triggers.checkpoint_health.CheckpointHealthTrigger` in the triggerer).

    Each change of the health level (``healthy``, ``lagging``, ``stalled``, ``dead``, ``idle``, ...)
    comes back to a worker for a moment: it is logged with the report's problems and pushed to XCom
    ``health``, and the sensor defers again. When the watched task has finished, the trigger ends
    the sensor successfully from the triggerer with the last report in XCom ``health``. The sensor
    only reports; acting on a dead or stalled driver is the supervisor's job.

    :param job: the registry job.
    :param input_path: the job's input folder (templated); empty: ``$<JOB>_INPUT``, else the
        registry's default.
    :param watch_task_id: the task whose end ends this sensor.
    :param poll_interval: seconds between two looks at the checkpoint.
    """

    template_fields = ("input_path",)
    ui_color = "#e8f4fd"

    def __init__(self, *, job: str, input_path: str | None = None, watch_task_id: str = "supervise",
                 poll_interval: float = 5.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.job = job
        self.input_path = input_path
        self.watch_task_id = watch_task_id
        self.poll_interval = poll_interval

    def _trigger(self, context, last_status: str | None) -> CheckpointHealthTrigger:
        from spark_jobs.model.lake import resolve_lake_root

        return CheckpointHealthTrigger(
            job=self.job,
            lake_root=str(resolve_lake_root()),
            dag_id=context["dag"].dag_id,
            run_id=context["run_id"],
            watch_task_id=self.watch_task_id,
            input_path=job_input_path(self.job, self.input_path or None),
            last_status=last_status,
            poll_interval=self.poll_interval,
        )

    def execute(self, context) -> None:
        self.log.info("watching the checkpoint of %s while %s runs", self.job, self.watch_task_id)
        self.defer(trigger=self._trigger(context, None), method_name="execute_complete")

    def execute_complete(self, context, event: dict[str, Any]) -> None:
        report = event.get("report") or {}
        problems = report.get("problems") or []
        self.log.info("checkpoint health of %s: %s -> %s (latest commit batch %s, backlog %s files)", self.job,
                      event.get("previous"), event.get("status"), report.get("latest_commit_batch"),
                      report.get("backlog_files"))
        health = report.get("health") or {}
        if health:
            self.log.info("health of %s: %s (%s)", self.job, health.get("state"), health.get("reason"))
        for problem in problems:
            self.log.warning("  %s [%s]: %s; action: %s", problem.get("code"), problem.get("severity"),
                             problem.get("explanation"), problem.get("action"))
        context["ti"].xcom_push(key="health", value=report)
        self.defer(trigger=self._trigger(context, event.get("status")), method_name="execute_complete")
