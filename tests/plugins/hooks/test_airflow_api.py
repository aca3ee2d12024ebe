"""AirflowApi, the one client of Airflow's REST API: what it tries again, what it never sends twice, and what its
errors say (the call, never a secret), against a scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streaming.hooks.airflow_api import AirflowApi, AirflowApiError

PASSWORD = "s3cret-Pa55"


@pytest.fixture
def scripted():
    """A server answering each request with the next of ``answers`` (``(status, body)``, or ``"drop"``: the
    connection closed without an answer, as when a server dies mid-request); it records (method, path, body)."""
    answers: list = []
    seen: list[tuple[str, str, dict | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append((self.command, self.path, json.loads(body) if body else None))
            answer = answers.pop(0)
            if answer == "drop":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            status, payload = answer
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = answer  # noqa: N815 - the http.server API

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", answers, seen
    server.shutdown()
    server.server_close()


def test_a_get_refused_with_503_is_tried_again_and_a_404_is_not(scripted):
    url, answers, seen = scripted
    answers += [(503, "starting"), (503, "starting"), (200, {"dag_id": "d", "is_paused": False}), (404, "no dag x")]
    api = AirflowApi(url, attempts=3)

    assert api.dag("d") == {"dag_id": "d", "is_paused": False}
    with pytest.raises(AirflowApiError) as raised:
        api.dag("x")

    assert [path for _, path, _ in seen] == ["/api/v2/dags/d"] * 3 + ["/api/v2/dags/x"]
    assert (raised.value.status, raised.value.retryable) == (404, False)
    assert str(raised.value) == f"GET {url}/api/v2/dags/x answered 404: no dag x"


def test_a_post_whose_answer_was_lost_is_not_sent_again_but_a_patch_is(scripted):
    url, answers, seen = scripted
    answers += ["drop", "drop", (200, {"is_paused": True}), "drop"]
    api = AirflowApi(url, attempts=3)

    assert api.set_paused("d", True) == {"is_paused": True}
    with pytest.raises(AirflowApiError) as raised:
        api.trigger("d")  # a second POST could trigger a second run

    assert [method for method, _, _ in seen] == ["PATCH", "PATCH", "PATCH", "POST"]
    assert str(raised.value).startswith(f"POST {url}/api/v2/dags/d/dagRuns: cannot reach Airflow's REST API")
    assert raised.value.retryable is False


def test_a_post_refused_with_429_is_tried_again_a_500_is_not(scripted):
    url, answers, seen = scripted
    answers += [(429, "slow down"), (200, {"dag_run_id": "manual__1"}), (500, "boom")]
    api = AirflowApi(url, attempts=3)

    assert api.trigger("d", {"x": 1}) == "manual__1"
    with pytest.raises(AirflowApiError, match="answered 500: boom$"):
        api.trigger("d")

    assert [(method, body) for method, _, body in seen] == [
        ("POST", {"logical_date": None, "conf": {"x": 1}})] * 2 + [("POST", {"logical_date": None, "conf": {}})]


def test_a_refused_connection_is_tried_again_whatever_the_method_and_the_error_names_the_call():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    api = AirflowApi(f"http://127.0.0.1:{port}", attempts=2)

    with pytest.raises(AirflowApiError) as raised:
        api.clear_task("d", "r", "t")

    assert str(raised.value).startswith(f"POST http://127.0.0.1:{port}/api/v2/dags/d/clearTaskInstances: cannot "
                                        f"reach Airflow's REST API at http://127.0.0.1:{port}")
    assert str(raised.value).endswith("(after 2 attempts)")


def test_a_refused_login_names_the_call_and_neither_its_message_nor_the_log_holds_the_password(scripted, caplog):
    url, answers, seen = scripted
    echo = {"detail": [{"type": "string_too_short", "loc": ["body", "password"], "input": PASSWORD}]}
    answers += [(503, echo), (422, echo)]  # FastAPI's validation errors echo what was sent

    with caplog.at_level(logging.DEBUG), pytest.raises(AirflowApiError) as raised:
        AirflowApi.login(url, "alice", PASSWORD, attempts=2)

    assert seen == [("POST", "/auth/token", {"username": "alice", "password": PASSWORD})] * 2
    assert str(raised.value).startswith(f"POST {url}/auth/token answered 422: ")
    assert '"input": "***"' in raised.value.detail
    assert PASSWORD not in str(raised.value) + raised.value.detail
    assert "answered 503" in caplog.text and PASSWORD not in caplog.text  # the retry's log line


def test_every_run_is_read_page_by_page(scripted):
    url, answers, seen = scripted
    answers += [(200, {"dag_runs": [{"dag_run_id": str(i)} for i in range(100)]}),
                (200, {"dag_runs": [{"dag_run_id": "100"}]})]

    runs = AirflowApi(url).runs("d", state="running")

    assert [r["dag_run_id"] for r in runs] == [str(i) for i in range(101)]
    assert [path for _, path, _ in seen] == [
        "/api/v2/dags/d/dagRuns?order_by=id&limit=100&offset=0&state=running",
        "/api/v2/dags/d/dagRuns?order_by=id&limit=100&offset=100&state=running"]
