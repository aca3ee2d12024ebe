"""The supervisor's state and event log, beside the checkpoint (never inside it).

``<control>/supervisor.json`` (rewritten atomically on every change)::

    {"job", "state": "starting|running|backing_off|held|waiting_for_lease|stopping|stopped|given_up",
     "consecutive_failures", "is_backing_off", "next_attempt_at", "restarts_in_window", "window_seconds",
     "max_restarts", "last_reason", "last_exit_code", "driver_pid", "waiting_for", "updated_at", ...}

``<control>/events.jsonl``: one JSON object per line, appended: ``time``, ``job``, ``kind``
(``start``, ``restart``, ``give_up``, ``stop``, ``held``, ``resume``, ``lease_wait``, ``lease_free``, ``standby``), ``reason``, ``outcome`` and the counts at that
moment. ``<control>`` is a local path or an fsspec URL. No pyspark here.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

import fsspec
from fsspec.implementations.local import LocalFileSystem

SUPERVISOR_FILE = "supervisor.json"
EVENTS_FILE = "events.jsonl"
STATES = ("starting", "running", "backing_off", "held", "waiting_for_lease", "stopping", "stopped", "given_up")
#: The states of a supervisor that runs a driver or will start one.
ACTIVE_SUPERVISOR_STATES = ("starting", "running", "backing_off", "held", "waiting_for_lease", "stopping")
#: The states of a supervisor whose task is ending: it was asked to stop, or gave up.
ENDING_SUPERVISOR_STATES = frozenset({"stopping", "stopped", "given_up"})
# "stopping": asked to stop (the DAG paused, the task stopped), the driver finishes its micro-batch; "stopped" follows.
# "held" / "resume": supervision paused (a driver that ended is not restarted) and resumed (spark_jobs.control.supervision.hold).
# "lease_wait" / "lease_free": another driver (a catch-up run) held the checkpoint's lease, so no driver was started
# until it let go; neither is a failure (spark_jobs.control.supervision.ownership).
# "standby": a warm standby started, or one that died while it waited was replaced (not a restart); a standby's
# take-over is a "restart" with take_over true (spark_jobs.control.supervision.supervisor); "take_over_failed": the
# driver ended while a standby ran, and the standby did not take the lease (a new driver is started instead).
# "rollout" ... "rollback": a rollout of a new version (spark_jobs.control.supervision.rollout, docs/deploying.md): its
# pre-flight started, refused or failed, the handover, the probation passed, a rollback (none of them a restart).
EVENT_KINDS = ("start", "restart", "give_up", "stop", "held", "resume", "lease_wait", "lease_free", "standby",
               "take_over_failed", "rollout", "rollout_refused", "rollout_failed", "handover", "probation_passed",
               "rollback", "rollout_reset", "rollout_done")
#: What ``supervisor.json``'s ``standby`` says: ``off`` (the job keeps none), ``absent`` (asked for, none runs
#: yet: it starts once the driver has committed), ``warming`` (started, not yet waiting), ``warm`` (waiting on the
#: lease, ready to take over).
STANDBY_STATES = ("off", "absent", "warming", "warm")


def utc_iso(moment: datetime | None = None) -> str:
    """``moment`` (default now) as ISO-8601 UTC with milliseconds."""
    return (moment or datetime.now(timezone.utc)).astimezone(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class SupervisorState:
    """What the supervisor of one job is doing (the Databricks-like counters, and more).

    :param job: the job's name.
    :param state: one of :data:`STATES`.
    :param consecutive_failures: failures since the last healthy run (reset by a long healthy run).
    :param is_backing_off: waiting before the next restart.
    :param next_attempt_at: when the next restart starts (ISO UTC) while backing off.
    :param restarts_in_window: restarts within the budget's window.
    :param window_seconds: the budget's window.
    :param max_restarts: restarts allowed within the window.
    :param last_reason: why the driver was last restarted (or given up on, or stopped).
    :param last_exit_code: the exit status of the last driver that ended.
    :param driver_pid: the running driver's process (the supervisor's child), if any.
    :param updated_at: the last write (ISO UTC); refreshed while the supervisor runs.
    :param supervisor_pid: the supervising process.
    :param started_at: when this supervisor started (ISO UTC).
    :param attempt: drivers started by this supervisor (1 for the first).
    :param restarts_total: restarts by this supervisor.
    :param running_since: when the current driver became healthy (ISO UTC).
    :param log_path: the drivers' log file.
    :param waiting_for: while ``waiting_for_lease``: who holds the lease (one line for people).
    :param waiting_since: when that wait began (ISO UTC).
    :param lease_waits: how many times this supervisor waited for another driver's lease (none is a restart).
    :param standby_pid: the warm standby's process, while one runs (``RestartPolicy.warm_standby``).
    :param standby: the standby's state, one of :data:`STANDBY_STATES`.
    :param standby_setting: whether the job keeps a standby, and who said so
        (:mod:`spark_jobs.control.supervision.job_settings`).
    :param standby_warm_since: since when the standby waits warm (ISO UTC).
    :param take_overs_total: drivers taken over by a warm standby under this supervisor.
    :param last_take_over_at: the last take-over (ISO UTC).
    :param last_take_over_failed: why the last standby that should have taken over did not, if one did not.
    """

    job: str
    window_seconds: float
    max_restarts: int
    state: str = "starting"
    consecutive_failures: int = 0
    is_backing_off: bool = False
    next_attempt_at: str | None = None
    restarts_in_window: int = 0
    last_reason: str | None = None
    last_exit_code: int | None = None
    driver_pid: int | None = None
    updated_at: str | None = None
    supervisor_pid: int | None = None
    started_at: str | None = None
    attempt: int = 0
    restarts_total: int = 0
    running_since: str | None = None
    log_path: str | None = None
    waiting_for: str | None = None
    waiting_since: str | None = None
    lease_waits: int = 0
    standby_pid: int | None = None
    standby: str = "off"
    standby_setting: str | None = None
    standby_warm_since: str | None = None
    take_overs_total: int = 0
    last_take_over_at: str | None = None
    last_take_over_failed: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _split(control_dir: str) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, path = fsspec.core.url_to_fs(str(control_dir))
    return fs, path.rstrip("/")


def write_supervisor_state(control_dir: str, state: SupervisorState) -> dict:
    """Write ``supervisor.json`` atomically (a reader sees the old or the new state); returns it."""
    if state.state not in STATES:
        raise ValueError(f"unknown supervisor state {state.state!r}; one of {', '.join(STATES)}")
    state.updated_at = utc_iso()
    data = state.to_dict()
    write_json_atomically(control_dir, SUPERVISOR_FILE, data)
    return data


def read_supervisor_state(control_dir: str) -> dict | None:
    """The last ``supervisor.json`` under ``control_dir`` (a path or fsspec URL); None if there is none."""
    return read_json(control_dir, SUPERVISOR_FILE)


def write_json_atomically(control_dir: str, name: str, data: dict) -> None:
    """Write ``<control_dir>/<name>`` as JSON so that a reader sees the old or the new content, never a part:
    a temp file and a rename on a local disk, one put on an object store."""
    payload = (json.dumps(data, sort_keys=True) + "\n").encode("utf-8")
    fs, base = _split(control_dir)
    path = f"{base}/{name}"
    if isinstance(fs, LocalFileSystem):
        os.makedirs(base, exist_ok=True)
        temp = f"{base}/.{name}.{uuid.uuid4().hex}.tmp"
        with open(temp, "wb") as handle:
            handle.write(payload)
        os.replace(temp, path)
    else:  # an object store's put is atomic
        fs.makedirs(base, exist_ok=True)
        fs.pipe_file(path, payload)


def read_json(control_dir: str, name: str) -> dict | None:
    """``<control_dir>/<name>`` as JSON; None if it is missing or not JSON (never written by
    :func:`write_json_atomically`, whose writes are whole)."""
    fs, base = _split(control_dir)
    try:
        with fs.open(f"{base}/{name}", "rb") as handle:
            return json.loads(handle.read().decode("utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def append_event(control_dir: str, event: dict) -> dict:
    """Append one event (``time`` is added when missing) to ``events.jsonl``; returns it."""
    if event.get("kind") not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {event.get('kind')!r}; one of {', '.join(EVENT_KINDS)}")
    return append_line(control_dir, EVENTS_FILE, event)


def read_events(control_dir: str) -> list[dict]:
    """Every event in ``events.jsonl``, oldest first (a torn last line is skipped)."""
    return read_lines(control_dir, EVENTS_FILE)


def append_line(control_dir: str, name: str, record: dict) -> dict:
    """Append ``record`` (``time`` is added when missing) as one JSON line to ``<control_dir>/<name>``; returns it."""
    record = {"time": utc_iso(), **record}
    line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode("utf-8")
    fs, base = _split(control_dir)
    path = f"{base}/{name}"
    if isinstance(fs, LocalFileSystem):
        os.makedirs(base, exist_ok=True)
        # One write of one line with O_APPEND: lines never interleave.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)
    else:  # object stores cannot append: rewrite (one writer per file at a time)
        fs.makedirs(base, exist_ok=True)
        old = fs.cat_file(path) if fs.exists(path) else b""
        fs.pipe_file(path, old + line)
    return record


def read_lines(control_dir: str, name: str) -> list[dict]:
    """Every JSON line of ``<control_dir>/<name>``, oldest first (a torn line is skipped); none when it is missing."""
    fs, base = _split(control_dir)
    try:
        text = fs.cat_file(f"{base}/{name}").decode("utf-8")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records
