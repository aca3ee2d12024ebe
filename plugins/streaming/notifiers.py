"""The notifiers that tell a person about the continuous jobs: supervisor events and health incidents.

Both write a log line always (in the task's log, so the run shows it) and POST the alert as JSON to
a webhook when one is configured: the ``webhook_url`` argument, else ``$SUPERVISOR_WEBHOOK_URL``, else
the Airflow connection ``supervisor_webhook`` (an HTTP connection: its host, with schema and port, is
the URL). A webhook that fails is logged, never raised: a broken alert channel must not stop the
supervisor that is keeping the job alive, nor the health checks.

- :class:`SupervisorEventNotifier`: a restart, a give-up (called by the ``supervise`` task).
- :class:`HealthAlertNotifier`: an incident opened or resolved (called from the health sensor's
  trigger in the triggerer, awaited: ``await HealthAlertNotifier(context=...)``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import urllib.error
import urllib.request

from airflow.sdk import BaseNotifier

WEBHOOK_ENV = "SUPERVISOR_WEBHOOK_URL"
WEBHOOK_CONN_ID = "supervisor_webhook"

log = logging.getLogger(__name__)


class _WebhookNotifier(BaseNotifier):
    """A notifier with the project's webhook configuration (see the module docstring).

    :param webhook_url: the URL to POST to; default ``$SUPERVISOR_WEBHOOK_URL``, else the connection
        ``webhook_conn_id``; none of them: the log line only.
    :param webhook_conn_id: an HTTP connection naming the webhook (looked up at notify time only).
    :param timeout: seconds the webhook may take.
    :param context: the context when the notifier is awaited (in the triggerer).
    """

    template_fields = ("webhook_url",)

    def __init__(self, *, webhook_url: str | None = None, webhook_conn_id: str = WEBHOOK_CONN_ID,
                 timeout: float = 10.0, context=None) -> None:
        super().__init__(context)
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

    def post(self, payload: dict, owner: str) -> None:
        """POST ``payload`` to the webhook when one is configured; a failure is logged, naming ``owner``."""
        url = self.resolve_url()
        if not url:
            return
        request = urllib.request.Request(url, data=json.dumps(payload, default=str).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                log.info("sent to the %s webhook (HTTP %s)", owner, response.status)
        except (urllib.error.URLError, OSError) as error:
            log.error("the %s webhook %s failed: %s", owner, url, error)


class SupervisorEventNotifier(_WebhookNotifier):
    """Send one supervisor event (a restart, a give-up) to the log and, if configured, a webhook.

    Call it with an Airflow context that holds the event under ``"supervisor_event"`` (a dict from
    ``events.jsonl``: ``time``, ``job``, ``kind``, ``reason``, ``outcome``, counts)::

        SupervisorEventNotifier()({**context, "supervisor_event": event})

    Parameters: see :class:`_WebhookNotifier`.
    """

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
        self.post(payload, "supervisor's")


class HealthAlertNotifier(_WebhookNotifier):
    """Tell a person that a job's health incident opened or resolved (once each: see
    :mod:`spark_jobs.control.monitoring.incidents`).

    The context holds the alert under ``"health_alert"``: ``kind`` (``opened`` / ``resolved``),
    ``job``, ``code``, ``severity``, ``summary``, ``action``, ``opened_at`` (and ``resolved_at``). The
    log line says what happened and what to do (an opened error at ERROR, a warning at WARNING, a
    resolution at INFO); the webhook gets the alert as JSON with ``dag_id`` and ``run_id``.
    Parameters: see :class:`_WebhookNotifier`.
    """

    def notify(self, context) -> None:
        alert = dict(context.get("health_alert") or {})
        line = (f"health alert {alert.get('kind')}: {alert.get('code')} of {alert.get('job')}: "
                f"{alert.get('summary')}; do: {alert.get('action')}")
        if alert.get("kind") == "resolved":
            log.info(line)
        else:
            (log.error if alert.get("severity") == "error" else log.warning)(line)
        self.post({**alert, "dag_id": context.get("dag_id"), "run_id": context.get("run_id")}, "health alert's")

    async def async_notify(self, context) -> None:
        """The same, from the triggerer: the blocking POST runs in a thread."""
        await asyncio.to_thread(self.notify, context)
