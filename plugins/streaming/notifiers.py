"""The notifier that tells a person about a continuous job's restarts and give-up.

A log line always (in the task's log, so the run shows it); a webhook POST of the event as JSON
when one is configured: the ``webhook_url`` argument, else ``$SUPERVISOR_WEBHOOK_URL``, else the
Airflow connection ``supervisor_webhook`` (an HTTP connection: its host, with schema and port, is
the URL). A webhook that fails is logged, never raised: a broken alert channel must not stop the
supervisor that is keeping the job alive.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request

from airflow.sdk import BaseNotifier

WEBHOOK_ENV = "SUPERVISOR_WEBHOOK_URL"
WEBHOOK_CONN_ID = "supervisor_webhook"

log = logging.getLogger(__name__)


class SupervisorEventNotifier(BaseNotifier):
    """Send one supervisor event (a restart, a give-up) to the log and, if configured, a webhook.

    Call it with an Airflow context that holds the event under ``"supervisor_event"`` (a dict from
    ``events.jsonl``: ``time``, ``job``, ``kind``, ``reason``, ``outcome``, counts)::

        SupervisorEventNotifier()({**context, "supervisor_event": event})

    :param webhook_url: the URL to POST the event to; default ``$SUPERVISOR_WEBHOOK_URL``, else the
        connection ``webhook_conn_id``; none of them: the log line only.
    :param webhook_conn_id: an HTTP connection naming the webhook (looked up at notify time only).
    :param timeout: seconds the webhook may take.
    """

    template_fields = ("webhook_url",)

    def __init__(self, *, webhook_url: str | None = None, webhook_conn_id: str = WEBHOOK_CONN_ID,
                 timeout: float = 10.0) -> None:
        super().__init__()
        self.webhook_url = webhook_url
        self.webhook_conn_id = webhook_conn_id
        self.timeout = timeout

    def resolve_url(self) -> str | None:
        """The webhook's URL, or None when none is configured."""
        if self.webhook_url:
            return self.webhook_url
        if os.environ.get(WEBHOOK_ENV):
            return os.environ[WEBHOOK_ENV]
        try:
            from airflow.sdk import BaseHook

            conn = BaseHook.get_connection(self.webhook_conn_id)
        except Exception:  # noqa: BLE001 - no such connection (or no task context): no webhook
            return None
        if not conn.host:
            return None
        if "://" in conn.host:
            return conn.host
        port = f":{conn.port}" if conn.port else ""
        return f"{conn.schema or 'https'}://{conn.host}{port}"

    def notify(self, context) -> None:
        event = dict(context.get("supervisor_event") or {})
        dag_run = context.get("dag_run")
        payload = {
            **event,
            "dag_id": getattr(context.get("dag"), "dag_id", None),
            "run_id": getattr(dag_run, "run_id", None) or context.get("run_id"),
            "supervisor": context.get("supervisor_state"),
        }
        line = (f"supervisor {event.get('kind', 'event')} of {event.get('job', '?')}: "
                f"{event.get('reason') or 'no reason given'} -> {event.get('outcome') or '?'}")
        # A give-up needs a person: say so at ERROR; a restart is the system healing itself.
        (log.error if event.get("kind") == "give_up" else log.warning)(line)
        url = self.resolve_url()
        if not url:
            return
        request = urllib.request.Request(url, data=json.dumps(payload, default=str).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                log.info("supervisor event sent to the webhook (HTTP %s)", response.status)
        except (urllib.error.URLError, OSError) as error:
            log.error("the supervisor's webhook %s failed: %s (the event is in events.jsonl)", url, error)
