"""One look at last night: a job's timeline of catch-up and backfill runs (what each loaded, or why it failed),
incidents, supervisor events (starts, restarts, give-ups, stops, holds, waits for another driver's lease) and
on-call actions (who asked, who approved), in time order, from the records that already exist.

Sources, all beside the checkpoint or in the lake:

- ``<lake>/control/<job>/runs.jsonl``: every try of a catch-up or backfill run that ended, with the files and rows
  its micro-batches recorded in ``streaming_progress``, or its reason (:mod:`spark_jobs.control.monitoring.runs`);
- ``<lake>/control/<job>/events.jsonl``: the supervisor's events (:mod:`spark_jobs.control.supervision.state`);
- ``<lake>/control/<job>/incidents.json``: open incidents and the last resolved ones
  (:mod:`spark_jobs.control.monitoring.incidents`): an entry when one opened and one when it resolved;
- ``ops_audit``: every on-call action on the job (:mod:`spark_jobs.control.oncall.audit`), with its requester, its
  approver or rejecter and its outcome.

The health page (:mod:`streaming.health_page`) shows it per job. No pyspark here.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake

log = logging.getLogger("spark_jobs")

TIMELINE_ENTRIES = 40  # the newest entries shown


@dataclass(frozen=True)
class TimelineEntry:
    """One thing that happened to a job.

    :param at: when (UTC).
    :param kind: ``catch-up`` | ``backfill`` (a run) | ``incident`` | ``resolved`` | ``start`` | ``restart`` |
        ``give_up`` | ``stop`` | ``held`` | ``resume`` | ``lease_wait`` | ``lease_free`` | ``standby`` | ``rollout`` |
        ``rollout_refused`` | ``rollout_failed`` | ``handover`` | ``probation_passed`` | ``rollback`` |
        ``rollout_reset`` | ``rollout_done`` (a destructive rollout's) | ``oncall`` (a
        supervisor event's own kind for the supervisor's; a standby's take-over is a ``restart`` that says so).
    :param summary: one line for people.
    :param requested_by: who asked: an on-call action's requester, the Airflow user who triggered a run.
    :param decided_by: who approved or rejected it.
    :param outcome: a run's or an on-call action's outcome (``succeeded``, ``failed``, ``rejected``, ...), an
        incident's severity, or a supervisor event's outcome.
    :param rows: the rows a run loaded (every table).
    :param files: the input files a run read.
    """

    at: datetime
    kind: str
    summary: str
    requested_by: str | None = None
    decided_by: str | None = None
    outcome: str | None = None
    rows: int | None = None
    files: int | None = None

    def to_dict(self) -> dict:
        return {**asdict(self), "at": self.at.isoformat()}


def _time(text) -> datetime | None:
    if isinstance(text, datetime):
        moment = text
    else:
        try:
            moment = datetime.fromisoformat(str(text))
        except ValueError:
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _count(number: int, one: str, many: str | None = None) -> str:
    return f"{number:,} {one if number == 1 else many or one + 's'}"


def _took(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def run_entries(job: JobSpec, lake: Lake) -> list[TimelineEntry]:
    """The catch-up and backfill runs of the job's DAGs (each try that ended)."""
    from spark_jobs.control.monitoring.runs import read_runs

    entries = []
    for run in read_runs(str(lake.control_path(job.name))):
        at = _time(run.get("time"))
        if at is None:
            continue
        started = _time(run.get("started_at"))
        took = f", {_took((at - started).total_seconds())}" if started is not None and at >= started else ""
        what = f"{run.get('kind')} run {run.get('run_id')}" + (f" (try {run['try_number']}{took})"
                                                               if (run.get("try_number") or 1) > 1 else
                                                               f" ({took[2:]})" if took else "")
        outcome = run.get("outcome")
        rows = run.get("rows") or {}
        if outcome == "succeeded":
            loaded = ", ".join(f"{_count(count, 'row')} into {table}" for table, count in rows.items() if count)
            files = run.get("files") or 0
            summary = (f"{what}: {loaded or 'no row'} from {_count(files, 'file')} in "
                       f"{_count(run.get('batches') or 0, 'micro-batch', 'micro-batches')}" if files or loaded
                       else f"{what}: nothing new to read")
        elif outcome == "refused":  # checked and not run: no try to tell of
            summary = f"{run.get('kind')} refused: {run.get('reason') or 'no reason recorded'} (run {run.get('run_id')})"
        else:
            summary = (f"{what} failed" + (" (Airflow tries it again)" if outcome == "retrying" else "")
                       + f": {run.get('reason') or 'no reason recorded'}")
        requested_by = run.get("requested_by")
        summary += f"; asked by {requested_by}" if requested_by else ""
        entries.append(TimelineEntry(at, str(run.get("kind")), summary, requested_by=requested_by, outcome=outcome,
                                     rows=sum(rows.values()), files=run.get("files")))
    return entries


# The on-call actions that ask the supervisor for each kind of its events (``held`` names its hold's author itself):
# ``restart`` clears the supervising task (its supervisor stops, a new one starts).
ASKED_BY_ACTIONS = {"stop": ("stop", "restart"), "resume": ("resume_supervision",),
                    "start": ("restart", "resume_supervision")}
ASKED_WITHIN = timedelta(minutes=15)  # an action's effect follows it by its wait at most (stop_timeout: 5 min)


def _who_asked(job: JobSpec, event: dict, kind: str, at: datetime, actions) -> tuple[str | None, str]:
    """Who asked for a supervisor event: its own ``asked_by``, a hold's author, else the requester of the latest
    on-call action of that kind that succeeded in the quarter hour before it (``actions()``: the job's audit rows);
    and the words the timeline adds. A stop nobody asked for through on-call came from Airflow (a pause of the DAG,
    its task cleared or marked): Airflow's audit log has its user, which a task cannot read."""
    by = event.get("asked_by") or (event.get("hold") or {}).get("by")
    if by is None and kind in ASKED_BY_ACTIONS:
        asked = [row for row in actions() if row["action"] in ASKED_BY_ACTIONS[kind] and not row["dry_run"]
                 and row["outcome"] == "succeeded" and at - ASKED_WITHIN <= _time(row["time"]) <= at]
        if asked:
            row = max(asked, key=lambda row: _time(row["time"]))
            return row["triggered_by"], f"; asked by {row['triggered_by']} (on-call {row['action']})"
    if by is not None:
        return by, f"; asked by {by}"
    if kind == "stop":
        return None, (f"; asked from Airflow, not through on-call: a pause of {job.name}_continuous or a stop of its "
                      "task (Browse > Audit Log names the user)")
    return None, ""


def supervisor_entries(job: JobSpec, lake: Lake) -> list[TimelineEntry]:
    from spark_jobs.control.oncall.audit import read_rows
    from spark_jobs.control.supervision.state import read_events

    rows: list[dict] | None = None

    def actions() -> list[dict]:  # the job's on-call actions, read once, only when an event needs them
        nonlocal rows
        if rows is None:
            rows = [row for row in read_rows(lake) if row["job"] == job.name]
        return rows

    entries = []
    for event in read_events(str(lake.control_path(job.name))):
        at = _time(event.get("time"))
        if at is None:
            continue
        kind = str(event.get("kind") or "event")
        counts = (f" ({event['restarts_in_window']}/{event['max_restarts']} restarts in the window)"
                  if kind in ("restart", "give_up") and event.get("max_restarts") is not None else "")
        what = "take-over by the warm standby" if kind == "restart" and event.get("take_over") else kind.replace("_", " ")
        by, asked = _who_asked(job, event, kind, at, actions)
        entries.append(TimelineEntry(at, kind, f"{what}: {event.get('reason') or ''}{counts}{asked}",
                                     requested_by=by, outcome=event.get("outcome")))
    return entries


def incident_entries(job: JobSpec, lake: Lake) -> list[TimelineEntry]:
    from spark_jobs.control.monitoring.incidents import IncidentStore

    store = IncidentStore(lake.control_path(job.name))
    entries = []
    for incident in [*store.open_incidents(), *store.resolved()]:
        opened = _time(incident.get("opened_at"))
        if opened is not None:
            entries.append(TimelineEntry(opened, "incident", f"incident {incident['code']} opened: "
                                         f"{incident.get('summary') or ''}", outcome=incident.get("severity")))
        resolved = _time(incident.get("resolved_at")) if incident.get("resolved_at") else None
        if resolved is not None:
            entries.append(TimelineEntry(resolved, "resolved", f"incident {incident['code']} resolved",
                                         outcome=incident.get("severity")))
    return entries


def oncall_entries(job: JobSpec, lake: Lake) -> list[TimelineEntry]:
    from spark_jobs.control.oncall.audit import read_rows

    entries = []
    for row in read_rows(lake):
        if row["job"] != job.name:
            continue
        decision = row.get("decision")
        who = f"asked by {row['triggered_by'] or 'an unknown user'}"
        if decision in ("approved", "rejected", "self_approval"):
            who += f", {'approval refused to' if decision == 'self_approval' else decision + ' by'} {row['decided_by']}"
        elif decision == "expired":
            who += ", expired unanswered"
        dry = " (dry run)" if row["dry_run"] else ""
        entries.append(TimelineEntry(row["time"], "oncall", f"on-call {row['action']}{dry}: {row['outcome']}; {who}; "
                                     f"reason: {row['reason']}", requested_by=row["triggered_by"],
                                     decided_by=row.get("decided_by"), outcome=row["outcome"]))
    return entries


def job_timeline(job: JobSpec, lake: Lake, limit: int = TIMELINE_ENTRIES) -> list[TimelineEntry]:
    """The job's newest ``limit`` entries, oldest first. A source that cannot be read is left out (logged):
    the page shows what can be read."""
    entries: list[TimelineEntry] = []
    for source in (run_entries, supervisor_entries, incident_entries, oncall_entries):
        try:
            entries += source(job, lake)
        except Exception as exc:  # noqa: BLE001 - one unreadable record must not hide the others
            log.warning("timeline of %s: %s failed: %s", job.name, source.__name__, exc)
    entries.sort(key=lambda entry: entry.at)
    return entries[-limit:]
