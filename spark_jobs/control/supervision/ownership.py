"""Who owns a job's checkpoint now: the continuous driver, a catch-up run, an on-call action, or nobody.

A job has one checkpoint and one single-writer lease (:mod:`spark_jobs.control.checkpoint.lease`); its
continuous DAG and its catch-up DAG both run drivers on it. They take turns instead of fighting:

- the supervisor of ``<job>_continuous`` starts no driver while another live driver holds the lease; it
  waits (state ``waiting_for_lease``) and tells whom it waits for (:func:`lease_owner`);
- a catch-up run does nothing while the continuous job owns the checkpoint (:func:`continuous_owner`): its
  driver holds the lease, or its supervisor is active and will start one.

The owner is named from the lease: its pid, host and start, the trigger its driver runs (``details.trigger``),
and, on this host, the Airflow task that started it (the ``AIRFLOW_CTX_*`` variables every Airflow task sets in
its environment, which its spark-submit and driver inherit: read from ``/proc/<pid>/environ``, the same user's
processes only). No pyspark, no Airflow.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

import psutil

from spark_jobs.control.checkpoint.lease import LeaseInfo, read_lease
from spark_jobs.control.supervision.state import read_supervisor_state

# A supervisor refreshes supervisor.json every 30 s while it runs (and while it waits); older than this and it is gone.
SUPERVISOR_FRESH_SECONDS = 120.0
# The states of a supervisor that runs a driver or will start one.
ACTIVE_SUPERVISOR_STATES = ("starting", "running", "backing_off", "held", "waiting_for_lease", "stopping")
AVAILABLE_NOW = "available-now"
# The exit status of a driver refused by the lease (``LeaseHeld``: another live driver holds the checkpoint).
LEASE_HELD_EXIT_STATUS = 3
_CONTEXT = {"AIRFLOW_CTX_DAG_ID": "dag_id", "AIRFLOW_CTX_DAG_RUN_ID": "run_id", "AIRFLOW_CTX_TASK_ID": "task_id",
            "AIRFLOW_CTX_TRY_NUMBER": "try_number"}


@dataclass(frozen=True)
class Owner:
    """The holder of a job's lease, for people.

    :param kind: ``continuous`` (a streaming trigger), ``catch-up`` (available-now), ``on-call`` (an action of
        ``streaming_oncall`` holding it, e.g. ``reset_checkpoint``) or ``driver`` (anything else).
    :param pid: the holding process.
    :param host: its host.
    :param since: when it took the lease (ISO UTC).
    :param generation: the lease's generation.
    :param trigger: the driver's trigger, if it said.
    :param dag_id: the Airflow DAG whose task started it (same host only).
    :param run_id: that DAG run.
    :param task_id: that task.
    :param try_number: that task's try.
    """

    kind: str
    pid: int
    host: str
    since: str
    generation: int
    trigger: str | None = None
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    try_number: str | None = None

    @property
    def role(self) -> str:
        """``the continuous driver``, ``the catch-up run``, ``the on-call action`` or ``a driver``."""
        return {"continuous": "the continuous driver", "catch-up": "the catch-up run", "on-call": "the on-call action",
                "driver": "a driver"}[self.kind]

    @property
    def started_by(self) -> str:
        """`` (run R of cloudtrail_etl_continuous)`` when an Airflow task started it, else empty."""
        return f" (run {self.run_id} of {self.dag_id})" if self.dag_id and self.run_id else ""

    def describe(self) -> str:
        """``the continuous driver pid 123 on host h since T (run R of cloudtrail_etl_continuous)``."""
        return f"{self.role} pid {self.pid} on host {self.host} since {self.since}{self.started_by}"

    def to_dict(self) -> dict:
        return asdict(self)


def airflow_context(pid: int) -> dict[str, str]:
    """The Airflow task that started ``pid`` (``dag_id``, ``run_id``, ``task_id``, ``try_number``), read from its
    environment; empty when it was not started by a task, or cannot be read (another host or user, gone)."""
    try:
        environ = psutil.Process(pid).environ()
    except psutil.Error:
        return {}
    return {key: environ[name] for name, key in _CONTEXT.items() if name in environ}


def lease_owner(lease: LeaseInfo) -> Owner:
    """Who holds ``lease`` (see :class:`Owner`)."""
    details = lease.details or {}
    trigger = details.get("trigger")
    context = airflow_context(lease.pid) if lease.alive_locally() else {}
    dag = context.get("dag_id") or ""
    if details.get("holder", "").startswith("streaming_oncall") or dag == "streaming_oncall":
        kind = "on-call"
    elif dag.endswith("_continuous") or (trigger and trigger != AVAILABLE_NOW):
        kind = "continuous"
    elif dag.endswith("_catchup") or trigger == AVAILABLE_NOW:
        kind = "catch-up"
    else:
        kind = "driver"
    return Owner(kind=kind, pid=lease.pid, host=lease.host, since=lease.started_at, generation=lease.generation,
                 trigger=trigger, **context)


def live_lease(control: str, now: dt.datetime | None = None) -> LeaseInfo | None:
    """The lease under ``control`` if a live driver holds it (not released, not expired), else None."""
    lease = read_lease(control)
    return lease if lease is not None and not lease.released and not lease.expired(now) else None


def supervisor_active(state: dict | None, now: dt.datetime | None = None) -> bool:
    """Whether ``supervisor.json`` belongs to a supervisor that still runs (an active state, refreshed lately)."""
    if not state or state.get("state") not in ACTIVE_SUPERVISOR_STATES or not state.get("updated_at"):
        return False
    updated = dt.datetime.fromisoformat(state["updated_at"])
    return ((now or dt.datetime.now(dt.timezone.utc)) - updated).total_seconds() <= SUPERVISOR_FRESH_SECONDS


def continuous_owner(job_name: str, control: str, now: dt.datetime | None = None) -> str | None:
    """Why the continuous job owns the checkpoint now (a catch-up run must leave it alone), or None.

    It owns it while its driver holds the lease, and while its supervisor is active (it runs a driver, or will
    start one: backing off, waiting for the lease, supervision paused): a catch-up run then would only delay it.
    A supervisor that stopped or gave up owns nothing: catch-up runs do the work.
    """
    lease = live_lease(control, now)
    if lease is not None:
        owner = lease_owner(lease)
        if owner.kind == "continuous":
            return f"{job_name} is owned by {owner.describe()}; its files are ingested there"
    state = read_supervisor_state(control)
    if supervisor_active(state, now):
        dag = f"{job_name}_continuous"
        return (f"{job_name} is owned by {dag}: its supervisor (pid {state.get('supervisor_pid')}, started "
                f"{state.get('started_at')}) is {state['state'].replace('_', ' ')}; its files are ingested there")
    return None
