"""Four eyes on the on-call actions that destroy or rewrite data: what a second user is asked, and what their
answer decides (no Airflow, no pyspark).

``streaming_oncall`` asks through Airflow's human-in-the-loop (Browse > Required Actions, or the REST API
``PATCH /api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails``): the request's body is
the dry run's plan (:func:`approval_body`), its options ``Approve`` / ``Reject``, and it waits
:func:`approval_expiry` (the registry's :attr:`~spark_jobs.model.oncall.OncallAction.approval_expires_after_seconds`).
Airflow's HITL has an allow-list of respondents (``assigned_users``) but no way to exclude one. With the simple auth
manager (``make airflow``, ``docker-compose.yml``) the users are known, so the request names every other user who may
answer (:func:`approvers`: a role that may edit DAGs, not the requester, not the service user of the API connection):
Airflow itself refuses the requester's own answer (HTTP 403 "... is not a respondent for the task", shown on the
page where they pressed Approve) and the request stays open for another user. With another auth manager, or one that
lets everyone in, the approvers cannot be listed: the answer is checked when the task resumes (:func:`decide`), the
requester's own approval is refused (nothing runs, the refusal is audited, the task fails saying so).

With an auth manager that has roles (FAB by default, ``streaming.roles``), the approval is made on the streaming
health page (``/streaming-health/oncall``) or its JSON route, which asks the auth manager whether the person may
approve and refuses, auditing each refusal, before it hands the answer to Airflow as that person:
:func:`refuse_approval` says which refusal applies (the service identity, the requester, someone without the
approver's right, an answer after the expiry). The resumed task checks the answer again (:func:`decide`): an
answer given straight to Airflow's API by the requester, the service identity or after the expiry runs nothing.

A drill or a test may shorten the expiry with ``$STREAMING_ONCALL_APPROVAL_EXPIRY`` (seconds; it can only
shorten it: a longer value is ignored).
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

from spark_jobs.registry import ONCALL_ACTION_SPECS

APPROVE, REJECT = "Approve", "Reject"
EXPIRY_ENV = "STREAMING_ONCALL_APPROVAL_EXPIRY"
# The simple auth manager's roles that may answer a DAG's required actions (edit rights on the DAG).
ANSWERING_ROLES = ("user", "op", "admin")


def needs_approval(action: str) -> bool:
    """Whether ``action`` (not a dry run) waits for a second user."""
    spec = ONCALL_ACTION_SPECS.get(action)
    return spec is not None and spec.needs_approval


def approval_expiry(action: str, environ: dict | None = None) -> dt.timedelta:
    """How long a request for ``action`` waits for approval: the registry's, or ``$STREAMING_ONCALL_APPROVAL_EXPIRY``
    when that is shorter.

    :raises ValueError: ``action`` needs no approval, or the variable is not a positive number.
    """
    spec = ONCALL_ACTION_SPECS.get(action)
    if spec is None or not spec.needs_approval:
        raise ValueError(f"on-call action {action!r} needs no approval")
    seconds = float(spec.approval_expires_after_seconds)
    given = (os.environ if environ is None else environ).get(EXPIRY_ENV)
    if given:
        try:
            override = float(given)
        except ValueError:
            raise ValueError(f"${EXPIRY_ENV}={given!r} is not a number of seconds") from None
        if not override > 0:
            raise ValueError(f"${EXPIRY_ENV}={given!r} must be > 0")
        seconds = min(seconds, override)
    return dt.timedelta(seconds=seconds)


def approvers(users: str, requester: str | None, service_user: str | None = None) -> list[str]:
    """Who may approve a request of ``requester``: the users of the simple auth manager's setting ``users``
    (``name:role,...``, as ``AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS``) whose role may answer required actions,
    except the requester and ``service_user`` (the API connection's login: not a person)."""
    found = []
    for entry in users.split(","):
        name, _, role = entry.strip().partition(":")
        if name and role.split(":")[0].lower() in ANSWERING_ROLES and name not in (requester, service_user):
            found.append(name)
    return found


def approval_subject(job: str, action: str, requester: str | None) -> str:
    who = requester or "an unknown user"
    return f"Approve {action} of {job}, asked by {who}? (four eyes: not {who})"


def approval_body(plan: list[str], *, requester: str | None, reason: str, expires_at: dt.datetime,
                  audit_id: str, may_approve: list[str] | None = None) -> str:
    """What the approver reads (Markdown): who asks and why, who may approve, the dry run's plan, when the request
    expires. The plan's lines are escaped (a ``<`` would start an HTML tag the page drops)."""
    steps = "\n".join(f"{number}. {_markdown(line)}" for number, line in enumerate(plan, 1))
    who = requester or "an unknown user"
    allowed = (f"**May approve**: {', '.join(may_approve)} (not {who}, who asked)  \n" if may_approve else
               f"**May approve**: a user with the approver's right (not {who}, who asked), on the page "
               "Streaming health > On-call approvals  \n")
    return (f"**Requested by** {who}  \n**Reason**: {_markdown(reason)}  \n{allowed}"
            f"**Expires at** {_iso(expires_at)} (then nothing runs)  \n**Audit id** `{audit_id}`\n\n"
            f"What approving does (the dry run's plan):\n\n{steps}\n\n"
            f"{who} asked for it and cannot approve it: refused, the requester cannot approve their own request "
            "(four eyes). Reject: nothing runs.")


def _markdown(text: str) -> str:
    """``text`` shown as it is in Markdown: HTML's angle brackets escaped."""
    return text.replace("\\", "\\\\").replace("<", "\\<").replace(">", "\\>")


@dataclass(frozen=True)
class Decision:
    """What the second user's answer (or its absence) decides.

    :param decision: ``approved`` | ``rejected`` | ``expired`` | a refusal: ``self_approval`` (the requester),
        ``not_an_approver`` (no right to approve), ``service_identity`` (the API connection's login, not a person),
        ``after_expiry`` (an answer after the request expired).
    :param by: who answered (``None`` when it expired).
    :param at: when (the resume time when it expired).
    """

    decision: str
    by: str | None
    at: dt.datetime

    @property
    def runs(self) -> bool:
        return self.decision == "approved"

    def outcome(self) -> str:
        """The ``ops_audit`` outcome of a request that does not run."""
        return {"rejected": "rejected", "expired": "expired"}.get(self.decision, "refused")

    def message(self, requester: str | None, expires_at: dt.datetime | None = None) -> str:
        if self.decision == "rejected":
            return f"rejected by {self.by}: nothing was run"
        if self.decision == "expired":
            return "nobody approved the request before it expired: nothing was run"
        if self.decision == "self_approval" and requester is None:
            return (f"approval: the requester is unknown, so {self.by}'s approval cannot be told from their own "
                    "(four eyes): nothing was run; ask again as a logged-in user")
        if self.decision == "self_approval":
            return (f"refused: the requester cannot approve their own request: {self.by} requested this action and "
                    "cannot approve it (four eyes): nothing was run; ask again and have another user approve")
        if self.decision == "not_an_approver":
            return (f"refused: {self.by} may not approve destructive on-call actions (only the approver role may, "
                    "docs/identity.md): nothing was run; a user with that role must approve it")
        if self.decision == "service_identity":
            return (f"refused: {self.by} is the service identity of the connection airflow_api, not a person, and never "
                    "approves (four eyes are two people): nothing was run")
        if self.decision == "after_expiry":
            when = f" at {_iso(expires_at)}" if expires_at else ""
            return (f"refused: the request expired{when}, before {self.by}'s approval: nothing was run; ask again")
        return f"approved by {self.by} (requested by {requester})"


def refuse_approval(by: str, *, requester: str | None, may_approve: bool, service_user: str | None,
                    expires_at: dt.datetime | None, at: dt.datetime) -> Decision | None:
    """Why ``by`` may not approve a request of ``requester`` at ``at``, or None when they may.

    :param may_approve: the auth manager's answer: may ``by`` approve destructive on-call actions.
    :param service_user: the API connection's login (never a person).
    :param expires_at: when the request expires (None: unknown, not checked).
    """
    if service_user and by == service_user:
        return Decision("service_identity", by, at)
    if requester is None or by == requester:
        return Decision("self_approval", by, at)
    if not may_approve:
        return Decision("not_an_approver", by, at)
    if expires_at is not None and at > expires_at:
        return Decision("after_expiry", by, at)
    return None


def decide(event: dict, requester: str | None, now: dt.datetime | None = None, *, service_user: str | None = None,
           expires_at: dt.datetime | None = None) -> Decision:
    """The decision of an HITL resume event (what ``HITLOperator.execute_complete`` receives).

    :param event: ``{"chosen_options", "responded_by_user": {"id", "name"}, "responded_at", ...}``, or
        ``{"error_type": "timeout", ...}`` when the request expired unanswered.
    :param requester: the user who triggered the run (``dag_run.triggering_user_name``).
    :param service_user: the API connection's login: its approval is refused.
    :param expires_at: when the request expired: a later approval is refused.
    """
    now = now or dt.datetime.now(dt.timezone.utc)
    if "error" in event or event.get("error_type"):
        if event.get("error_type") == "timeout":
            return Decision("expired", None, now)
        raise ValueError(f"the approval ended with an error: {event.get('error')}")
    user = event.get("responded_by_user") or {}
    by = user.get("name") or user.get("id")
    at = event.get("responded_at") or now
    if isinstance(at, str):
        at = dt.datetime.fromisoformat(at)
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.timezone.utc)
    if event.get("timedout") and not by:  # a timeout that applied defaults (this DAG sets none)
        return Decision("expired", None, at)
    chosen = list(event.get("chosen_options") or [])
    if chosen != [APPROVE]:
        return Decision("rejected", by, at)
    if not by:
        raise ValueError("an approval without a user cannot be checked against the requester")
    if requester is None or requester in {user.get("name"), user.get("id")}:
        return Decision("self_approval", by, at)
    refused = refuse_approval(by, requester=requester, may_approve=True, service_user=service_user,
                              expires_at=expires_at, at=at)
    return refused or Decision("approved", by, at)


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
