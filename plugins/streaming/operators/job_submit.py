"""The ``spark_submit`` task of the catch-up and backfill DAGs: one run of a registry job, and what became of it."""

from __future__ import annotations

import logging

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

log = logging.getLogger(__name__)


def record_try(context, job: str, kind: str, stream: str | None = None, reason: str | None = None,
               retries: int = 0, outcome: str | None = None) -> dict | None:
    """One line of the job's run record (:mod:`spark_jobs.control.monitoring.runs`) for the try of ``context``'s task
    that ends now: what ``stream`` loaded since it started, or why it failed (``reason``; ``retrying`` while the try is
    within ``retries``; ``outcome="refused"``: a request checked and not run). A record that cannot be written is
    logged, never the task's failure.

    :returns: the line written, or None.
    """
    import datetime as dt

    from spark_jobs.control.monitoring.runs import RunRecord, loaded_since, record_run
    from spark_jobs.model.lake import Lake

    ti, run = context["ti"], context["dag_run"]
    started = ti.start_date or dt.datetime.now(dt.timezone.utc)
    try:
        lake = Lake.at()
        if reason is None:
            loaded, outcome = loaded_since(str(lake.root), stream or job, started), "succeeded"
        else:
            loaded, outcome = {}, outcome or ("retrying" if ti.try_number <= retries else "failed")
        record = RunRecord(job=job, kind=kind, dag_id=run.dag_id, run_id=run.run_id, try_number=ti.try_number,
                           outcome=outcome, started_at=started.isoformat(), stream=stream or job, reason=reason,
                           requested_by=getattr(run, "triggering_user_name", None), **loaded)
        line = record_run(str(lake.control_path(job)), record)
    except Exception as error:  # noqa: BLE001 - the record is for people; the run's own result stands
        log.warning("could not record this run of %s: %s", job, error)
        return None
    log.info("run record of %s: %s", job, line)
    return line


class JobSubmitOperator(SparkSubmitOperator):
    """spark-submit one run of a registry job (the Spark provider's operator, its arguments as they are) and tell
    the job's run record and the continuous job apart from a failure.

    - **The continuous job owns the checkpoint** (a catch-up run that lost the race for the lease to the continuous
      driver, exit status 3): the task is skipped, no retry and no failed run, saying who owns it
      (:func:`spark_jobs.control.supervision.ownership.continuous_owner`); its files are ingested there. A lease
      held by anyone else (an on-call action, a driver started by hand) stays a failure, retried as usual.
    - **Every try that ends** is one line of ``<lake>/control/<job>/runs.jsonl``
      (:mod:`spark_jobs.control.monitoring.runs`; the job's timeline shows it): a success with the input files,
      rows and micro-batches its stream recorded in ``streaming_progress`` since the try started; a failure with
      its reason, the driver's own ``error:`` line when it printed one (the provider keeps the last lines of
      spark-submit's output), and whether Airflow retries it.

    :param job: the registry job.
    :param kind: ``catch-up`` or ``backfill``: what the run is, unless the plan says ``backfill``.
    :param plan_task_id: the task whose XCom holds the run's plan (``kind`` and a backfill's ``writer``).
    """

    def __init__(self, *, job: str, kind: str = "catch-up", plan_task_id: str = "plan", **kwargs) -> None:
        super().__init__(**kwargs)
        self.job = job
        self.kind = kind
        self.plan_task_id = plan_task_id

    def execute(self, context) -> None:
        from airflow.sdk.exceptions import AirflowException, AirflowSkipException

        from spark_jobs.control.supervision.ownership import LEASE_HELD_EXIT_STATUS, continuous_owner

        from streaming.lineage import parent_conf

        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        kind = "backfill" if plan.get("kind") == "backfill" else self.kind
        stream = f"{self.job}@{plan['writer']}" if plan.get("writer") else self.job
        self.conf = {**(self.conf or {}), **parent_conf(context)}  # the Spark run's OpenLineage parent: this task run
        try:
            super().execute(context)
        except AirflowException as exc:
            code = self._exit_status()
            owner = continuous_owner(self.job, self._control()) if code == LEASE_HELD_EXIT_STATUS else None
            if owner is not None and kind == "catch-up":
                self.log.info("%s: nothing to do in this run", owner)
                context["ti"].xcom_push(key="owned_by", value=owner)
                raise AirflowSkipException(f"{owner} (this run's driver was refused by its lease: exit status "
                                           f"{code})") from None
            record_try(context, self.job, kind, stream, reason=self._reason(exc), retries=self.retries)
            raise
        record_try(context, self.job, kind, stream)

    def _exit_status(self) -> int | None:
        process = getattr(self._hook, "_submit_sp", None)
        return None if process is None else process.returncode

    def _reason(self, exc: BaseException) -> str:
        """The driver's own ``error:`` line, else spark-submit's status and its last line of output."""
        from spark_jobs.control.supervision.child import error_line

        lines = list(getattr(self._hook, "_last_submit_log_lines", None) or [])
        said = error_line("\n".join(lines))
        if said:
            return said
        code = self._exit_status()
        if code is None:
            return str(exc).splitlines()[0][:1000]
        return f"spark-submit exited with status {code}" + (f": {lines[-1][:1000]}" if lines else "")

    def _control(self) -> str:
        from spark_jobs.model.lake import Lake

        return str(Lake.at().control_path(self.job))
