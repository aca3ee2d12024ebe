"""The supervisor of a continuous job: keeps one driver running, restarts it with backoff, gives up once.

Usage (in the foreground, SIGTERM or Ctrl-C stops it and its driver gracefully)::

    python -m spark_jobs supervise cloudtrail_etl --lake lake --input landing/cloudtrail

From Python (Airflow's ``supervise`` task wraps exactly this)::

    Supervisor(job, Lake.at(root), command, notify=print, should_stop=stop_event.is_set).run()

Each poll (``RestartPolicy.poll_seconds``) it looks at, in this order:

1. the driver process: it ended → a failure (its exit status and the tail of its log);
2. ``should_stop()``: true → SIGTERM to the Python driver, which stops after its micro-batch;
   SIGKILL to its process group after ``stop_grace_seconds``; state ``stopped``;
3. the driver's lease (``spark_jobs.control.checkpoint.lease``): a heartbeat older than
   ``stall_after_seconds`` (default: the lease's ttl) while the process lives is a **stalled** driver
   (SIGSTOPped, or hung) → killed, a failure;
4. the checkpoint (``spark_jobs.control.checkpoint.inspect``, every few seconds): input files waiting and no
   batch committed for longer than the registry's ``HealthThresholds.max_batch_age_seconds`` (counted
   from this driver's start at the earliest) is **stalled** too → killed, a failure.

**Another driver's lease is not a failure.** A job's catch-up runs use the same checkpoint: before it starts a
driver, the supervisor reads the lease, and while another live driver holds it (a catch-up run) it starts none and
waits (state ``waiting_for_lease``, a ``lease_wait`` event naming the holder: :mod:`spark_jobs.control.supervision.ownership`)
until it is released or expires, then starts the driver (``lease_free``). A driver that still loses that race exits
with status 3 (``LeaseHeld``): the supervisor waits the same way. Neither counts as a restart: no backoff, none of
the budget, so a real crash after the wait gets the whole budget.

While supervision is paused (a hold in ``<control>/supervision_hold.json``, placed by the on-call DAG's
``pause_supervision``: :mod:`spark_jobs.control.supervision.hold`) a driver that ends is not restarted and a
stalled one is not killed: the supervisor waits (state ``held``) until the hold is lifted, then starts
a driver again (a ``resume`` event). Such an end is not a failure: it uses none of the restart budget.

**A warm standby** (the job's setting: :mod:`spark_jobs.control.supervision.job_settings`, on-call's choice, else the
registry's ``RestartPolicy.warm_standby``; a run's own ``warm_standby`` overrides it; re-read while it runs): once the
driver has run for ``standby_after_seconds`` and its lease says it committed a batch (its first batch, a take-over's
above all, is not slowed by a second JVM's start), the supervisor starts ``<command> --standby`` beside it
(:mod:`spark_jobs.driver.standby`: it warms up and waits on the lease), writing to the other of ``driver.log`` /
``standby.log``. Whatever of the driver dies (the Python driver under spark-submit, its JVM, the whole group) or
stalls, its lease is freed or expires and the standby takes it within its 0.2 s poll; **whenever the standby holds the
lease the supervisor adopts it** as the running driver, whether the old driver's process has ended yet or not (a
take-over is never a stall): what is left of the old group is killed (fenced, it can no longer write), a ``restart``
event with ``take_over: true``, counted as a restart (within the budget) but with no backoff and no new process, then
a new standby. A standby that does not take the lease in time is stopped: a ``take_over_failed`` event (and alert),
and a new driver as after any failure. A standby that dies while it waits is replaced (a ``standby`` event): it is not
the job's driver, so that is no restart and uses none of the budget (standbys dying in a row back off like failures).
The lease and its fencing are the same for a standby as for any driver. While supervision is paused, and on a stop,
the standby is stopped first, so it never takes over a driver a person stopped.

**A rollout** of a new version (``rollout.json``, docs/deploying.md) is carried out while the driver runs:
pre-flight of the new version as a standby, handover, probation, rollback (:mod:`spark_jobs.control.supervision.rollout`);
the version it starts is the job's version setting.

After a failure it restarts the driver from the same checkpoint: at once after a first failure, then after
``initial_backoff_seconds * multiplier ** (consecutive_failures - 2)`` (capped), unless ``max_restarts`` restarts happened within
``window_seconds``: then it gives up (state ``given_up``) and notifies once. A run healthy for
``healthy_reset_seconds`` clears the consecutive failures and the budget. Every state change is
written to ``<control>/supervisor.json`` and passed to ``on_state``; every start, restart, give-up
and stop is appended to ``<control>/events.jsonl`` and passed to ``notify``.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from spark_jobs.model.lake import PROJECT_ROOT, Lake
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.object_store import is_url
from spark_jobs.model.policies import RestartPolicy
from spark_jobs.control.checkpoint.lease import LeaseInfo, read_lease
from spark_jobs.control.supervision.child import ChildProcess, error_line
from spark_jobs.control.supervision.failure import LOG_TAIL_LINES, DriverEnd as _Failure
from spark_jobs.control.supervision.hold import read_hold
from spark_jobs.control.supervision.ownership import LEASE_HELD_EXIT_STATUS, lease_owner, live_lease
from spark_jobs.control.supervision.policy import RestartBudget, backoff_seconds, healthy_long_enough
from spark_jobs.control.supervision.rollout import RolloutSteps
from spark_jobs.control.supervision.state import SupervisorState, append_event, utc_iso, write_supervisor_state

log = logging.getLogger("spark_jobs.control.supervision")


def _driver_log(control: str, job: str) -> Path:
    """The driver's log: ``<control>/driver.log``; for a lake on an object store (which cannot append), a
    local file, ``<project>/.spark/driver-logs/<job>/driver.log``."""
    if is_url(control):
        return PROJECT_ROOT / ".spark" / "driver-logs" / job / "driver.log"
    return Path(control) / "driver.log"

# A driver that has not taken its lease this long after it started is stuck before Spark even runs.
START_TIMEOUT_SECONDS = 180.0
# The checkpoint (and the input listing) is inspected at most this often.
INSPECT_EVERY_SECONDS = 5.0
# A standby that said it is warm takes a freed lease within its 0.2 s poll: this long after the driver ended, it is stuck.
TAKE_OVER_SECONDS = 10.0
# A new standby starts this long after its driver took the lease, and not before the driver's lease says it committed a
# batch (or this many times as long, for a driver with nothing to commit): a JVM's start and warm-up (~15 CPU-s and
# more) beside the driver's first batch would slow the very batch the standby is there to hurry (on 2 busy cores, a
# take-over's first batch took 30-50 s instead of 5-10 s beside one).
STANDBY_AFTER_SECONDS = 10.0
STANDBY_COMMIT_WAIT_FACTOR = 6
# supervisor.json's updated_at is refreshed this often while nothing changes (a sign of life).
REFRESH_EVERY_SECONDS = 30.0
_SIGNALS = {int(s) for s in signal.Signals}


class Supervisor(RolloutSteps):
    """Keeps the driver of one continuous job running (see the module docstring), and carries out a rollout of a new
    version (:mod:`spark_jobs.control.supervision.rollout`).

    :param job: the job's registry entry (its ``restart`` policy and ``health`` thresholds apply).
    :param lake: the lake; the state, events and driver log go to ``lake.control_path(job.name)``.
    :param command: the driver command, e.g. ``python -m spark_jobs run JOB --trigger ...``.
    :param policy: overrides ``job.restart`` (tests use short values).
    :param notify: called with each event dict (kinds ``start``, ``restart``, ``give_up``, ``stop``);
        its failures are logged, never raised.
    :param should_stop: polled; true → graceful stop, :meth:`run` returns ``"stopped"``.
    :param on_state: called with the state dict after every change.
    :param input_path: the job's landing folder, for the checkpoint's backlog (default: the registry's).
    :param env: the driver's environment (default: this process's).
    :param cwd: the driver's working folder.
    :param log_path: the driver's log (default ``<control>/driver.log``); a warm standby's is ``standby.log`` beside
        it, and the two swap roles when a standby takes over.
    :param warm_standby: this run's own choice of a warm standby; ``None``: the job's setting
        (:mod:`spark_jobs.control.supervision.job_settings`: on-call's choice, else ``policy.warm_standby``), read
        again while it runs.
    """

    def __init__(self, job: JobSpec, lake: Lake, command: list[str], policy: RestartPolicy | None = None,
                 notify: Callable[[dict], None] | None = None, should_stop: Callable[[], bool] | None = None,
                 on_state: Callable[[dict], None] | None = None, *, input_path: str | None = None,
                 env: dict | None = None, cwd: str | None = None, log_path: Path | None = None,
                 warm_standby: bool | None = None) -> None:
        if not command:
            raise ValueError("the driver command is empty; pass the argv of the driver, e.g. "
                             "[python, -m, spark_jobs, run, JOB]")
        self.job = job
        self.lake = lake
        self.command = list(command)
        self.policy = policy or job.restart
        self.notify = notify
        self.should_stop = should_stop or (lambda: False)
        self.on_state = on_state
        self.input_path = input_path
        self.control = str(lake.control_path(job.name))
        self.base_env = env
        self.rollout: dict | None = None  # the rollout under way (spark_jobs.control.rollout.request)
        self._standby_version: str | None = None  # the running standby's code version
        self._probation_since: float | None = None
        self._preflight_started: float | None = None
        self.version = self._job_version()
        self.driver = ChildProcess(self.command, log_path or _driver_log(self.control, job.name),
                                   env=self.driver_env(self.version), cwd=cwd)
        self._logs = (self.driver.log_path, self.driver.log_path.with_name("standby.log"))
        self.standby: ChildProcess | None = None  # the warm standby, while one runs (RestartPolicy.warm_standby)
        self._standby_this_run = warm_standby
        self._standby_wanted = bool(warm_standby if warm_standby is not None else self.policy.warm_standby)
        self._standby_setting_at = float("-inf")  # monotonic: the job's setting was last read
        self._standby_was_warm = False  # the running standby said it is warm (it withdraws that when it takes over)
        self.standby_after_seconds = STANDBY_AFTER_SECONDS
        self._driver_committed = False  # the running driver's lease says it committed a batch
        self._driver_generation: int | None = None  # the lease generation the running driver was last seen holding
        self._driver_last_batch: int | None = None  # the last batch its lease said it committed
        self._standby_failures = 0  # standbys that died in a row before they were warm
        self._standby_next = 0.0  # monotonic: no new standby before
        self.budget = RestartBudget(self.policy)
        self.state = SupervisorState(job=job.name, window_seconds=self.policy.window_seconds,
                                     max_restarts=self.policy.max_restarts, supervisor_pid=os.getpid(),
                                     log_path=str(self.driver.log_path))
        self._running_since: float | None = None  # monotonic, while the driver is healthy
        self._last_inspect = 0.0
        self._last_save = 0.0
        self._held_warned = False  # a stall seen while supervision is paused was logged once
        self._refused: str | None = None  # the last driver's refusal by the lease (exit 3), until the next wait

    def _job_version(self) -> str | None:
        """The version to start: the job's version setting when its release is there, else the checkout's code."""
        from spark_jobs.control.rollout.request import job_version
        from spark_jobs.model.errors import UsageError

        version = job_version(self.control)
        try:
            self.driver_env(version)
        except UsageError as exc:
            log.warning("%s: the job's version %s cannot start (%s); starting the checkout's code", self.job.name,
                        version, exc)
            return None
        return version

    # -- state and events ------------------------------------------------------------------------

    def _save(self, changed: bool = True) -> dict:
        self.state.restarts_in_window = self.budget.count()
        data = write_supervisor_state(self.control, self.state)
        self._last_save = time.monotonic()
        if changed and self.on_state is not None:
            try:
                self.on_state(dict(data))
            except Exception:  # noqa: BLE001 - a broken callback must not stop supervision
                log.exception("on_state callback failed")
        return data

    def _event(self, kind: str, reason: str, outcome: str, **extra) -> dict:
        event = append_event(self.control, {
            "job": self.job.name, "kind": kind, "reason": reason, "outcome": outcome,
            "consecutive_failures": self.state.consecutive_failures,
            "restarts_in_window": self.budget.count(), "max_restarts": self.policy.max_restarts,
            "window_seconds": self.policy.window_seconds, **extra})
        log.log(logging.ERROR if kind == "give_up" else logging.WARNING if kind == "restart" else logging.INFO,
                "%s %s: %s -> %s", self.job.name, kind, reason, outcome)
        if self.notify is not None:
            try:
                self.notify(dict(event))
            except Exception:  # noqa: BLE001 - a broken notifier must not stop supervision
                log.exception("notify callback failed for %s event", kind)
        return event

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> str:
        """Supervise until stopped (``"stopped"``) or out of restarts (``"given_up"``).

        No driver process outlives this call.
        """
        self.state.started_at = utc_iso()
        self.resume_rollout()
        self._wants_standby()
        self._save()
        self._event("start", reason="supervision started", outcome=f"starting the driver: {' '.join(self.command)}")
        try:
            ended: _Failure | None = None
            while True:
                if self.should_stop():
                    return self._stopped("asked to stop before the driver started", "no driver was running")
                if read_hold(self.control) is not None:
                    if not self._wait_while_held(ended):
                        return self._stopped("asked to stop while supervision was paused", "no driver was running")
                if not self._wait_for_lease():
                    return self._stopped("asked to stop while waiting for the lease", "no driver was running")
                self._start_driver()
                outcome, failure = self._until_a_new_driver()
                if outcome is not None:
                    return outcome
                ended = failure or ended
        finally:
            self.interrupt_rollout("the supervisor stopped before the handover; the version before runs again when it "
                                   "starts")
            self._drop_standby()
            if self.driver.poll() is None or self.driver.members():
                self.driver.kill()

    def _until_a_new_driver(self) -> tuple[str | None, _Failure | None]:
        """Watch the driver, and each standby that takes it over, until a new driver must start (``None`` and the
        failure, if one) or supervision ends (its outcome)."""
        while True:
            failure = self._watch()
            if failure is None:
                return self._graceful_stop(), None
            if failure.exit_code == LEASE_HELD_EXIT_STATUS:  # another driver took the lease first: wait for it
                self._refused = failure.reason
                return None, None
            if failure.handover:  # a rollout stopped the driver: the new version's standby takes over
                if self._standby_took_over(failure):
                    self.hand_over(failure)
                    continue
                self.handover_failed(failure)
                return None, None  # the old version starts again: not a failure of it
            if failure.destructive:  # a destructive rollout stopped the driver: move aside, start the new version
                self.reset_for_version(failure)
                return None, None
            if self.rebuilding():
                self.rebuild_failed(failure)
            if self.on_probation():  # the new version failed on probation: back to the one before, not counted
                if self.roll_back(failure):
                    continue
                return None, None
            if read_hold(self.control) is not None:
                return None, failure  # supervision is paused: not a failure, nothing restarted until it resumes
            if self.in_preflight():  # the standby is the new version's: it takes over as the handover, or not at all
                if self.driver_ended_in_preflight(failure):
                    continue
            elif not self.budget.exhausted() and (failure.taken_over or self._standby_took_over(failure)):
                self._adopt_standby(failure)
                continue
            if self._after_failure(failure) == "given_up":
                return "given_up", failure
            if not self._back_off():
                return self._stopped("asked to stop while backing off", "no driver was running"), failure
            return None, failure

    def _start_driver(self) -> None:
        from spark_jobs.model.errors import UsageError

        self.driver.command = list(self.command)  # a plain driver, also where an adopted standby ran before
        try:
            self.driver.env = self.driver_env(self.version)
        except UsageError as exc:  # its release is gone: the checkout's code rather than no driver at all
            log.error("%s: version %s cannot start (%s); starting the checkout's code", self.job.name, self.version, exc)
            self.version = None
            self.driver.env = self.driver_env(None)
        self.state.attempt += 1
        self.state.driver_pid = self.driver.start()
        self.state.state = "starting"
        self.state.is_backing_off = False
        self.state.next_attempt_at = None
        self._running_since = None
        self._save()

    def _watch(self) -> _Failure | None:
        """Poll the driver until it fails (the failure) or a stop is asked for (None)."""
        while True:
            code = self.driver.poll()
            if code is not None:
                self.driver.cleanup_after_exit()
                tail = self.driver.log_tail(LOG_TAIL_LINES)
                said = error_line(tail)
                ended = (f"the driver was killed by {signal.Signals(-code).name}" if code < 0 and -code in _SIGNALS
                         else f"the driver exited with status {code}")
                return _Failure(ended + (f": {said}" if said else ""), code, tail)
            if self.should_stop():
                return None
            lease = read_lease(self.control)
            taken_over = self._taken_over(lease)
            if taken_over is not None:  # the old driver can no longer write (fenced): nothing of it may linger
                code = self.driver.kill()
                return _Failure(taken_over, code, self.driver.log_tail(LOG_TAIL_LINES), taken_over=True)
            problem = self._health(lease)
            if problem is not None and read_hold(self.control) is not None:
                if not self._held_warned:
                    log.warning("%s: %s; not killed: supervision is paused", self.job.name, problem)
                    self._held_warned = True
            elif problem is not None:
                code = self.driver.kill()
                return _Failure(problem, code, self.driver.log_tail(LOG_TAIL_LINES))
            handover = self.rollout_tick(lease)
            if handover is not None:
                return handover
            self._maybe_reset()
            self._keep_standby()
            if time.monotonic() - self._last_save >= REFRESH_EVERY_SECONDS:
                self._save(changed=False)
            time.sleep(self.policy.poll_seconds)

    def _health(self, lease: LeaseInfo | None) -> str | None:
        """Why the running driver must be replaced (stalled), or None while it is fine (``lease``: the lease now)."""
        ours = lease is not None and not lease.released and self.driver.owns(lease.pid)
        if not ours:
            waited = time.monotonic() - (self.driver.started_monotonic or time.monotonic())
            if self.state.state == "starting" and waited > START_TIMEOUT_SECONDS:
                return (f"stalled: the driver (pid {self.driver.pid}) did not take the checkpoint's lease within "
                        f"{START_TIMEOUT_SECONDS:g} s of starting")
            return None
        self._driver_committed = "last_committed_batch" in lease.details
        self._driver_generation = lease.generation
        self._driver_last_batch = lease.details.get("last_committed_batch")
        limit = self.policy.stall_after_seconds or lease.ttl_seconds
        age = lease.heartbeat_age()
        if age > limit:
            return (f"stalled: the driver (pid {lease.pid}) has not renewed its lease for {age:.1f} s "
                    f"(limit {limit:g} s): it is paused (SIGSTOP) or hung")
        if self.state.state != "running" or self.state.driver_pid != lease.pid:
            self.state.state = "running"
            self.state.driver_pid = lease.pid
            self._running_since = time.monotonic()
            self.state.running_since = utc_iso()
            self._save()
        return self._backlog_stall()

    def _backlog_stall(self) -> str | None:
        """The checkpoint's verdict (``spark_jobs.control.checkpoint.inspect``): input waiting and no commit for
        longer than the registry's ``max_batch_age_seconds`` (counted from this driver's start at the
        earliest) is stalled."""
        if time.monotonic() - self._last_inspect < INSPECT_EVERY_SECONDS:
            return None
        self._last_inspect = time.monotonic()
        try:
            from spark_jobs.control.checkpoint.inspect import inspect_checkpoint

            report = inspect_checkpoint(self.job, str(self.lake.root), self.input_path).to_dict()
        except Exception as exc:  # noqa: BLE001 - an unreadable listing is not the driver's fault
            log.warning("could not inspect the checkpoint of %s: %s", self.job.name, exc)
            return None
        # Only its no-progress verdict: a stale heartbeat is judged above, by stall_after_seconds.
        said = next((p.get("explanation") for p in report.get("problems") or [] if p.get("code") == "no_progress"), None)
        return f"stalled: {said}" if report.get("status") == "stalled" and said else None

    def _maybe_reset(self) -> None:
        if self._running_since is None or (self.state.consecutive_failures == 0 and not self.budget.count()):
            return
        if healthy_long_enough(self.policy, time.monotonic() - self._running_since):
            log.info("%s healthy for %g s: consecutive failures and the restart budget reset", self.job.name,
                     self.policy.healthy_reset_seconds)
            self.state.consecutive_failures = 0
            self.budget.clear()
            self._save()

    def _other_holder(self):
        """The lease if another live driver holds it (none of this supervisor's drivers runs when this is asked)."""
        try:
            return live_lease(self.control)
        except Exception as exc:  # noqa: BLE001 - an unreadable lease: the driver's own acquire decides
            log.warning("could not read the lease of %s: %s", self.job.name, exc)
            return None

    def _wait_for_lease(self) -> bool:
        """Start no driver while another live driver holds the lease: wait until it lets go (True) or a stop is asked
        for (False). Not a failure: no restart is counted and the backoff does not grow."""
        holder = self._other_holder()
        refused, self._refused = self._refused, None
        if holder is None:
            if refused:  # refused, but the holder is gone already: a moment before the next start
                time.sleep(self.policy.poll_seconds)
            return True
        owner = lease_owner(holder)
        began = time.monotonic()
        self.state.state = "waiting_for_lease"
        self.state.is_backing_off = False
        self.state.next_attempt_at = None
        self.state.driver_pid = None
        self.state.running_since = None
        self.state.waiting_for = owner.describe()
        self.state.waiting_since = utc_iso()
        self.state.lease_waits += 1
        self._running_since = None
        self._save()
        self._event("lease_wait", reason=(f"{refused}; " if refused else "") + f"the checkpoint's lease is held by "
                    f"{owner.describe()}", outcome="waiting until it is released or expires before starting the "
                    "driver (not a failure: no restart is counted)", holder=owner.to_dict())
        while (holder := self._other_holder()) is not None:
            if self.should_stop():
                self.state.waiting_for = self.state.waiting_since = None
                return False
            if holder.generation != owner.generation:  # another driver took it in between
                owner = lease_owner(holder)
                self.state.waiting_for = owner.describe()
                self._save()
            elif time.monotonic() - self._last_save >= REFRESH_EVERY_SECONDS:
                self._save(changed=False)
            time.sleep(self.policy.poll_seconds)
        waited = time.monotonic() - began
        self.state.waiting_for = self.state.waiting_since = None
        self._event("lease_free", reason=f"{owner.describe()} let the lease go after {waited:.0f} s",
                    outcome="starting the driver from the same checkpoint", waited_seconds=round(waited, 1))
        return True

    def _wait_while_held(self, ended: _Failure | None) -> bool:
        """Wait, starting no driver, until the hold is lifted (True) or a stop is asked for (False)."""
        self._drop_standby()  # it would take over once the hold is lifted, racing the driver started then
        hold = read_hold(self.control) or {}
        said = f"supervision is paused by {hold.get('by') or 'someone'}: {hold.get('reason') or 'no reason given'}"
        self.state.state = "held"
        self.state.is_backing_off = False
        self.state.next_attempt_at = None
        self.state.driver_pid = None
        self.state.running_since = None
        self._running_since = None
        if ended is not None:
            self.state.last_reason = ended.reason
            self.state.last_exit_code = ended.exit_code
        self._save()
        self._event("held", reason=ended.reason if ended else "supervision is paused",
                    outcome=f"not restarted: {said}; resume supervision to start the driver again",
                    hold=hold, **({"exit_code": ended.exit_code, "log_tail": ended.log_tail} if ended else {}))
        while read_hold(self.control) is not None:
            if self.should_stop():
                return False
            if time.monotonic() - self._last_save >= REFRESH_EVERY_SECONDS:
                self._save(changed=False)
            time.sleep(self.policy.poll_seconds)
        self._event("resume", reason="supervision resumed", outcome="starting the driver from the same checkpoint")
        return True

    # -- the warm standby ----------------------------------------------------------------------------

    def _wants_standby(self) -> bool:
        """Whether the job keeps a warm standby now: this run's choice, else the job's setting (re-read every
        :data:`INSPECT_EVERY_SECONDS`: on-call may switch it while the job runs), else the policy's."""
        from spark_jobs.control.supervision.job_settings import warm_standby

        if time.monotonic() - self._standby_setting_at >= INSPECT_EVERY_SECONDS:
            self._standby_setting_at = time.monotonic()
            try:
                setting = warm_standby(self.job, self.control, self._standby_this_run, self.policy.warm_standby)
            except Exception as exc:  # noqa: BLE001 - an unreadable settings file: keep what was in force
                log.warning("could not read the settings of %s: %s", self.job.name, exc)
            else:
                self._standby_wanted = setting.value
                if self.state.standby_setting != setting.describe():
                    self.state.standby_setting = setting.describe()
                    self._save()
        return self._standby_wanted

    def _set_standby_state(self, state: str) -> None:
        if self.state.standby != state:
            self.state.standby = state
            self.state.standby_warm_since = utc_iso() if state == "warm" else None
            self._save()

    def _standby_warm(self) -> bool:
        """Whether the standby said it is warm and waiting (its ``standby.json``). It withdraws that the moment it
        takes the lease, so what it said once is remembered until it is dropped."""
        from spark_jobs.control.supervision.standby_state import read_standby

        said = read_standby(self.control)
        if self.standby is not None and said and self.standby.owns(said.get("pid")):
            self._standby_was_warm = True
        return self._standby_was_warm

    def _keep_standby(self) -> None:
        """While the driver runs: a standby beside it when the job wants one (started or replaced), none when not."""
        if self.rollout_owns_standby():
            return
        if not self._wants_standby():
            if self.standby is not None:
                pid = self.standby.pid
                self._drop_standby()
                self._event("standby", reason=f"the warm standby was switched off ({self.state.standby_setting})",
                            outcome=f"stopped the standby (pid {pid}); the driver runs on", standby_pid=pid)
            self._set_standby_state("off")
            return
        standby = self.standby
        if standby is not None:
            code = standby.poll()
            if code is None:
                if self._standby_warm():
                    self._standby_failures = 0
                    self._set_standby_state("warm")
                return
            standby.cleanup_after_exit()
            self.standby = None
            self._standby_was_warm = False
            self.state.standby_pid = None
            self.state.standby = "absent"
            self._standby_failures += 1
            wait = backoff_seconds(self.policy, self._standby_failures)
            self._standby_next = time.monotonic() + wait
            ended = (f"was killed by {signal.Signals(-code).name}" if code < 0 and -code in _SIGNALS
                     else f"exited with status {code}")
            tail = standby.log_tail(LOG_TAIL_LINES)
            said = error_line(tail)
            self._save()
            self._event("standby", reason=f"the warm standby (pid {standby.pid}) {ended} while it waited"
                        + (f": {said}" if said else ""),
                        outcome=f"replaced in {wait:g} s; the driver runs on (a standby is not the job's driver: "
                                "not a restart, none of the budget)",
                        standby_pid=standby.pid, exit_code=code, log_tail=tail)
            return
        self._set_standby_state("absent")
        if self.state.state != "running" or self._running_since is None:
            return
        running = time.monotonic() - self._running_since
        if time.monotonic() < self._standby_next or running < self.standby_after_seconds or (
                not self._driver_committed and running < self.standby_after_seconds * STANDBY_COMMIT_WAIT_FACTOR):
            return
        log_path = self._logs[1] if self.driver.log_path == self._logs[0] else self._logs[0]
        self._standby_version = self.standby_version()  # on probation: the version before (the way back)
        self.standby = ChildProcess([*self.command, "--standby"], log_path, env=self.driver_env(self._standby_version),
                                    cwd=self.driver.cwd)
        self._standby_was_warm = False
        self.state.standby_pid = self.standby.start()
        self.state.standby = "warming"
        self._save()
        self._event("standby", reason=f"the driver (pid {self.state.driver_pid}) runs and a warm standby is asked for",
                    outcome=f"started a warm standby (pid {self.state.standby_pid}): it warms up, then takes the "
                            "lease over the moment the driver dies", standby_pid=self.state.standby_pid)

    def _taken_over(self, lease: LeaseInfo | None) -> str | None:
        """What ended the running driver's hold on the job when the standby holds the lease now, else None.

        Whatever a person or the kernel killed (the Python driver under spark-submit, its JVM, the whole group) or
        paused, the lease was freed or expired and the standby took it with the lease's own fencing: the old driver
        can no longer write. That is a take-over to adopt, never a stall."""
        if self.standby is None:
            return None
        if lease is None or lease.released or not self.standby.owns(lease.pid):
            return None
        alive = set(self.driver.members())
        python, child = self.state.driver_pid, self.driver.pid
        if python is not None and python != child and python not in alive:
            ended = f"the Python driver (pid {python}) died while its JVM (pid {child}) ran on"
        elif child not in alive:
            ended = f"the driver (pid {child}) died"
        else:
            ended = f"the driver (pid {python or child}) stopped renewing its lease (paused or hung)"
        return f"{ended}: the warm standby (pid {lease.pid}) took the lease over"

    def _standby_took_over(self, failure: _Failure) -> bool:
        """After the driver ended: whether the standby holds the lease (now, or soon). A warm one is given
        :data:`TAKE_OVER_SECONDS`, one still warming up until :data:`START_TIMEOUT_SECONDS` after its start (it is
        closer to its first batch than a new driver). One that does not take it is stopped, and that failed
        take-over is an event of its own (``take_over_failed``) for the notifier and the alerts."""
        standby = self.standby
        if standby is None:
            return False
        warm = self._standby_warm()
        now = time.monotonic()
        deadline = now + TAKE_OVER_SECONDS if warm else max(
            (standby.started_monotonic or now) + START_TIMEOUT_SECONDS, now + TAKE_OVER_SECONDS)
        while standby.poll() is None and not self.should_stop() and time.monotonic() < deadline:
            lease = read_lease(self.control)
            if lease is not None and not lease.released and standby.owns(lease.pid):
                return True
            if not warm and self._standby_warm():
                warm, deadline = True, min(deadline, time.monotonic() + TAKE_OVER_SECONDS)
            time.sleep(0.1)
        if self.should_stop():
            self._drop_standby()
            return False
        code = standby.poll()
        if code is not None and self._took_the_lease_then_ended():
            return True  # adopted as the driver; its end is the next failure the watch sees
        tail = standby.log_tail(LOG_TAIL_LINES)
        if code is not None:
            said = error_line(tail)
            why = f"it exited with status {code}" + (f": {said}" if said else "")
        else:
            why = (f"it did not take the lease within {TAKE_OVER_SECONDS:g} s of the driver's end" if warm else
                   f"it was not warm {START_TIMEOUT_SECONDS:g} s after its start")
        self._drop_standby()
        self.state.last_take_over_failed = f"{utc_iso()}: {why}"
        self._save()
        self._event("take_over_failed", reason=f"{failure.reason}; the warm standby (pid {standby.pid}) did not take "
                    f"over: {why}", outcome="starting a new driver from the same checkpoint instead (slower: a cold "
                    f"start); read {standby.log_path}", standby_pid=standby.pid, exit_code=code, log_tail=tail)
        return False

    def _took_the_lease_then_ended(self) -> bool:
        """Whether the standby, ended now, took the lease before it ended: a generation newer than the driver's,
        held by a continuous driver of this host whose process is gone. A standby that crashes within moments of its
        take-over (a new version's first batch) ends before the loop above sees it hold the lease; it was the driver
        all the same, and its end is that driver's failure (on probation: a rollback), not a failed take-over."""
        lease = read_lease(self.control)
        return (lease is not None and self._driver_generation is not None and lease.generation > self._driver_generation
                and lease_owner(lease).kind == "continuous" and lease.alive_locally() is False)

    def _adopt_standby(self, failure: _Failure, counted: bool = True, kind: str = "restart",
                       outcome: str | None = None) -> None:
        """The standby holds the lease: it is the running driver now (a restart, without backoff or a new process;
        ``counted`` false for a rollout's handover or rollback, which use none of the budget)."""
        standby, old_log = self.standby, self.driver.log_path
        self.standby = None
        self._standby_was_warm = False
        self._standby_version = None
        self.driver = standby
        self.state.last_reason = failure.reason
        self.state.last_exit_code = failure.exit_code
        if counted:
            self.state.consecutive_failures += 1
            self.budget.record()
            self.state.restarts_total += 1
        self.state.take_overs_total += 1
        self.state.last_take_over_at = utc_iso()
        self.state.last_take_over_failed = None
        self.state.attempt += 1
        self.state.state = "starting"
        self.state.driver_pid = standby.pid
        self.state.standby_pid = None
        self.state.standby = "absent"
        self.state.standby_warm_since = None
        self.state.running_since = None
        self.state.is_backing_off = False
        self.state.next_attempt_at = None
        self.state.log_path = str(standby.log_path)
        self._running_since = None
        self._save()
        self._event(kind, reason=failure.reason,
                    outcome=outcome or f"taken over by the warm standby (pid {standby.pid}), which holds the lease: it "
                            f"runs from the same checkpoint, no backoff (restart {self.budget.count()} of "
                            f"{self.policy.max_restarts} allowed within {self.policy.window_seconds:g} s)",
                    take_over=True, backoff_seconds=0, standby_pid=standby.pid, exit_code=failure.exit_code,
                    log_tail=failure.log_tail, log_path=str(old_log))

    def _drop_standby(self) -> None:
        """Stop the standby, if one runs (SIGTERM: it holds nothing and exits at once), and forget it."""
        standby, self.standby = self.standby, None
        self._standby_version = None
        if standby is None:
            return
        self._standby_was_warm = False
        self.state.standby_pid = None
        self.state.standby = "absent" if self.state.standby != "off" else "off"
        self.state.standby_warm_since = None
        if standby.poll() is None:
            standby.stop(grace_seconds=10.0)
        elif standby.members():
            standby.kill()

    def _after_failure(self, failure: _Failure) -> str | None:
        self.state.consecutive_failures += 1
        self.state.last_reason = failure.reason
        self.state.last_exit_code = failure.exit_code
        self.state.driver_pid = None
        self.state.running_since = None
        self._running_since = None
        details = {"exit_code": failure.exit_code, "log_tail": failure.log_tail, "log_path": str(self.driver.log_path)}
        if self.budget.exhausted():
            self.state.state = "given_up"
            self.state.is_backing_off = False
            self.state.next_attempt_at = None
            self._save()
            self._event("give_up", reason=failure.reason,
                        outcome=f"not restarted: {self.budget.count()} restarts within {self.policy.window_seconds:g} s "
                                f"already (budget {self.policy.max_restarts})",
                        action=(f"fix the cause (the reason above; the driver log {self.driver.log_path}; "
                                f"`python -m spark_jobs checkpoint inspect {self.job.name}`), then start supervision "
                                f"again: clear the `supervise` task of the DAG {self.job.name}_continuous, or run "
                                f"`python -m spark_jobs supervise {self.job.name}`"),
                        **details)
            return "given_up"
        wait = backoff_seconds(self.policy, self.state.consecutive_failures)
        self.budget.record()
        self.state.restarts_total += 1
        self.state.state = "backing_off"
        self.state.is_backing_off = True
        self.state.next_attempt_at = utc_iso(datetime.now(timezone.utc) + timedelta(seconds=wait))
        self._backoff_until = time.monotonic() + wait
        self._save()
        self._event("restart", reason=failure.reason,
                    outcome=f"restarting from the same checkpoint in {wait:g} s (restart {self.budget.count()} of "
                            f"{self.policy.max_restarts} allowed within {self.policy.window_seconds:g} s)",
                    backoff_seconds=wait, next_attempt_at=self.state.next_attempt_at, **details)
        return None

    def _back_off(self) -> bool:
        """Sleep until the next attempt; False if a stop was asked for meanwhile."""
        while True:
            if self.should_stop():
                return False
            left = self._backoff_until - time.monotonic()
            if left <= 0:
                return True
            if time.monotonic() - self._last_save >= REFRESH_EVERY_SECONDS:
                self._save(changed=False)
            time.sleep(min(left, self.policy.poll_seconds, 0.5))

    def _graceful_stop(self) -> str:
        self._drop_standby()  # first: it would take the lease the driver releases
        self.state.state = "stopping"  # the health sensor knows now that the task ends (the driver may take a while)
        self.state.last_reason = "asked to stop"
        self._save()

        lease = read_lease(self.control)
        driver_pid = lease.pid if lease is not None and not lease.released else None
        started = time.monotonic()
        code, in_time = self.driver.stop(self.policy.stop_grace_seconds, driver_pid=driver_pid)
        took = time.monotonic() - started
        self.state.last_exit_code = code
        outcome = (f"the driver stopped after its micro-batch in {took:.1f} s (status {code})" if in_time else
                   f"the driver did not stop within {self.policy.stop_grace_seconds:g} s; its process group was killed")
        return self._stopped("asked to stop", outcome, stop_seconds=round(took, 2), exit_code=code)

    def _stopped(self, reason: str, outcome: str, **extra) -> str:
        self.state.state = "stopped"
        self.state.is_backing_off = False
        self.state.next_attempt_at = None
        self.state.driver_pid = None
        self.state.last_reason = reason
        self._save()
        self._event("stop", reason=reason, outcome=outcome, **extra)
        return "stopped"
