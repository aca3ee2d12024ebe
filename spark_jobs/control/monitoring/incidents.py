"""Incidents: one alert when a condition starts, one when it ends, never one per check.

``<lake>/control/<job>/incidents.json`` (beside the checkpoint, never in it) holds the open incidents
of a job, the alerts not delivered yet (the *outbox*) and the last resolved incidents. Whoever
evaluates the job's health (the health sensor's trigger) calls :meth:`IncidentStore.update` with the
conditions it sees: a condition without an open incident opens one, and an open incident whose
condition was absent from :data:`CLEAR_CHECKS` evaluations in a row is resolved (one flapping check
does not resolve and reopen it). Each opening and resolution is put in the outbox in the same
atomic write; the deliverer sends what :meth:`pending` returns and then calls
:meth:`mark_delivered`. So a restarted sensor (a new trigger, another triggerer) sees the incident
already open and alerts nothing, and an alert whose delivery was cut short is sent by the next one.
A file lock serialises evaluators on one host; writes are atomic (temp file + rename).

Airflow's scheduler has no notion of this: a task's callbacks fire per task run, not per incident,
which is why the state lives here. No pyspark here.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from spark_jobs.control.monitoring.conditions import Condition

INCIDENTS_FILE = "incidents.json"
CLEAR_CHECKS = 2  # evaluations in a row without the condition before its incident resolves
KEEP_RESOLVED = 50


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds")


class IncidentStore:
    """The incidents of one job.

    The store needs a local control folder (a local or mounted lake): on another filesystem (an
    fsspec URL) it keeps nothing and opens no incident, so such a lake gets no alerts (its health is
    still reported).

    :param control_dir: ``<lake>/control/<job>``.
    """

    def __init__(self, control_dir: str | os.PathLike) -> None:
        self.local = "://" not in str(control_dir)
        self.control = Path(str(control_dir))
        self.path = self.control / INCIDENTS_FILE

    def _read(self) -> dict:
        if not self.local:
            return {"open": {}, "outbox": [], "resolved": []}
        try:
            data = json.loads(self.path.read_text())
        except (FileNotFoundError, NotADirectoryError, ValueError):
            data = {}
        return {"open": data.get("open") or {}, "outbox": data.get("outbox") or [],
                "resolved": data.get("resolved") or []}

    def _write(self, data: dict) -> None:
        self.control.mkdir(parents=True, exist_ok=True)
        temp = self.control / f".{INCIDENTS_FILE}.{uuid.uuid4().hex}.tmp"
        temp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        os.replace(temp, self.path)

    @contextlib.contextmanager
    def _locked(self):
        import fcntl

        self.control.mkdir(parents=True, exist_ok=True)
        with open(self.control / f".{INCIDENTS_FILE}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def open_incidents(self) -> list[dict]:
        """The open incidents, oldest first."""
        return sorted(self._read()["open"].values(), key=lambda i: i["opened_at"])

    def resolved(self) -> list[dict]:
        """The last resolved incidents, newest first."""
        return list(reversed(self._read()["resolved"]))

    def update(self, job: str, conditions: Iterable[Condition], now: datetime | None = None,
               state: str | None = None) -> list[dict]:
        """Open incidents for new conditions, resolve the ones whose condition is gone.

        :param job: the job's name (in the alerts).
        :param conditions: what the evaluation found now.
        :param state: the job's state now (said in a resolution).
        :returns: the alerts this update put in the outbox (``kind`` ``opened`` or ``resolved``).
        """
        if not self.local:
            return []
        now = now or datetime.now(timezone.utc)
        seen = {c.code: c for c in conditions}
        made: list[dict] = []
        with self._locked():
            data = self._read()
            for code, condition in seen.items():
                incident = data["open"].get(code)
                if incident is None:
                    incident = {"code": code, "job": job, "severity": condition.severity, "summary": condition.summary,
                                "action": condition.action, "opened_at": _iso(now), "id": uuid.uuid4().hex}
                    data["open"][code] = incident
                    made.append({**incident, "kind": "opened", "at": _iso(now)})
                incident.update(last_seen_at=_iso(now), last_summary=condition.summary, clear_checks=0)
            for code in list(data["open"]):
                if code in seen:
                    continue
                incident = data["open"][code]
                incident["clear_checks"] = incident.get("clear_checks", 0) + 1
                if incident["clear_checks"] < CLEAR_CHECKS:
                    continue
                del data["open"][code]
                incident["resolved_at"] = _iso(now)
                lasted = (now - datetime.fromisoformat(incident["opened_at"])).total_seconds()
                made.append({**incident, "kind": "resolved", "at": _iso(now),
                             "summary": f"resolved after {lasted:.0f} s: {incident['summary']}"
                                        + (f"; {job} is {state} now" if state else ""),
                             "action": "nothing to do"})
                data["resolved"] = (data["resolved"] + [incident])[-KEEP_RESOLVED:]
            if made or seen or data["open"]:
                for alert in made:
                    alert["alert_id"] = uuid.uuid4().hex
                data["outbox"].extend(made)
                self._write(data)
        return made

    def pending(self) -> list[dict]:
        """Alerts not delivered yet, oldest first."""
        return list(self._read()["outbox"])

    def mark_delivered(self, alert_ids: Iterable[str]) -> None:
        done = set(alert_ids)
        if not self.local:
            return
        with self._locked():
            data = self._read()
            data["outbox"] = [a for a in data["outbox"] if a["alert_id"] not in done]
            self._write(data)
