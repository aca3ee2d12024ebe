"""SupervisorEventNotifier: a log line always, a webhook POST when configured, never a raise."""

from __future__ import annotations

import logging

from streaming.notifiers import WEBHOOK_ENV, SupervisorEventNotifier

EVENT = {"time": "2026-11-23T08:00:00.000+00:00", "job": "cloudtrail_etl", "kind": "give_up",
         "reason": "the driver exited with status 2: error: input folder '/x' does not exist",
         "outcome": "not restarted: 2 restarts within 900 s already (budget 2)", "restarts_in_window": 2}


def context(event=EVENT) -> dict:
    return {"supervisor_event": dict(event), "run_id": "scheduled__2026-11-23T08:00:00+00:00",
            "supervisor_state": {"state": "given_up", "consecutive_failures": 3}}


def test_posts_the_event_to_the_configured_webhook(webhook):
    url, posts = webhook

    SupervisorEventNotifier(webhook_url=f"{url}/hooks/oncall")(context())

    [(path, content_type, body)] = posts
    assert (path, content_type) == ("/hooks/oncall", "application/json")
    assert {k: body[k] for k in EVENT} == EVENT
    assert body["run_id"] == "scheduled__2026-11-23T08:00:00+00:00"
    assert body["supervisor"] == {"state": "given_up", "consecutive_failures": 3}


def test_webhook_url_comes_from_the_environment(webhook, monkeypatch):
    url, posts = webhook
    monkeypatch.setenv(WEBHOOK_ENV, f"{url}/from-env")

    SupervisorEventNotifier()(context({**EVENT, "kind": "restart"}))

    assert [(path, body["kind"]) for path, _, body in posts] == [("/from-env", "restart")]


def test_always_logs_a_line_and_a_give_up_at_error(webhook, caplog, monkeypatch):
    monkeypatch.delenv(WEBHOOK_ENV, raising=False)
    with caplog.at_level(logging.INFO, logger="streaming.notifiers"):
        SupervisorEventNotifier()(context())

    [record] = [r for r in caplog.records if r.name == "streaming.notifiers"]
    assert record.levelname == "ERROR"
    assert record.getMessage() == f"supervisor give_up of cloudtrail_etl: {EVENT['reason']} -> {EVENT['outcome']}"
    assert webhook[1] == []  # nothing configured: no POST


def test_a_failing_webhook_is_logged_not_raised(caplog):
    with socket_closed_port() as port, caplog.at_level(logging.INFO, logger="streaming.notifiers"):
        SupervisorEventNotifier(webhook_url=f"http://127.0.0.1:{port}/down", timeout=2)(context())

    messages = [r.getMessage() for r in caplog.records if r.name == "streaming.notifiers"]
    assert len(messages) == 2
    assert messages[1].startswith(f"the supervisor's webhook http://127.0.0.1:{port}/down failed:")


class socket_closed_port:
    """A loopback port nothing listens on."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    def __exit__(self, *exc) -> None:
        return None
