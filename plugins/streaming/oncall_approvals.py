"""The health plugin's on-call approvals: the destructive requests of ``streaming_oncall`` that wait for a second
person, and the one place that approves or rejects them with each refusal audited.

Routes (under the plugin's prefix; every one asks the auth manager through :mod:`streaming.access`):

- ``GET /oncall`` (HTML) and ``GET /api/oncall`` (JSON): the waiting requests (requester, job, action, reason,
  plan, expiry); who may read the health page and the DAG's required actions;
- ``POST /oncall/{run_id}/decide`` (a form: ``choice=Approve|Reject``, answers with a page) and
  ``POST /api/oncall/{run_id}/decide`` (JSON ``{"choice": ...}``): the answer of the logged-in person.

An approval is refused with 403, and one ``ops_audit`` row (outcome ``refused``, the same ``run_id``, the refusal in
``decision``), when :func:`spark_jobs.control.oncall.approval.refuse_approval` says so: the service identity of the
connection ``airflow_api``, the requester themself, a person the auth manager does not let approve (the right
``PUT`` on :data:`streaming.roles.APPROVAL_RESOURCE` and on the DAG's required actions), or an answer after the
request expired. The request stays open for a person who may. An accepted answer goes to Airflow's own
``PATCH .../hitlDetails`` with the person's own credential (their bearer token or session cookie, on loopback), so
Airflow records them as the one who answered, checks its own permissions again, and resumes the task, which checks
the answer once more (:func:`spark_jobs.control.oncall.approval.decide`).

A form post whose ``Origin`` is another site is refused (the session cookie is ``SameSite=Lax`` too).
"""

# No `from __future__ import annotations`: FastAPI reads these routes' annotations, imported inside functions.

import datetime as dt
from html import escape

from streaming.roles import APPROVAL_RESOURCE, HEALTH_RESOURCE, ONCALL_DAG, SERVICE_USER

TASK = "act"
CHOICES = ("Approve", "Reject")


def _waiting(session, run_id: str | None = None) -> list[dict]:
    """The unanswered required actions of ``streaming_oncall`` (one run's, when ``run_id`` is given), with what the
    task recorded of the request (XCom ``approval_request``: its audit id, time and expiry)."""
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    query = (select(HITLDetail, TaskInstance, DagRun)
             .join(TaskInstance, HITLDetail.ti_id == TaskInstance.id)
             .join(DagRun, (DagRun.dag_id == TaskInstance.dag_id) & (DagRun.run_id == TaskInstance.run_id))
             .where(TaskInstance.dag_id == ONCALL_DAG, TaskInstance.task_id == TASK,
                    HITLDetail.responded_at.is_(None)))
    if run_id is not None:
        query = query.where(TaskInstance.run_id == run_id)
    found = []
    for detail, ti, run in session.execute(query).all():
        xcom = session.scalars(select(XComModel).where(
            XComModel.dag_id == ONCALL_DAG, XComModel.run_id == run.run_id, XComModel.task_id == TASK,
            XComModel.key == "approval_request")).first()
        asked = (XComModel.deserialize_value(xcom) if xcom is not None else None) or {}
        conf = run.conf or {}
        found.append({"run_id": run.run_id, "job": conf.get("job"), "action": conf.get("action"),
                      "reason": conf.get("reason"), "conf": dict(conf), "requested_by": run.triggering_user_name,
                      "audit_id": asked.get("audit_id"), "requested_at": asked.get("time"),
                      "expires_at": asked.get("expires_at"), "subject": detail.subject, "body": detail.body or "",
                      "state": str(ti.state.value if hasattr(ti.state, "value") else ti.state)})
    return sorted(found, key=lambda r: r["requested_at"] or "")


def waiting_requests(run_id: str | None = None) -> list[dict]:
    """The unanswered requests (one run's: an answer to it is judged, and audited, even after it expired)."""
    from airflow.utils.session import create_session

    with create_session() as session:
        return _waiting(session, run_id)


def open_requests() -> list[dict]:
    """The requests whose task still waits for an answer (what the page and ``/api/oncall`` list)."""
    return [r for r in waiting_requests() if r["state"] == "awaiting_input"]


def service_users() -> set[str]:
    """The service identity's logins: the connection ``airflow_api``'s, and the set-up one's name."""
    names = {SERVICE_USER}
    try:
        from airflow.models import Connection

        from streaming.hooks.airflow_api import API_CONN_ID

        login = Connection.get_connection_from_secrets(API_CONN_ID).login
        if login:
            names.add(login)
    except Exception:  # noqa: BLE001 - no such connection: the set-up name only
        pass
    return names


def _audit_refusal(request: dict, decision, message: str) -> dict:
    """One ``ops_audit`` row for a refused answer (the request stays open)."""
    from spark_jobs.control.oncall.audit import AuditRecord, append
    from spark_jobs.control.oncall.requests import table_versions
    from spark_jobs.model.lake import Lake
    from spark_jobs.registry import JOBS

    lake = Lake.at()
    job = str(request["job"])
    versions = table_versions(JOBS[job], lake) if job in JOBS else {}
    conf = request["conf"]
    record = AuditRecord(job=job, action=str(request["action"]),
                         parameters={k: v for k, v in conf.items() if k != "reason"},
                         reason=str(conf.get("reason") or ""), dry_run=False, triggered_by=request["requested_by"],
                         dag_id=ONCALL_DAG, run_id=request["run_id"], outcome="refused", message=message,
                         versions_before=versions, versions_after=versions, decision=decision.decision,
                         decided_by=decision.by, decided_at=decision.at,
                         expires_at=_instant(request["expires_at"]))
    row = append(lake, record)
    return {"audit_id": row["audit_id"]}


def _instant(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


def decide_request(run_id: str, choice: str, user, credential: str | None) -> tuple[int, dict]:
    """The logged-in ``user``'s answer ``choice`` to the request of ``run_id``: (HTTP status, what happened)."""
    from spark_jobs.control.oncall.approval import Decision, refuse_approval
    from streaming.access import may, may_dag

    if choice not in CHOICES:
        return 400, {"detail": f"choice must be one of {', '.join(CHOICES)}, not {choice!r}"}
    by, now = user.get_name(), dt.datetime.now(dt.timezone.utc)
    may_approve = may(user, "PUT", APPROVAL_RESOURCE) and may_dag(user, "PUT", ONCALL_DAG, "HITL_DETAIL")
    waiting = waiting_requests(run_id)
    request = waiting[0] if waiting else None
    requester = request and request["requested_by"]
    expires_at = _instant(request and request["expires_at"])
    if by in service_users():
        refused = Decision("service_identity", by, now)
    elif choice == "Approve" and request is not None:
        refused = refuse_approval(by, requester=requester, may_approve=may_approve, service_user=None,
                                  expires_at=expires_at, at=now)
    else:  # a rejection runs nothing: an approver's, or the requester withdrawing their own
        refused = None if may_approve or (request and by == requester) else Decision("not_an_approver", by, now)
    if refused is not None:  # audited when there is a request to audit it against
        message = refused.message(requester, expires_at)
        audit = _audit_refusal(request, refused, message) if request is not None else {}
        return 403, {"refused": refused.decision, "detail": message, "run_id": run_id, **audit}
    if request is None:
        return 404, {"detail": f"no request of {ONCALL_DAG} waits for an answer in run {run_id!r} (answered, "
                               "or no such run)"}
    return _answer(run_id, choice, credential, by)


def _answer(run_id: str, choice: str, credential: str | None, by: str) -> tuple[int, dict]:
    """Airflow's own answer route, called as the person (their credential), on loopback."""
    from airflow.configuration import conf

    from streaming.hooks.airflow_api import AirflowApi, AirflowApiError

    api = AirflowApi(f"http://127.0.0.1:{conf.getint('api', 'port', fallback=8080)}", token=credential, attempts=1)
    try:
        api.api("PATCH", f"/dags/{ONCALL_DAG}/dagRuns/{run_id}/taskInstances/{TASK}/-1/hitlDetails",
                {"chosen_options": [choice]})
    except AirflowApiError as error:
        return error.status or 502, {"detail": f"Airflow refused the answer: {error.detail or error}"}
    done = "approved: the action runs now" if choice == "Approve" else "rejected: nothing runs"
    return 200, {"decision": "approved" if choice == "Approve" else "rejected", "by": by, "run_id": run_id,
                 "detail": f"{done} ({by})"}


def credential_of(request) -> str | None:
    """The caller's own credential: the bearer token, else the UI's session cookie."""
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    header = request.headers.get("authorization") or ""
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.cookies.get(COOKIE_NAME_JWT_TOKEN)


def render_list(requests: list[dict], may_answer: bool, prefix: str, style: str, note: str = "",
                status: int = 200) -> str:
    """The page (in the health page's ``style``): each waiting request with its plan and the two buttons (posting to
    ``<prefix>/oncall/...``)."""
    items = "".join(
        f'<section class="request" data-run-id="{escape(r["run_id"])}" data-requested-by="{escape(r["requested_by"] or "")}">'
        f'<h2>{escape(r["subject"])}</h2><p class="sub">run {escape(r["run_id"])} · expires at '
        f'{escape(r["expires_at"] or "?")}</p><pre class="body">{escape(r["body"])}</pre>'
        f'<form method="post" action="{escape(prefix)}/oncall/{escape(r["run_id"])}/decide">'
        f'<button name="choice" value="Approve">Approve</button> <button name="choice" value="Reject">Reject</button>'
        f'</form></section>' for r in requests)
    if not requests:
        items = '<p class="note none">No on-call request waits for approval.</p>'
    hint = ("" if may_answer else '<p class="note cannot">You may not approve these requests: only a person with the '
            "approver's right may, never the requester (four eyes).</p>")
    shown = f'<p class="outcome status-{status}" data-status="{status}">{escape(note)}</p>' if note else ""
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>On-call approvals</title>'
            f"<style>{style} pre.body{{white-space:pre-wrap;background:#f7fafc;padding:8px}} .status-403{{color:#c53030;"
            f"font-weight:600}} .status-200{{color:#2f855a;font-weight:600}}</style></head><body>"
            f"<h1>On-call approvals</h1>{shown}{hint}{items}</body></html>")


def router(style: str = ""):
    """The routes above, for the health plugin's FastAPI app (which requires a login for all); ``style``: its CSS."""
    from fastapi import APIRouter, Body, Depends, Form, HTTPException, Request
    from fastapi.responses import HTMLResponse, JSONResponse

    from streaming.access import may_dag, requires, requires_login

    routes = APIRouter()
    reader = Depends(requires("GET", HEALTH_RESOURCE))

    def readable(user) -> None:
        if not may_dag(user, "GET", ONCALL_DAG, "HITL_DETAIL"):
            raise HTTPException(403, f"{user.get_name()} may not read the required actions of {ONCALL_DAG}")

    @routes.get("/oncall", response_class=HTMLResponse)
    def page(request: Request, user=reader) -> HTMLResponse:
        readable(user)
        may_answer = may_dag(user, "PUT", ONCALL_DAG, "HITL_DETAIL")
        return HTMLResponse(render_list(open_requests(), may_answer, request.scope.get("root_path", ""), style))

    @routes.get("/api/oncall")
    def listing(user=reader) -> JSONResponse:
        readable(user)
        return JSONResponse([{k: v for k, v in r.items() if k != "conf"} for r in open_requests()])

    @routes.post("/oncall/{run_id}/decide", response_class=HTMLResponse)
    def decide_form(run_id: str, request: Request, choice: str = Form(...),
                    user=Depends(requires_login())) -> HTMLResponse:
        origin = request.headers.get("origin")
        if origin and origin.rstrip("/") != f"{request.url.scheme}://{request.url.netloc}":
            raise HTTPException(403, f"a form posted from {origin} is not this Airflow's")
        status, said = decide_request(run_id, choice, user, credential_of(request))
        may_answer = may_dag(user, "PUT", ONCALL_DAG, "HITL_DETAIL")
        return HTMLResponse(render_list(open_requests(), may_answer, request.scope.get("root_path", ""), style,
                                        said["detail"], status), status_code=status)

    @routes.post("/api/oncall/{run_id}/decide")
    def decide_json(run_id: str, request: Request, choice: str = Body(..., embed=True),
                    user=Depends(requires_login())) -> JSONResponse:
        status, said = decide_request(run_id, choice, user, credential_of(request))
        return JSONResponse(said, status_code=status)

    return routes
