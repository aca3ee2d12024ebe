"""Four eyes on the on-call actions: which need approval (the registry's declarations, checked), how long a
request waits, what an answer decides, and the audit's approval columns on a table written before them."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_jobs.control.oncall.approval import (EXPIRY_ENV, approval_body, approval_expiry, approval_subject,
                                                 approvers, decide, needs_approval, refuse_approval)
from spark_jobs.control.oncall.audit import AuditRecord, append, arrow_schema, audit_path, read_rows
from spark_jobs.model.errors import RegistryError
from spark_jobs.model.lake import Lake
from spark_jobs.model.oncall import OncallAction, check_actions
from spark_jobs.registry import ONCALL_ACTION_SPECS, ONCALL_ACTIONS

NOW = dt.datetime(2026, 11, 25, 3, 0, tzinfo=dt.timezone.utc)
AT = dt.datetime(2026, 11, 25, 3, 4, 5, tzinfo=dt.timezone.utc)


def answer(option: str, user: str | None) -> dict:
    return {"chosen_options": [option], "params_input": {}, "responded_at": AT, "timedout": False,
            "responded_by_user": {"id": user, "name": user} if user else None}


def test_destructive_actions_need_approval_and_the_rest_run_at_once():
    assert {name for name in ONCALL_ACTIONS if needs_approval(name)} == {
        "reset_checkpoint", "rollback_table", "reprocess_from", "rollout_destructive"}
    assert list(ONCALL_ACTIONS) == list(ONCALL_ACTION_SPECS)  # the form's order and labels from the declarations
    assert not needs_approval("no_such_action")
    for name in ("reset_checkpoint", "rollback_table", "reprocess_from", "rollout_destructive"):
        assert approval_expiry(name, {}) == dt.timedelta(seconds=ONCALL_ACTION_SPECS[name]
                                                         .approval_expires_after_seconds) == dt.timedelta(hours=4)


def test_the_expiry_can_be_shortened_for_a_drill_never_lengthened():
    assert approval_expiry("rollback_table", {EXPIRY_ENV: "20"}) == dt.timedelta(seconds=20)
    assert approval_expiry("rollback_table", {EXPIRY_ENV: str(10 * 24 * 3600)}) == dt.timedelta(hours=4)
    for bad in ("soon", "0", "-5"):
        with pytest.raises(ValueError, match=EXPIRY_ENV):
            approval_expiry("rollback_table", {EXPIRY_ENV: bad})
    with pytest.raises(ValueError, match="needs no approval"):
        approval_expiry("restart", {})


@pytest.mark.parametrize("kwargs, message", [
    (dict(needs_approval=True), "approval_expires_after_seconds None must be a number of seconds"),
    (dict(needs_approval=True, approval_expires_after_seconds=0), "must be a number of seconds in"),
    (dict(needs_approval=True, approval_expires_after_seconds=2 * 24 * 3600), "in \\(0, 86400\\]"),
    (dict(needs_approval=True, approval_expires_after_seconds=True), "must be a number"),
    (dict(approval_expires_after_seconds=60), "only for an action that needs approval"),
])
def test_a_declaration_that_contradicts_itself_is_refused(kwargs, message):
    with pytest.raises(RegistryError, match=f"on-call action wipe: .*{message}"):
        OncallAction("wipe", "wipe it", **kwargs)


def test_an_action_declared_twice_is_refused():
    with pytest.raises(RegistryError, match="on-call action stop: declared twice"):
        check_actions([OncallAction("stop", "a"), OncallAction("stop", "b")])


def test_a_second_users_approval_runs_it():
    decision = decide(answer("Approve", "bob"), requester="alice", now=NOW)
    assert (decision.decision, decision.by, decision.at, decision.runs) == ("approved", "bob", AT, True)


def test_the_requesters_own_approval_is_refused():
    decision = decide(answer("Approve", "alice"), requester="alice", now=NOW)
    assert (decision.decision, decision.by, decision.runs, decision.outcome()) == (
        "self_approval", "alice", False, "refused")
    assert decision.message("alice").startswith("refused: the requester cannot approve their own request: alice "
                                                "requested this action and cannot approve it (four eyes): nothing was run")
    # A requester Airflow did not name cannot be told apart from the approver: refused too.
    unknown = decide(answer("Approve", "bob"), requester=None, now=NOW)
    assert (unknown.decision, unknown.runs) == ("self_approval", False)
    assert "the requester is unknown" in unknown.message(None)


def test_the_service_identity_and_an_approval_after_the_expiry_are_refused_when_the_task_resumes():
    service = decide(answer("Approve", "streaming_service"), "alice", service_user="streaming_service")
    assert (service.decision, service.runs, service.outcome()) == ("service_identity", False, "refused")
    assert service.message("alice").startswith("refused: streaming_service is the service identity of the connection "
                                               "airflow_api, not a person")
    late = decide(answer("Approve", "bob"), "alice", expires_at=AT - dt.timedelta(seconds=1))
    assert (late.decision, late.by, late.outcome()) == ("after_expiry", "bob", "refused")
    assert late.message("alice", AT - dt.timedelta(seconds=1)) == (
        "refused: the request expired at 2026-11-25T03:04:04Z, before bob's approval: nothing was run; ask again")
    assert decide(answer("Approve", "bob"), "alice", expires_at=AT, service_user="streaming_service").runs


@pytest.mark.parametrize("by, may_approve, expires_at, refused", [
    ("streaming_service", True, None, "service_identity"),  # first: even when the auth manager lets it
    ("alice", True, None, "self_approval"),
    ("oscar", False, None, "not_an_approver"),
    ("bob", True, NOW, "after_expiry"),
    ("bob", True, AT, None),
])
def test_who_may_approve_is_asked_in_this_order(by, may_approve, expires_at, refused):
    found = refuse_approval(by, requester="alice", may_approve=may_approve, service_user="streaming_service",
                            expires_at=expires_at, at=AT)
    assert (found and found.decision) == refused
    if found:
        assert found.message("alice").startswith("refused: ") and found.outcome() == "refused"


def test_a_rejection_or_an_expiry_runs_nothing():
    rejected = decide(answer("Reject", "bob"), requester="alice", now=NOW)
    assert (rejected.decision, rejected.by, rejected.runs, rejected.outcome()) == ("rejected", "bob", False, "rejected")
    own_reject = decide(answer("Reject", "alice"), requester="alice", now=NOW)  # withdrawing one's own request
    assert (own_reject.decision, own_reject.runs) == ("rejected", False)
    expired = decide({"error": "The Human-in-the-loop response timeout has passed without a response.",
                      "error_type": "timeout"}, requester="alice", now=NOW)
    assert (expired.decision, expired.by, expired.at, expired.runs, expired.outcome()) == (
        "expired", None, NOW, False, "expired")


def test_the_approver_reads_the_dry_runs_plan():
    body = approval_body(["restore cloudtrail_events to version 1", "spark-submit: python -m spark_jobs lake restore"],
                         requester="alice", reason="a bad deploy", expires_at=NOW, audit_id="a-1")
    assert "**Requested by** alice" in body and "**Reason**: a bad deploy" in body
    assert "1. restore cloudtrail_events to version 1\n2. spark-submit: python -m spark_jobs lake restore" in body
    assert "**Expires at** 2026-11-25T03:00:00Z (then nothing runs)" in body
    assert "alice asked for it and cannot approve it: refused, the requester cannot approve their own request" in body


def test_the_request_names_who_may_approve_and_escapes_what_markdown_would_drop():
    body = approval_body(["move the checkpoint to /lake/control/j/backups/<UTC time>-reset/checkpoint"],
                         requester="alice", reason="a <script> in the reason", expires_at=NOW, audit_id="a-1",
                         may_approve=["bob", "admin"])
    assert "**May approve**: bob, admin (not alice, who asked)" in body
    assert "1. move the checkpoint to /lake/control/j/backups/\\<UTC time\\>-reset/checkpoint" in body
    assert "**Reason**: a \\<script\\> in the reason" in body
    assert approval_subject("cloudtrail_etl", "rollback_table", "alice") == (
        "Approve rollback_table of cloudtrail_etl, asked by alice? (four eyes: not alice)")


def test_who_may_approve_is_every_other_user_allowed_to_answer_but_not_the_service_user():
    users = "admin:admin,alice:user,bob:user,vic:viewer,olga:op,streaming_service:user"
    assert approvers(users, "alice", "streaming_service") == ["admin", "bob", "olga"]
    assert approvers(users, None, None) == ["admin", "alice", "bob", "olga", "streaming_service"]
    assert approvers("admin:admin,streaming_service:user", "admin", "streaming_service") == []  # nobody: refused


def test_approval_columns_are_added_to_a_table_written_before_them(tmp_path):
    """An ops_audit of the first release (no approval columns) still reads, and the next append adds them."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    lake = Lake(tmp_path / "lake")
    old_schema = pa.schema([f for f in arrow_schema() if f.name not in ("decision", "decided_by", "decided_at",
                                                                         "expires_at")])
    old = AuditRecord(job="cloudtrail_etl", action="stop", parameters={}, reason="r", dry_run=False,
                      triggered_by="alice", outcome="succeeded", time=NOW).to_row()
    old = {k: v for k, v in old.items() if k in old_schema.names}
    write_deltalake(str(audit_path(lake)), pa.Table.from_pylist([old], schema=old_schema), mode="append")
    [before] = read_rows(lake)
    assert (before["outcome"], before["decision"], before["decided_by"]) == ("succeeded", None, None)

    append(lake, AuditRecord(job="cloudtrail_etl", action="rollback_table", parameters={}, reason="bad deploy",
                             dry_run=False, triggered_by="alice", outcome="succeeded", time=AT, decision="approved",
                             decided_by="bob", decided_at=AT, expires_at=AT + dt.timedelta(hours=4)))
    first, second = read_rows(lake)
    assert (first["action"], first["decision"], first["decided_at"]) == ("stop", None, None)
    assert (second["triggered_by"], second["decision"], second["decided_by"], second["decided_at"],
            second["expires_at"]) == ("alice", "approved", "bob", AT, AT + dt.timedelta(hours=4))
    assert DeltaTable(str(audit_path(lake))).schema().to_arrow().names[-4:] == [
        "decision", "decided_by", "decided_at", "expires_at"]
