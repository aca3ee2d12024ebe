"""Where a driver's OpenLineage events go, sent so that no run fails, slows or hangs because of lineage.

Offline by default: the OpenLineage client's file transport writes each event as one JSON file into
``<lake>/_lineage/spark/`` (``$SPARK_JOBS_LINEAGE_DIR`` moves it; a lake on S3 keeps them in the bucket through
fsspec). When OpenLineage's own settings are present (``$OPENLINEAGE_URL`` with ``$OPENLINEAGE_ENDPOINT`` and
``$OPENLINEAGE_API_KEY``, ``$OPENLINEAGE_CONFIG`` naming an ``openlineage.yml``, or ``OPENLINEAGE__TRANSPORT__*``
variables) the client is configured by them instead: HTTP to Marquez or DataHub, Kafka, a composite. Emission is
off with ``SPARK_JOBS_LINEAGE=off`` or OpenLineage's ``OPENLINEAGE_DISABLED=true``.

:class:`LineageEmitter` never blocks its caller: :meth:`~LineageEmitter.emit` puts the event on a bounded queue
and returns; one daemon thread builds the client and sends, with the transport's own timeout. A full queue drops
the event with a log line; a failed send is a log line; :meth:`~LineageEmitter.close` waits a bounded time for the
last events (a run's ``COMPLETE``), then leaves what is unsent, saying how many.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

log = logging.getLogger("spark_jobs.lineage")

LINEAGE_ENV = "SPARK_JOBS_LINEAGE"
LINEAGE_DIR_ENV = "SPARK_JOBS_LINEAGE_DIR"
# Events waiting to be sent; past this many a new one is dropped (a backend down for a day costs memory, not a run).
MAX_PENDING = 1000
# How long a run's end waits for its last events before the driver exits without them.
CLOSE_TIMEOUT_SECONDS = 5.0
# One HTTP request's timeout: a slow backend holds the sending thread this long, never a batch.
HTTP_TIMEOUT_SECONDS = 5.0
SPARK_EVENTS = "spark"  # <lake>/_lineage/<this>/: the drivers' events
AIRFLOW_EVENTS = "airflow"  # <lake>/_lineage/<this>/: the Airflow provider's (make airflow, docker-compose)
AIRFLOW_NAMESPACE = "airflow"
_STOP = object()


def openlineage_configured(environ: Mapping[str, str]) -> bool:
    """Whether OpenLineage's own settings name a transport (then the client is configured by them)."""
    return bool(environ.get("OPENLINEAGE_URL") or environ.get("OPENLINEAGE_CONFIG")
                or any(key.startswith("OPENLINEAGE__TRANSPORT") for key in environ))


def lineage_disabled(environ: Mapping[str, str]) -> bool:
    return (environ.get(LINEAGE_ENV, "").strip().lower() in {"off", "false", "0"}
            or environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true")


def events_dir(lake_root: str | os.PathLike, environ: Mapping[str, str] | None = None) -> str:
    """The file transport's folder: ``$SPARK_JOBS_LINEAGE_DIR``, else ``<lake>/_lineage/spark``."""
    environ = os.environ if environ is None else environ
    return environ.get(LINEAGE_DIR_ENV) or f"{str(lake_root).rstrip('/')}/_lineage/{SPARK_EVENTS}"


def client_factory(lake_root: str | os.PathLike, environ: Mapping[str, str] | None = None) -> Callable[[], Any]:
    """What builds the sender of events (anything with ``emit(event)``), called in the sending thread:

    - ``$OPENLINEAGE_URL``: the client's HTTP transport (``$OPENLINEAGE_ENDPOINT``, default ``api/v1/lineage``;
      ``$OPENLINEAGE_API_KEY`` as a bearer token), :data:`HTTP_TIMEOUT_SECONDS` per request and one retry;
    - ``$OPENLINEAGE_CONFIG`` or ``OPENLINEAGE__TRANSPORT__*``: the OpenLineage client, configured by them;
    - else the file transport into :func:`events_dir`.
    """
    environ = dict(os.environ if environ is None else environ)
    if environ.get("OPENLINEAGE_URL"):
        def http():
            from openlineage.client.transport.http import HttpConfig, HttpTransport

            config = {"url": environ["OPENLINEAGE_URL"], "endpoint": environ.get("OPENLINEAGE_ENDPOINT") or
                      "api/v1/lineage", "timeout": HTTP_TIMEOUT_SECONDS,
                      "retry": {"total": 1, "connect": 1, "read": 1, "backoff_factor": 0.5}}
            if environ.get("OPENLINEAGE_API_KEY"):
                config["auth"] = {"type": "api_key", "apiKey": environ["OPENLINEAGE_API_KEY"]}
            return HttpTransport(HttpConfig.from_dict(config))

        return http
    if openlineage_configured(environ):
        def configured():
            from openlineage.client import OpenLineageClient

            return OpenLineageClient()

        return configured
    folder = events_dir(lake_root, environ)

    def to_files():
        from openlineage.client.transport.file import FileConfig, FileTransport

        if "://" not in folder or folder.startswith("file://"):
            Path(folder.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
        return FileTransport(FileConfig(log_file_path=f"{folder}/events"))

    return to_files


def airflow_provider_env(lake_root: str | os.PathLike, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings of Airflow's OpenLineage provider for an Airflow beside this lake (``make airflow``): its file
    transport into ``<lake>/_lineage/airflow/`` (the folder is made here for a local lake) and the job namespace
    ``airflow``; none when the environment configures the provider or OpenLineage itself (a backend)."""
    environ = os.environ if environ is None else environ
    if (any(key.startswith("AIRFLOW__OPENLINEAGE__TRANSPORT") or key.startswith("AIRFLOW__OPENLINEAGE__CONFIG")
            for key in environ) or openlineage_configured(environ)):
        return {}
    folder = f"{str(lake_root).rstrip('/')}/_lineage/{AIRFLOW_EVENTS}"
    if "://" not in folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
    return {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": f"{folder}/events"}),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": environ.get("AIRFLOW__OPENLINEAGE__NAMESPACE") or AIRFLOW_NAMESPACE}


def describe_destination(lake_root: str | os.PathLike, environ: Mapping[str, str] | None = None) -> str:
    """Where events go, for a log line (never a URL's credentials: only the transport's kind or the folder)."""
    environ = os.environ if environ is None else environ
    if openlineage_configured(environ):
        return "the transport of OpenLineage's settings (OPENLINEAGE_URL / OPENLINEAGE_CONFIG)"
    return events_dir(lake_root, environ)


class LineageEmitter:
    """Sends events from one daemon thread; :meth:`emit` returns at once.

    :param make_client: builds the sender, a transport or the OpenLineage client (called in the sending thread).
    :param max_pending: events that may wait; past them a new event is dropped.
    """

    def __init__(self, make_client: Callable[[], Any], max_pending: int = MAX_PENDING) -> None:
        self._make_client = make_client
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self.accepted = 0
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._send, name="openlineage-emitter", daemon=True)
        self._thread.start()

    @classmethod
    def from_settings(cls, lake_root: str | os.PathLike,
                      environ: Mapping[str, str] | None = None) -> "LineageEmitter | None":
        """The emitter the settings ask for, or None when lineage is off."""
        environ = os.environ if environ is None else environ
        if lineage_disabled(environ):
            return None
        return cls(client_factory(lake_root, environ))

    def emit(self, event: Any) -> bool:
        """Queue ``event``; False when the queue is full (a log line for the first drop and every 100th)."""
        try:
            self._queue.put_nowait(event)
            self.accepted += 1
            return True
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                log.warning("lineage: %d events wait to be sent (the backend is slow or down): dropped a %s event "
                            "(%d dropped so far)", self._queue.maxsize, getattr(event, "eventType", "?"), self.dropped)
            return False

    def close(self, timeout: float = CLOSE_TIMEOUT_SECONDS) -> int:
        """Wait up to ``timeout`` seconds for the queued events to be sent; returns how many were left unsent."""
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(_STOP, timeout=max(timeout, 0.0))
        except queue.Full:
            pass
        self._thread.join(max(deadline - time.monotonic(), 0.0))
        left = self.accepted - self.sent - self.failed
        if left:
            log.warning("lineage: %d events not sent within %.0f s (the backend is slow or down); the run goes on",
                        left, timeout)
        return left

    def _send(self) -> None:
        client = None
        while True:
            event = self._queue.get()
            if event is _STOP:
                return
            try:
                client = client or self._make_client()
                client.emit(event)
                self.sent += 1
            except Exception as error:  # noqa: BLE001 - lineage never fails a run
                self.failed += 1
                if self.failed == 1 or self.failed % 100 == 0:
                    log.warning("lineage: could not send a %s event (%d failures so far): %s",
                                getattr(event, "eventType", "?"), self.failed, str(error)[:300])
