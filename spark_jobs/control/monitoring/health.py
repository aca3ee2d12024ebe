"""One health summary per job, and the conditions that open an incident: shared by the alerting
trigger, ``python -m spark_jobs status`` and the health page, so all three always say the same.

:func:`check_job` reads the checkpoint (:func:`spark_jobs.control.checkpoint.inspect.inspect_checkpoint`:
status, last commit, backlog, the driver's lease, the supervisor's state), the job's newest rows of
``streaming_progress``, its open incidents and a continuous job's versions (the running one, the one on probation,
the last rollout: :mod:`spark_jobs.control.rollout.versions`), and returns a :class:`JobHealth`: a state for people,
the numbers behind it, and the :class:`Condition`\\ s the registry's ``AlertThresholds`` raise.

States (``JobHealth.state``):

===============  ==================================================================================
``healthy``      a driver is running and keeping up
``lagging``      a driver is running but falling behind: too many files wait, or its micro-batches
                 process rows slower than they arrive
``stalled``      the driver's process runs but commits nothing (paused, hung, or no commit for the
                 job's limit while input waits)
``dead``         the driver is gone without releasing its lease (the supervisor restarts it)
``failed``       the supervisor gave up, or the checkpoint is damaged: a person is needed
``idle``         no driver runs (a catch-up job between runs, or a paused continuous job)
``not_started``  the job never ran against this lake
===============  ==================================================================================

No pyspark here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from spark_jobs.control.monitoring.conditions import Condition
from spark_jobs.control.monitoring.incidents import IncidentStore
from spark_jobs.model.jobs import JobSpec

STATES = ("healthy", "lagging", "stalled", "dead", "failed", "idle", "not_started")
RUNNING = ("healthy", "in_flight", "lagging")  # checkpoint statuses with a live, committing driver


@dataclass
class JobHealth:
    """What :func:`check_job` found (``to_dict`` is ``status --json``'s per-job object)."""

    job: str
    state: str
    reason: str
    checkpoint_status: str
    checked_at: str
    last_commit_time: str | None = None
    last_commit_age_seconds: float | None = None
    latest_commit_batch: int | None = None
    backlog_files: int | None = None
    backlog_bytes: int | None = None
    backlog_age_seconds: float | None = None
    freshness_seconds: float | None = None
    event_time_lag_seconds: float | None = None
    quarantine_share: float | None = None
    quarantine_reasons: dict | None = None
    driver: dict | None = None
    supervisor: dict | None = None
    restarts_in_window: int | None = None
    max_restarts: int | None = None
    restarts_total: int | None = None
    restarts: dict | None = None
    standby: dict | None = None
    backoff: str | None = None
    supervision: str | None = None
    owner: str | None = None
    discovery: str | None = None
    last_batch: dict | None = None
    version: dict | None = None
    conditions: list[Condition] = field(default_factory=list)
    incidents: list[dict] = field(default_factory=list)
    report: dict = field(default_factory=dict, repr=False)

    def to_dict(self, with_report: bool = False) -> dict:
        out = {key: value for key, value in asdict(self).items() if key not in ("report", "conditions")}
        out["conditions"] = [c.to_dict() for c in self.conditions]
        if with_report:
            out["report"] = self.report
        return out


def _age(text: str | None, now: datetime) -> float | None:
    if not text:
        return None
    return round((now - datetime.fromisoformat(text)).total_seconds(), 1)


def _backoff(supervisor: dict | None) -> str | None:
    """The supervisor's backoff in words while it backs off (``backing off until <time> (<n> consecutive
    failures)``) or after it gave up; None otherwise."""
    if not supervisor:
        return None
    if supervisor.get("is_backing_off"):
        return (f"backing off until {supervisor.get('next_attempt_at')} "
                f"({supervisor.get('consecutive_failures')} consecutive failures)")
    if supervisor.get("state") == "given_up":
        return f"gave up: {supervisor.get('last_reason')}"
    return None


def supervision_text(supervisor: dict | None) -> str | None:
    """What the continuous job's supervisor does, in one line for people (None without a supervisor)."""
    if not supervisor:
        return None
    state = supervisor.get("state")
    if state == "waiting_for_lease":
        return (f"waiting since {supervisor.get('waiting_since')} for the lease held by {supervisor.get('waiting_for')} "
                "(not a failure: it starts the driver when that run lets go)")
    if state in ("backing_off", "given_up"):
        return _backoff(supervisor)
    if state == "held":
        return "supervision paused (on-call hold): a driver that ends is not restarted until it is resumed"
    if state == "stopping":
        return f"stopping ({supervisor.get('last_reason')}): the driver ends after its micro-batch"
    if state == "stopped":
        return f"stopped: {supervisor.get('last_reason')}"
    restarts = supervisor.get("restarts_in_window") or 0
    window = (supervisor.get("window_seconds") or 0) / 60
    return state + (f"; {restarts} restart{'s' if restarts != 1 else ''} in the last {window:.0f} min (last: "
                    f"{supervisor.get('last_reason')})" if restarts else "")


def duration_text(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 5 min``, ``2 d 4 h``."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


def owner_text(driver: dict | None, now: datetime) -> str:
    """Who holds the checkpoint now, with its uptime (:mod:`spark_jobs.control.supervision.ownership`)."""
    from spark_jobs.control.checkpoint.lease import LeaseInfo
    from spark_jobs.control.supervision.ownership import lease_owner

    if not driver or driver.get("expired"):
        return "no driver holds the checkpoint"
    lease = LeaseInfo.from_dict(driver)
    up = (now - datetime.fromisoformat(lease.started_at)).total_seconds()
    return f"{lease_owner(lease).describe()}, up {duration_text(up)}"


def standby_view(supervisor: dict | None) -> dict | None:
    """The warm standby as people see it (``supervisor.json``'s): its state (``off``, ``absent``, ``warming``,
    ``warm``), pid, the setting and who made it, since when it is warm, its last take-over and the last one that
    failed; None without a supervisor."""
    if not supervisor:
        return None
    running = supervisor.get("state") not in ("stopped", "given_up", "held")
    state = supervisor.get("standby") or "off"
    return {"state": state if running or state == "off" else "absent", "pid": supervisor.get("standby_pid"),
            "setting": supervisor.get("standby_setting"), "warm_since": supervisor.get("standby_warm_since"),
            "take_overs": supervisor.get("take_overs_total") or 0, "last_take_over_at": supervisor.get("last_take_over_at"),
            "last_take_over_failed": supervisor.get("last_take_over_failed")}


def standby_text(standby: dict | None) -> str:
    """``warm (pid 4711) since ...; last take-over ...``, for a table cell or a line; ``-`` without a supervisor."""
    if not standby:
        return "-"
    text = standby["state"] + (f" (pid {standby['pid']})" if standby.get("pid") else "")
    if standby.get("last_take_over_at"):
        text += f"; last take-over {standby['last_take_over_at']}"
    if standby.get("last_take_over_failed"):
        text += f"; a take-over FAILED {standby['last_take_over_failed']}"
    return text


def _backlog_grew(rows: list[dict]) -> bool:
    """Whether more input files waited at the last of these progress rows than at the first.

    Spark's ``processedRowsPerSecond < inputRowsPerSecond`` alone is not falling behind: it only says a
    batch took longer than the time since the trigger before it started, which every batch of a
    driver working off a backlog does under a short ``processingTime`` trigger (a restarted driver
    catching up, a slow machine). A job falls behind when, in the same window, the backlog grows."""
    first, last = rows[0].get("backlog_files"), rows[-1].get("backlog_files")
    return first is not None and last is not None and last > first


def quarantine_window(job: JobSpec, rows: list[dict]) -> tuple[int, int, int]:
    """The quarantined rows, all rows and the micro-batches with rows among the job's last
    ``AlertThresholds.quarantine_window_batches`` progress rows (oldest first): what ``quarantine_high`` weighs."""
    window = [r for r in rows[-job.alerts.quarantine_window_batches:] if r.get("rows")]
    carried = sum(sum(r["rows"].values()) for r in window)
    bad = sum(r["rows"].get(table, 0) for r in window for table in job.quarantine_tables)
    return bad, carried, len(window)


def _event_time_lag(last: dict | None) -> float | None:
    """How old the newest event of the last micro-batch was when its trigger started (its ``timestamp`` minus
    its ``event_time_max``); None for a job without event time (Spark reports it with a watermark only)."""
    if not last or last.get("event_time_max") is None or last.get("timestamp") is None:
        return None
    return round((last["timestamp"] - last["event_time_max"]).total_seconds(), 1)


def evaluate(job: JobSpec, report: dict, rows: list[dict]) -> list[Condition]:
    """The conditions the registry's ``AlertThresholds`` raise for a checkpoint report and the job's
    newest progress rows (oldest first)."""
    alerts = job.alerts
    status = report.get("status")
    backlog = report.get("backlog_files") or 0
    found: list[Condition] = []
    if status == "stalled":
        problem = next((p for p in report.get("problems", []) if p["code"] in ("no_progress", "driver_stalled")), None)
        found.append(Condition(
            "stalled", "error",
            f"{job.name} is stalled: " + (problem["explanation"] if problem else "its driver commits nothing"),
            (problem["action"] + "; " if problem else "")
            + f"if it keeps stalling, read {report.get('control')}/driver.log and the Spark UI of the driver"))
    recent = [r for r in rows[-alerts.slow_batches:]
              if r.get("input_rows_per_second") is not None and r.get("processed_rows_per_second") is not None]
    if (status in RUNNING and backlog > 0 and len(rows) >= alerts.slow_batches
            and len(recent) == alerts.slow_batches
            and all(r["processed_rows_per_second"] < r["input_rows_per_second"] for r in recent)
            and _backlog_grew(recent)):
        came = sum(r["input_rows_per_second"] for r in recent) / len(recent)
        went = sum(r["processed_rows_per_second"] for r in recent) / len(recent)
        found.append(Condition(
            "falling_behind", "warning",
            f"{job.name} is falling behind: its last {len(recent)} micro-batches processed {went:.2f} rows/s "
            f"while {came:.2f} rows/s arrived, and {backlog} input files wait"
            f" (up from {recent[0]['backlog_files']} {len(recent)} batches ago)",
            "see which part of the batch duration grew (health page); give the driver more cores or memory, "
            "or raise maxFilesPerTrigger so each trigger does more; the backlog shrinks once processing "
            "outpaces input"))
    limit = alerts.max_backlog_files if alerts.max_backlog_files is not None else job.health.max_pending_files
    if backlog > limit:
        found.append(Condition(
            "backlog_high", "warning",
            f"{backlog} input files wait for {job.name}, more than {limit} (AlertThresholds.max_backlog_files)",
            "check that the driver runs and commits (state, last commit); to catch up faster raise "
            "maxFilesPerTrigger or give the driver more resources; --latest-first if fresh data matters "
            "more than order"))
    bad, carried, window = quarantine_window(job, rows)
    if carried and bad / carried > alerts.max_quarantine_rate:
        tables = job.quarantine_tables
        found.append(Condition(
            "quarantine_high", "warning",
            f"{bad} of the {carried} rows of {job.name}'s last {window} micro-batches were quarantined "
            f"({bad / carried:.1%}, above {alerts.max_quarantine_rate:.1%})",
            f"see why: python -m spark_jobs sql --engine duckdb \"SELECT reason, count(*) FROM {tables[0]} GROUP BY "
            "reason ORDER BY 2 DESC\"; fix the producer of the bad files; good records are not lost"))
    supervisor = report.get("supervisor") or {}
    if supervisor.get("last_take_over_failed"):
        found.append(Condition(
            "take_over_failed", "error",
            f"{job.name}'s warm standby did not take over when the driver ended "
            f"({supervisor['last_take_over_failed']}); the supervisor started a new driver instead (a cold start)",
            f"read {report.get('control')}/standby.log and events.jsonl for why; the supervisor starts a new standby "
            "once the driver commits; if standbys keep failing, switch the standby off (on-call action "
            "set_warm_standby, or `python -m spark_jobs standby " + job.name + " off`) and fix the cause"))
    restarts = supervisor.get("restarts_in_window") or 0
    if supervisor.get("state") == "given_up" or restarts >= alerts.max_restarts_in_window:
        gave_up = supervisor.get("state") == "given_up"
        found.append(Condition(
            "restarts_over_budget", "error",
            f"{job.name} keeps failing: its supervisor restarted the driver {restarts} times within "
            f"{supervisor.get('window_seconds', 0):.0f} s (alert at {alerts.max_restarts_in_window}, gives up after "
            f"{supervisor.get('max_restarts')})" + ("; it gave up" if gave_up else "")
            + f"; last reason: {supervisor.get('last_reason')}",
            f"read {report.get('control')}/events.jsonl and driver.log for the cause and fix it"
            + (f"; then unpause {job.name}_continuous (it paused itself)" if gave_up else
               "; the supervisor keeps restarting it with backoff until the budget is spent")))
    return found


def _state(report: dict, conditions: list[Condition]) -> tuple[str, str]:
    status = report.get("status") or "unknown"
    problems = report.get("problems") or []
    supervisor = report.get("supervisor") or {}
    codes = {c.code for c in conditions}
    if status == "corrupt":
        first = next((p for p in problems if p["severity"] == "error"), None)
        return "failed", "the checkpoint is damaged: " + (first["explanation"] if first else "see checkpoint inspect")
    if supervisor.get("state") == "given_up" and status not in RUNNING:
        return "failed", f"the supervisor gave up: {supervisor.get('last_reason')}"
    if status == "stalled":
        return "stalled", next(c.summary for c in conditions if c.code == "stalled")
    if status == "dead":
        problem = next((p for p in problems if p["code"] == "driver_dead"), None)
        return "dead", problem["explanation"] if problem else "the driver is gone without releasing its lease"
    if status == "lagging" or codes & {"falling_behind", "backlog_high"}:
        reason = next((c.summary for c in conditions if c.code in ("falling_behind", "backlog_high")), None)
        lagging = next((p for p in problems if p["code"] == "lagging"), None)
        return "lagging", reason or (lagging["explanation"] if lagging else "input is piling up")
    if status in RUNNING:
        return "healthy", "a driver is running and keeping up"
    if status == "idle":
        return "idle", "no driver is running; the next run starts from the checkpoint"
    if status == "not_started":
        return "not_started", "no checkpoint yet: the job never ran against this lake"
    return "failed", f"the checkpoint could not be read ({status})"


def check_job(job: JobSpec, lake_root: str | Path | None, input_path: str | None = None,
              now: datetime | None = None, incidents: list[dict] | None = None) -> JobHealth:
    """The job's health now (see the module docstring).

    :param job: the registry job.
    :param lake_root: the lake (None: ``$LAKE_ROOT`` or ``./lake``).
    :param input_path: the job's input folder (default: as the runner resolves it).
    :param incidents: the job's open incidents (default: read from ``<lake>/control/<job>``).
    """
    from spark_jobs.control.checkpoint.inspect import inspect_checkpoint, lake_location
    from spark_jobs.control.discovery.backlog import discovery_text
    from spark_jobs.control.monitoring.history import read_progress
    from spark_jobs.control.monitoring.quarantine_reasons import quarantine_reasons
    from spark_jobs.model.lake import Lake
    from spark_jobs.control.monitoring.restarts import restart_counts
    from spark_jobs.control.rollout.versions import version_view
    from spark_jobs.control.supervision.state import read_events

    now = now or datetime.now(timezone.utc)
    lake = lake_location(lake_root)
    report = inspect_checkpoint(job, lake.url, input_path, now=now).to_dict()
    needed = max(job.alerts.slow_batches, job.alerts.quarantine_window_batches)
    rows = read_progress(lake.path, job.name, limit=needed, days=job.progress.retention_days, now=now,
                         columns=["batch_id", "timestamp", "input_rows_per_second", "processed_rows_per_second",
                                  "batch_duration_ms", "num_input_rows", "input_files", "rows", "backlog_files",
                                  "event_time_max"]) if lake.local else []
    conditions = evaluate(job, report, rows)
    state, reason = _state(report, conditions)
    supervisor = report.get("supervisor")
    if incidents is None:
        incidents = IncidentStore(report["control"]).open_incidents()
    last = rows[-1] if rows else None
    bad, carried, _ = quarantine_window(job, rows)
    started = report.get("status") != "not_started"  # a job that never ran owns no backlog yet
    discovery = report.get("discovery") or {}
    restarts = restart_counts(read_events(report["control"]), supervisor, now,
                              (supervisor or {}).get("window_seconds") or job.restart.window_seconds) \
        if job.continuous_trigger and started else None
    return JobHealth(
        job=job.name, state=state, reason=reason, checkpoint_status=report.get("status"),
        checked_at=now.isoformat(timespec="seconds"),
        last_commit_time=report.get("last_commit_time"),
        last_commit_age_seconds=_age(report.get("last_commit_time"), now),
        latest_commit_batch=report.get("latest_commit_batch"),
        backlog_files=report.get("backlog_files") if started else None,
        backlog_bytes=report.get("backlog_bytes") if started else None,
        backlog_age_seconds=discovery.get("oldest_waiting_age_seconds") if started else None,
        freshness_seconds=discovery.get("landing_to_commit_seconds"),
        event_time_lag_seconds=_event_time_lag(last),
        quarantine_share=round(bad / carried, 6) if carried else None,
        quarantine_reasons=quarantine_reasons(job, Lake.at(lake.path)) if lake.local and started else None,
        driver=report.get("driver"),
        supervisor=supervisor,
        restarts_in_window=(supervisor or {}).get("restarts_in_window"),
        max_restarts=(supervisor or {}).get("max_restarts") or (job.restart.max_restarts if job.continuous_trigger
                                                                  else None),
        restarts_total=(supervisor or {}).get("restarts_total"),
        restarts=restarts.to_dict() if restarts else None,
        standby=standby_view(supervisor),
        backoff=_backoff(supervisor),
        supervision=supervision_text(supervisor),
        owner=owner_text(report.get("driver"), now),
        discovery=discovery_text(report.get("discovery")),
        last_batch={**last, "timestamp": last["timestamp"].isoformat(),
                    "event_time_max": last["event_time_max"] and last["event_time_max"].isoformat()} if last else None,
        version=version_view(job, report["control"], report.get("driver"), report.get("latest_commit_batch"), now),
        conditions=conditions, incidents=incidents, report=report)
