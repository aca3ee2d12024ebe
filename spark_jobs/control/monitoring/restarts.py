"""How often a continuous job's driver was replaced: this supervision run, the restart budget's window, all time.

Counted from ``<control>/events.jsonl`` (:mod:`spark_jobs.control.supervision.state`), which outlives every
supervisor: an on-call ``restart``, a new DAG run, a cleared task or a restart of Airflow start a new supervisor
with counts of zero in ``supervisor.json``, while the job's night is still in its event log. A restart is a
``restart`` event: a driver that died or stalled and was started again, or taken over by its warm standby.
No pyspark here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class RestartCounts:
    """The job's restarts, each count over all its supervisors.

    :param this_run: since the running (or last) supervisor started.
    :param in_window: within the restart budget's window before now.
    :param all_time: every restart in the event log.
    :param take_overs: of all time, those a warm standby took over.
    :param window_seconds: the window of ``in_window``.
    :param last_at: the newest restart (ISO UTC).
    :param last_reason: its reason.
    """

    this_run: int = 0
    in_window: int = 0
    all_time: int = 0
    take_overs: int = 0
    window_seconds: float = 0.0
    last_at: str | None = None
    last_reason: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        """``2 this run, 3 in 30 min, 7 in all (1 taken over)``."""
        window = f"{self.window_seconds / 60:.0f} min"
        return (f"{self.this_run} this run, {self.in_window} in {window}, {self.all_time} in all"
                + (f" ({self.take_overs} taken over)" if self.take_overs else ""))


def restart_counts(events: list[dict], supervisor: dict | None, now: datetime, window_seconds: float) -> RestartCounts:
    """The counts of :class:`RestartCounts` from the job's events (oldest first) and its ``supervisor.json``."""
    restarts = [e for e in events if e.get("kind") == "restart" and e.get("time")]
    since_run = (supervisor or {}).get("started_at")
    window_start = now - timedelta(seconds=window_seconds)

    def at(event: dict) -> datetime:
        return datetime.fromisoformat(event["time"])

    last = restarts[-1] if restarts else {}
    return RestartCounts(
        this_run=sum(1 for e in restarts if since_run and at(e) >= datetime.fromisoformat(since_run)),
        in_window=sum(1 for e in restarts if at(e) >= window_start),
        all_time=len(restarts),
        take_overs=sum(1 for e in restarts if e.get("take_over")),
        window_seconds=window_seconds,
        last_at=last.get("time"),
        last_reason=last.get("reason"))
