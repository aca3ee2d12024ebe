"""The operator of ``streaming_oncall``: check an on-call request, have a second user approve it when it destroys or
rewrites data (Airflow's human-in-the-loop), do it (or say what it would do), audit it."""

from __future__ import annotations

import json
from datetime import timedelta

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from tenacity import RetryError, Retrying, retry_if_result, stop_before_delay, wait_fixed

from spark_jobs.launch.submit import SPARK_CONN_ID
from streaming.hooks.airflow_api import API_CONN_ID

# Fields of the form, in the order the audit row keeps them.
FORM_FIELDS = ("job", "action", "from_time", "table", "table_version", "warm_standby", "version", "reason", "dry_run")
# Actions that read or change the continuous DAG's state in Airflow.
NEEDS_AIRFLOW = ("restart", "stop", "resume_supervision")


class OncallActionOperator(HITLOperator):
    """Carry out one on-call action on a registry job, from the run's params (the trigger form).

    1. :func:`spark_jobs.control.oncall.requests.check_request` checks every field and the job's state (its lease, its
       supervisor, the continuous DAG in Airflow); a refusal ends the run as refused, naming the field: the task is
       skipped (:class:`AirflowSkipException`, one log line with the reason), audited, and nothing runs.
    2. The plan (:meth:`~spark_jobs.control.oncall.requests.OncallRequest.plan`) goes to the log and to XCom ``plan``;
       a dry run ends there.
    3. An action that destroys or rewrites data (the registry's ``needs_approval``: ``reset_checkpoint``,
       ``rollback_table``, ``reprocess_from``, ``rollout_destructive``) waits for a second user: Airflow's
       human-in-the-loop (this operator is an :class:`HITLOperator`: Browse > Required Actions, or the REST API's
       ``hitlDetails``) shows the plan and offers ``Approve`` / ``Reject``; the request expires after the registry's
       time
       (:func:`spark_jobs.control.oncall.approval.approval_expiry`). With the simple auth manager the request is
       assigned to every other user who may answer (:func:`~spark_jobs.control.oncall.approval.approvers`), so
       Airflow refuses the requester's own answer; none: refused at once. With FAB (``make airflow``'s) only the approver
       role may answer, on the health plugin's approvals page (:mod:`streaming.oncall_approvals`). When the task resumes
       (:meth:`execute_complete`), :func:`~spark_jobs.control.oncall.approval.decide` reads the answer: the
       requester's, the service identity's and a late approval are refused (where Airflow could not keep them out),
       a rejection or an expiry runs
       nothing, and an approval checks the request again against the job's state of now before it runs.
    4. The action: ``reprocess_from`` and ``rollback_table`` spark-submit ``python -m spark_jobs reprocess``
       / ``lake restore`` (the Spark provider's hook, the connection ``conn_id``, the submission of the
       other DAGs: :class:`spark_jobs.launch.submit.Submission`) with the checked values only; ``restart``, ``stop`` and ``resume_supervision``
       pause, unpause or clear ``<job>_continuous`` through Airflow's REST API
       (:class:`streaming.hooks.airflow_api.AirflowApi`) and wait for the lease to prove it; the rest change
       the lake's control files.
    5. Every run, refused, rejected, expired and dry runs included, appends one row to ``ops_audit`` (delta-rs, no
       JVM): who asked, who decided and when, the parameters, the reason, the outcome, the table versions before
       and after. The outcome is also the task's return value (XCom).

    :param conn_id: the Spark connection of the spark-submits.
    :param api_conn_id: the HTTP connection of Airflow's REST API.
    :param stop_timeout: seconds ``stop`` waits for the driver's lease to be released.
    :param restart_timeout: seconds ``restart`` waits for the new driver's lease.
    """

    ui_color = "#fde0e0"

    def __init__(self, *, conn_id: str = SPARK_CONN_ID, api_conn_id: str = API_CONN_ID,
                 stop_timeout: float = 300, restart_timeout: float = 600, **kwargs) -> None:
        from spark_jobs.model.oncall import MAX_APPROVAL_EXPIRY_SECONDS

        kwargs.setdefault("retries", 0)
        # The subject, body and wait are set per request (the action is known when the task runs); a
        # response_timeout here keeps HITLOperator from taking execution_timeout for the human wait.
        super().__init__(subject="on-call action", options=[ApprovalOperator.APPROVE, ApprovalOperator.REJECT],
                         multiple=False, response_timeout=timedelta(seconds=MAX_APPROVAL_EXPIRY_SECONDS), **kwargs)
        self.conn_id = conn_id
        self.api_conn_id = api_conn_id
        self.stop_timeout = stop_timeout
        self.restart_timeout = restart_timeout
        self._hook = None

    # -- the steps -------------------------------------------------------------------------------

    def execute(self, context) -> dict:
        from spark_jobs.control.oncall.approval import needs_approval

        lake, form, record = self._start(context)
        request = self._check(context, lake, form, record)
        plan = request.plan()
        doing = "dry run of" if request.dry_run else "asking approval of" if needs_approval(request.action) else "doing"
        self.log.info("%s %s of %s (audit id %s), asked by %s: %s", doing, request.action, request.job.name,
                      record.audit_id, record.triggered_by, request.reason)
        for step, line in enumerate(plan, 1):
            self.log.info("  %d. %s", step, line)
        context["ti"].xcom_push(key="plan", value=plan)
        if request.dry_run:
            record.outcome, record.message = "dry_run", "\n".join(plan)
            return self._audit(context, lake, record)
        if needs_approval(request.action):
            return self._ask_approval(context, request, record, plan)
        return self._run(context, lake, request, record)

    def _start(self, context):
        from spark_jobs.model.lake import Lake
        from spark_jobs.control.oncall.audit import AuditRecord

        params, dag_run = context["params"], context["dag_run"]
        form = {name: params.get(name) for name in FORM_FIELDS}
        lake = Lake.at()
        record = AuditRecord(job=str(form["job"]), action=str(form["action"]),
                             parameters={k: v for k, v in form.items() if k != "reason"},
                             reason=str(form["reason"] or ""), dry_run=form["dry_run"] is True,
                             triggered_by=getattr(dag_run, "triggering_user_name", None), dag_id=dag_run.dag_id,
                             run_id=dag_run.run_id)
        record.versions_before = record.versions_after = self._versions(form["job"], lake)
        return lake, form, record

    def _check(self, context, lake, form, record):
        """The checked request; a refusal is audited and fails the task."""
        from spark_jobs.control.oncall.requests import OncallRefused, check_request

        try:
            airflow = self._airflow_view(form["job"]) if form["action"] in NEEDS_AIRFLOW else None
            request = check_request(form["job"], form["action"], form["reason"], form["dry_run"],
                                    form["from_time"], form["table"], form["table_version"],
                                    form["warm_standby"], form["version"], lake=lake,
                                    airflow=airflow, requested_at=record.time)
        except OncallRefused as exc:
            record.outcome, record.message = "refused", str(exc)
            self._audit(context, lake, record)
            self.log.info("on-call action refused, nothing was run: %s", exc)
            raise AirflowSkipException(f"on-call action refused, nothing was run: {exc}") from None
        record.parameters = request.parameters()
        return request

    def _approvers(self, requester: str | None) -> list[str] | None:
        """Every user who may answer except the requester and the API connection's service user (the simple auth
        manager's users); None when they cannot be listed (another auth manager, or everyone is let in)."""
        from airflow.configuration import conf

        from spark_jobs.control.oncall.approval import approvers

        manager = conf.get("core", "auth_manager", fallback="") or ""
        if not manager.endswith("SimpleAuthManager") or conf.getboolean("core", "simple_auth_manager_all_admins",
                                                                          fallback=False):
            return None
        return approvers(conf.get("core", "simple_auth_manager_users", fallback="admin:admin"), requester,
                         self._service_user())

    def _service_user(self) -> str | None:
        """The API connection's login (the service identity: it never approves), None without a connection."""
        try:
            from airflow.sdk import BaseHook

            return BaseHook.get_connection(self.api_conn_id).login
        except Exception:  # noqa: BLE001 - no API connection: no service user to leave out
            return None

    def _ask_approval(self, context, request, record, plan) -> None:
        """Ask a second user (Airflow's human-in-the-loop); the task waits, then resumes in :meth:`execute_complete`."""
        from spark_jobs.control.oncall.approval import approval_body, approval_expiry, approval_subject

        may_approve = self._approvers(record.triggered_by)
        if may_approve == []:
            record.outcome = "refused"
            record.message = (f"refused: nobody but {record.triggered_by} may approve {request.action} (four eyes): add "
                              "a second user with the role user, op or admin to AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS "
                              "and restart Airflow (docs/airflow.md#the-api-connection-and-a-second-user), then ask again")
            self._audit(context, request.lake, record)
            raise AirflowSkipException(f"on-call action not run: {record.message}")
        self.assigned_users = [{"id": name, "name": name} for name in may_approve] if may_approve else None
        expiry = approval_expiry(request.action)
        expires_at = record.time + expiry
        self.subject = approval_subject(request.job.name, request.action, record.triggered_by)
        self.body = approval_body(plan, requester=record.triggered_by, reason=request.reason,
                                  expires_at=expires_at, audit_id=record.audit_id, may_approve=may_approve)
        self.response_timeout = expiry
        context["ti"].xcom_push(key="approval_request", value={
            "audit_id": record.audit_id, "time": record.time.isoformat(), "expires_at": expires_at.isoformat(),
            "requested_by": record.triggered_by})
        self.log.info("%s of %s needs the approval of another user than %s (Browse > Required Actions; may approve: "
                      "%s); the request expires at %s and then runs nothing", request.action, request.job.name,
                      record.triggered_by, ", ".join(may_approve) if may_approve else "any user allowed to answer",
                      expires_at.isoformat())
        return super().execute(context)

    def execute_complete(self, context, event: dict) -> dict:
        """The second user's answer (or the expiry): refuse, or check the request again and run it."""
        import datetime as dt

        from spark_jobs.control.oncall.approval import decide

        asked = context["ti"].xcom_pull(task_ids=self.task_id, key="approval_request")
        lake, form, record = self._start(context)
        if asked:  # the request's id and times (the resumed task is a new process)
            record.audit_id = asked["audit_id"]
            record.time = dt.datetime.fromisoformat(asked["time"])
            record.expires_at = dt.datetime.fromisoformat(asked["expires_at"])
        else:  # still audited, under a new id
            self.log.warning("the XCom approval_request of this task is gone: the audit row gets a new id and time")
        decision = decide(event, record.triggered_by, service_user=self._service_user(),
                          expires_at=record.expires_at)
        record.decision, record.decided_by, record.decided_at = decision.decision, decision.by, decision.at
        said = decision.message(record.triggered_by, record.expires_at)
        self.log.info("approval of %s (audit id %s): %s", record.action, record.audit_id, said)
        if not decision.runs:
            record.outcome, record.message = decision.outcome(), said
            self._audit(context, lake, record)
            if decision.decision in ("rejected", "self_approval"):  # refused: nothing runs, nothing failed
                raise AirflowSkipException(f"on-call action {record.message}")
            raise AirflowFailException(f"on-call action not run: {record.message}")
        request = self._check(context, lake, form, record)  # the job's state may have changed while waiting
        for step, line in enumerate(request.plan(), 1):
            self.log.info("  now %d. %s", step, line)
        return self._run(context, lake, request, record)

    def _run(self, context, lake, request, record) -> dict:
        try:
            done = self._perform(request, record, context)
        except BaseException as exc:
            record.outcome, record.message = "failed", f"{type(exc).__name__}: {exc}"[:4000]
            record.versions_after = self._versions(record.job, lake)
            self._audit(context, lake, record)
            raise
        record.outcome, record.message = "succeeded", json.dumps(done, sort_keys=True, default=str)
        record.versions_after = self._versions(record.job, lake)
        self.log.info("result of %s of %s (audit id %s): %s", request.action, request.job.name, record.audit_id,
                      record.message)
        return self._audit(context, lake, record)

    def _audit(self, context, lake, record) -> dict:
        from spark_jobs.control.oncall.audit import append

        row = append(lake, record)
        shown = {**row, "versions_before": dict(row["versions_before"]), "versions_after": dict(row["versions_after"]),
                 **{key: row[key] and row[key].isoformat() for key in ("time", "finished", "decided_at",
                                                                       "expires_at")}}
        self.log.info("ops_audit: %s", json.dumps(shown, sort_keys=True))
        context["ti"].xcom_push(key="audit", value=shown)
        return shown

    @staticmethod
    def _versions(job, lake) -> dict[str, int]:
        from spark_jobs.control.oncall.requests import table_versions
        from spark_jobs.registry import JOBS

        return table_versions(JOBS[job], lake) if job in JOBS else {}

    def _api(self):
        from streaming.hooks.airflow_api import AirflowApi

        return AirflowApi.from_airflow(self.api_conn_id)

    def _airflow_view(self, job_name):
        """The continuous DAG's state from the REST API (an unreachable API is a view with the error)."""
        from spark_jobs.control.oncall.requests import AirflowView
        from spark_jobs.registry import JOBS
        from streaming.hooks.airflow_api import AirflowApiError

        dag_id = f"{job_name}_continuous"
        if job_name not in JOBS:
            return None
        try:
            api = self._api()
            paused = bool(api.dag(dag_id)["is_paused"])
            runs = api.running_runs(dag_id)
            run_id = runs[-1]["dag_run_id"] if runs else None
            state = api.task_states(dag_id, run_id).get("supervise") if run_id else None
            return AirflowView(dag_id, paused, run_id, state)
        except (AirflowApiError, KeyError, ValueError) as exc:
            return AirflowView(dag_id, None, error=str(exc))

    def _perform(self, request, record, context) -> dict:
        action = request.action
        if action in ("reprocess_from", "rollback_table"):
            return self._spark_submit(request, record.audit_id, context)
        if action == "reset_checkpoint":
            from spark_jobs.control.oncall.requests import reset_checkpoint

            return reset_checkpoint(request)
        control = str(request.lake.control_path(request.job.name))
        if action == "pause_supervision":
            from spark_jobs.control.supervision.hold import place_hold

            return {"hold": place_hold(control, record.triggered_by, request.reason, record.audit_id)}
        if action == "set_warm_standby":
            from spark_jobs.control.supervision.job_settings import set_warm_standby

            return {"settings": set_warm_standby(control, request.warm_standby, record.triggered_by or "unknown",
                                                 record.audit_id)}
        if action in ("rollout", "rollout_destructive"):  # the supervisor carries it out (docs/deploying.md)
            from spark_jobs.control.rollout.ask import running_version
            from spark_jobs.control.rollout.request import request_rollout

            return {"rollout": request_rollout(control, request.job.name, request.version, running_version(control),
                                               record.triggered_by or "unknown", request.reason,
                                               destructive=action == "rollout_destructive")}
        if action == "resume_supervision":
            from spark_jobs.control.supervision.hold import lift_hold

            done = {"lifted": lift_hold(control)}
            if request.airflow is not None and request.airflow.paused:
                self._api().set_paused(request.airflow.dag_id, False)
                done["unpaused"] = request.airflow.dag_id
            return done
        if action == "stop":
            return self._stop(request)
        return self._restart(request)

    def _spark_submit(self, request, audit_id: str, context) -> dict:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        from spark_jobs.launch.submit import Submission
        from streaming.lineage import parent_conf

        args = request.spark_args(audit_id)
        submission = Submission.of(args, name=f"{request.job.name}_oncall_{request.action}",
                                   extra_conf=parent_conf(context))
        self._hook = SparkSubmitHook(**submission.hook_kwargs(self.conn_id))
        self._hook.submit(submission.application)
        return {"spark_submit": args}

    def _stop(self, request) -> dict:
        from spark_jobs.control.checkpoint.lease import read_lease
        from spark_jobs.control.supervision.ownership import lease_owner

        control = str(request.lake.control_path(request.job.name))
        before = read_lease(control)
        self._api().set_paused(request.airflow.dag_id, True)
        self.log.info("paused %s; waiting for the driver to stop after its micro-batch", request.airflow.dag_id)
        try:
            # Stopped: no live lease, or one a catch-up run holds (the continuous driver's is gone).
            lease = _lease_once(control, lambda lease: lease is None or lease.expired()
                                or lease_owner(lease).kind != "continuous", self.stop_timeout)
        except RetryError:
            raise RuntimeError(f"{request.airflow.dag_id} is paused, but the driver still holds the lease after "
                               f"{self.stop_timeout:g} s: {read_lease(control).describe()}") from None
        return {"paused": request.airflow.dag_id, "driver_before": before and before.describe(),
                "lease": lease and {"generation": lease.generation, "released": lease.released}}

    def _restart(self, request) -> dict:
        from spark_jobs.control.checkpoint.lease import read_lease

        control = str(request.lake.control_path(request.job.name))
        before = read_lease(control)
        view = request.airflow
        self._api().clear_task(view.dag_id, view.running_run_id, "supervise")
        self.log.info("cleared supervise of %s %s; waiting for a new driver", view.dag_id, view.running_run_id)
        try:
            lease = _lease_once(control, lambda lease: lease is not None and lease.generation > before.generation
                                and not lease.expired(), self.restart_timeout)
        except RetryError:
            raise RuntimeError(f"no new driver took the checkpoint's lease within {self.restart_timeout:g} s after "
                               f"clearing supervise of {view.dag_id}") from None
        return {"cleared": f"{view.dag_id} {view.running_run_id} supervise",
                "driver_before": before.describe(), "driver_after": lease.describe()}

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()


def _lease_once(control: str, done, timeout: float):
    """The checkpoint's lease under ``control`` (None: there is none) once ``done(lease)``, read once a second.

    :raises tenacity.RetryError: when ``done`` still does not hold after ``timeout`` seconds.
    """
    from spark_jobs.control.checkpoint.lease import read_lease

    poll = Retrying(retry=retry_if_result(lambda lease: not done(lease)), stop=stop_before_delay(timeout),
                    wait=wait_fixed(1))
    return poll(read_lease, control)
