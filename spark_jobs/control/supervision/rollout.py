"""The supervisor's part of a rollout (docs/deploying.md): pre-flight, handover, probation, rollback.

:class:`~spark_jobs.control.supervision.supervisor.Supervisor` carries out the request in ``rollout.json``
(:mod:`spark_jobs.control.rollout.request`) while its driver runs, one poll at a time (:meth:`RolloutSteps.rollout_tick`):

1. ``requested``: the version's release is found (else ``failed``, naming the known ones); the job's own standby is
   stopped (it would take the lease for the old version) and the new version is started as a standby with
   ``--preflight`` (the release first on ``PYTHONPATH``: :func:`spark_jobs.launch.releases.driver_env`);
2. ``preflight``: the standby exits 4 → ``refused`` with its verdict (``preflight.json``); any other exit →
   ``failed``; both leave the old driver running, count no restart and let the job's own standby start again. Once
   it says it is warm, the **handover**: the old driver is asked to stop after its micro-batch (SIGTERM to the Python
   driver), which releases the lease; the standby takes it within its poll and is adopted as the driver, as a
   ``handover`` event (not a restart: no budget). The job's version setting becomes the new version. A driver that
   ends by itself during the pre-flight (a crash, a kill) is handed over too, once the new version's standby passed
   and took the free lease as any standby does (the handover come early); when it does not, the rollout ends and the
   old version restarts as after any failure;
3. ``probation``: until the new driver has committed ``RestartPolicy.probation_batches`` batches and
   ``probation_seconds`` have passed (three times that on a quiet stream) → ``done``, and the standby (the previous
   version's, during probation: the way back) is replaced by one of the new version. A crash or a stall of the new
   driver on probation, or a quarantine share far above the previous version's
   (:mod:`spark_jobs.control.rollout.probation`; the new driver is then stopped after its micro-batch) → **rollback**: the version setting goes back, the previous version's standby takes over when
   it is warm (else the previous version starts from the same checkpoint), ``rolled_back`` with the reason. Neither
   counts against the restart budget: the failure was the new version's.

A **destructive rollout** (``destructive`` in the request: :mod:`spark_jobs.control.rollout.destructive`) has no
pre-flight, handover or probation: ``requested`` → the standby and then the driver are stopped (after its micro-batch),
``resetting`` → the checkpoint and tables are moved aside under the lease and the new version becomes the job's,
``rebuilding`` → the new version starts on a new checkpoint (no budget) → ``done`` at its first committed batch; a
crash before that ends it ``failed`` and is an ordinary restart of the new version (the old checkpoint no longer fits).

A supervisor stopped during a rollout leaves it ``interrupted`` before the handover (the old version runs on) and
on probation after it (the next supervisor watches the new version for a whole probation again).
"""

from __future__ import annotations

import logging
import time

from spark_jobs.control.checkpoint.lease import LeaseInfo
from spark_jobs.control.rollout.preflight_state import PREFLIGHT_REFUSED_EXIT_STATUS, read_preflight, refusal_text
from spark_jobs.control.rollout.request import active_rollout, set_job_version, update_rollout
from spark_jobs.control.supervision.child import ChildProcess, error_line
from spark_jobs.control.supervision.failure import LOG_TAIL_LINES, DriverEnd
from spark_jobs.control.supervision.state import utc_iso

log = logging.getLogger("spark_jobs.control.supervision")

# A pre-flight standby that has neither passed nor been refused this long after its start is stuck.
PREFLIGHT_TIMEOUT_SECONDS = 600.0
QUIET_PROBATION_FACTOR = 3
# The progress history is read this often on probation (the driver appends its rows every flush_seconds).
QUARANTINE_CHECK_SECONDS = 10.0


def _env_of(version: str | None, base: dict | None) -> dict | None:
    """The driver environment of ``version`` (None: the checkout's code, ``base`` as it is)."""
    if version is None:
        return base
    from spark_jobs.launch.releases import driver_env, find_release

    return driver_env(find_release(version), base)


class RolloutSteps:
    """The rollout steps of the supervisor (a mixin of :class:`~spark_jobs.control.supervision.supervisor.Supervisor`,
    whose driver, standby, events and state they use)."""

    version: str | None  # the version the supervisor starts (None: the checkout's)
    rollout: dict | None
    _standby_version: str | None
    _probation_since: float | None
    _preflight_started: float | None
    _driver_last_batch: int | None
    _quarantine_checked: float = float("-inf")

    def driver_env(self, version: str | None) -> dict | None:
        return _env_of(version, self.base_env)

    def standby_version(self) -> str | None:
        """The version the job's standby runs: the previous one on probation (the way back), else the job's."""
        if self.rollout is not None and self.rollout.get("phase") == "probation":
            return self.rollout.get("previous_version")  # None: the checkout's code
        return self.version

    def rollout_owns_standby(self) -> bool:
        """Whether the rollout runs the standby now (the pre-flight's): the job's own is not started beside it."""
        return self.rollout is not None and self.rollout.get("phase") in ("requested", "preflight", "handover",
                                                                          "resetting", "rebuilding")

    def resume_rollout(self) -> None:
        """At the supervisor's start: a rollout cut short before its handover is ``interrupted``; one on probation
        is watched again from now."""
        found = active_rollout(self.control)
        if found is None:
            return
        if found["phase"] in ("preflight", "handover"):
            update_rollout(self.control, found, "interrupted", outcome=f"the supervisor stopped during the "
                           f"{found['phase']}; version {self.version or 'of the checkout'} runs")
        elif found["phase"] == "probation":
            self.rollout, self._probation_since = found, None
        elif found["phase"] == "resetting":  # killed between the stop and the move: the driver is gone, move now
            self.rollout = found
            self.reset_for_version(None)
        elif found["phase"] == "rebuilding":
            self.rollout = found

    def interrupt_rollout(self, why: str) -> None:
        """A stop during a rollout: before the handover it ends ``interrupted`` (the pre-flight standby is stopped
        with the job's)."""
        if self.rollout is not None and self.rollout.get("phase") in ("requested", "preflight", "handover"):
            update_rollout(self.control, self.rollout, "interrupted", outcome=why)
            self.rollout = None

    def rollout_tick(self, lease: LeaseInfo | None):
        """One step of the rollout while the driver runs; a ``_Failure`` with ``handover`` when the old driver was
        stopped for the new version (the supervisor then adopts the standby), else None."""
        if self.state.state != "running":
            return None
        if self.rollout is None:
            self.rollout = active_rollout(self.control)
            if self.rollout is None:
                return None
        phase = self.rollout["phase"]
        if phase == "requested" and self.rollout.get("destructive"):
            return self._stop_for_reset(lease)
        if phase == "rebuilding":
            return self._during_rebuild(lease)
        if phase == "requested":
            self._begin_preflight()
        elif phase == "preflight":
            return self._during_preflight(lease)
        elif phase == "probation":
            return self._during_probation(lease)
        return None

    # -- pre-flight and handover ------------------------------------------------------------------

    def _end_rollout(self, phase: str, kind: str, outcome: str, reason: str, **extra) -> None:
        rollout, self.rollout = self.rollout, None
        update_rollout(self.control, rollout, phase, outcome=outcome, ended_at=utc_iso(), **extra)
        self._event(kind, reason=reason, outcome=outcome, rollout=rollout["id"], version=rollout["version"])

    def _begin_preflight(self) -> None:
        from spark_jobs.model.errors import UsageError

        rollout = self.rollout
        try:
            env = self.driver_env(rollout["version"])
        except UsageError as exc:
            self._end_rollout("failed", "rollout_failed", f"not started: {exc}",
                              f"rollout of {self.job.name} to {rollout['version']} asked by {rollout.get('by')}")
            return
        self._drop_standby()  # the job's own standby would take the lease for the old version
        log_path = self._logs[1] if self.driver.log_path == self._logs[0] else self._logs[0]
        self.standby = ChildProcess([*self.command, "--standby", "--preflight"], log_path, env=env,
                                    cwd=self.driver.cwd)
        self._standby_was_warm = False
        self._standby_version = rollout["version"]
        self.state.standby_pid = self.standby.start()
        self.state.standby = "warming"
        self._preflight_started = time.monotonic()
        self._save()
        update_rollout(self.control, rollout, "preflight", standby_pid=self.state.standby_pid)
        self._event("rollout", reason=f"rollout of {self.job.name} from {rollout.get('from_version') or 'the checkout'}"
                    f" to {rollout['version']} asked by {rollout.get('by')}: {rollout.get('reason') or 'no reason given'}",
                    outcome=f"pre-flight: version {rollout['version']} started as a standby (pid "
                            f"{self.state.standby_pid}) and checked against the live checkpoint and tables; the "
                            f"driver (pid {self.state.driver_pid}) runs on", rollout=rollout["id"],
                    version=rollout["version"], standby_pid=self.state.standby_pid, asked_by=rollout.get("by"))

    def _end_preflight(self, refused: bool, failed: str, **extra) -> None:
        """The pre-flight ended without a handover: ``refused`` (its verdict, in ``preflight.json``), else ``failed``
        with the text ``failed``."""
        rollout = self.rollout
        verdict = read_preflight(self.control) or {}
        if refused and verdict.get("version") == rollout["version"]:
            self._end_rollout("refused", "rollout_refused", refusal_text(self.job.name, verdict),
                              f"pre-flight of version {rollout['version']}", findings=verdict.get("findings"))
        else:
            self._end_rollout("failed", "rollout_failed", failed, f"pre-flight of version {rollout['version']}",
                              **extra)

    def _during_preflight(self, lease: LeaseInfo | None):
        rollout, standby = self.rollout, self.standby
        code = standby.poll() if standby is not None else -1
        if code is not None:
            tail = standby.log_tail(LOG_TAIL_LINES) if standby is not None else ""
            if standby is not None:
                standby.cleanup_after_exit()
            self.standby, self._standby_version = None, None
            self.state.standby_pid, self.state.standby = None, "absent"
            self._standby_next = time.monotonic()
            self._save()
            said = error_line(tail)
            self._end_preflight(code == PREFLIGHT_REFUSED_EXIT_STATUS, f"the pre-flight standby of {rollout['version']} "
                                f"exited with status {code}" + (f": {said}" if said else "") + "; the driver runs on",
                                log_tail=tail)
            return None
        if not self._standby_warm():
            if time.monotonic() - (self._preflight_started or time.monotonic()) > PREFLIGHT_TIMEOUT_SECONDS:
                self._drop_standby()
                self._standby_version = None
                self._end_rollout("failed", "rollout_failed", f"the pre-flight standby was not warm within "
                                  f"{PREFLIGHT_TIMEOUT_SECONDS:g} s; it was stopped, the driver runs on",
                                  f"pre-flight of version {rollout['version']}")
            return None
        # Passed and warm: the old driver finishes its micro-batch and lets the lease go; the standby takes it.
        last = lease.details.get("last_committed_batch") if lease is not None else None
        update_rollout(self.control, rollout, "handover", preflight=read_preflight(self.control),
                       batch_before=last, old_driver_pid=self.state.driver_pid)
        return self._stop_driver_for(f"handover to version {rollout['version']}", lease, handover=True)

    def _stop_driver_for(self, what: str, lease: LeaseInfo | None, **kind) -> DriverEnd:
        """The driver asked to stop after its micro-batch (its process group killed after the grace): the
        ``DriverEnd`` of ``what`` (``kind``: ``handover`` or ``destructive``)."""
        driver_pid = lease.pid if lease is not None and not lease.released else None
        started = time.monotonic()
        code, in_time = self.driver.stop(self.policy.stop_grace_seconds, driver_pid=driver_pid)
        how = (f"the driver (pid {self.state.driver_pid}) stopped after its micro-batch in "
               f"{time.monotonic() - started:.1f} s" if in_time else
               f"the driver (pid {self.state.driver_pid}) did not stop within {self.policy.stop_grace_seconds:g} s; "
               "its process group was killed")
        return DriverEnd(f"{what}: {how}", code, self.driver.log_tail(LOG_TAIL_LINES), **kind)

    def in_preflight(self) -> bool:
        return self.rollout is not None and self.rollout.get("phase") == "preflight" and self.standby is not None

    def driver_ended_in_preflight(self, failure) -> bool:
        """The running driver ended during the pre-flight (it crashed, or was killed). The new version's standby,
        once its pre-flight passed and it is warm, takes the free lease by itself, as any standby does: that is the
        handover, come early (True: adopted as the driver, on probation). Else (refused, crashed, or not warm in
        time) the rollout ends, and the old version is restarted as after any failure (False)."""
        rollout = self.rollout
        if failure.taken_over or self._standby_took_over(failure):
            update_rollout(self.control, rollout, "handover", preflight=read_preflight(self.control),
                           batch_before=self._driver_last_batch, old_driver_pid=self.state.driver_pid,
                           driver_ended=failure.reason)
            self.hand_over(failure)
            return True
        self._standby_version = None
        self._end_preflight((read_preflight(self.control) or {}).get("passed") is False,
                            f"{failure.reason}, during the pre-flight of {rollout['version']}, whose standby did not "
                            f"take over (see the take_over_failed event): version {self.version or 'of the checkout'} "
                            "starts again")
        return False

    def hand_over(self, failure) -> None:
        """The new version's standby holds the lease: it is the driver now, on probation."""
        rollout = self.rollout
        previous = self.version
        self._adopt_standby(failure, counted=False, kind="handover",
                            outcome=f"version {rollout['version']}'s standby (pid {self.standby.pid}) holds the lease "
                                    "and runs from the same checkpoint; on probation (not a restart: none of the "
                                    "budget)")
        self.version = rollout["version"]
        set_job_version(self.control, self.version, rollout.get("by") or "rollout", f"rollout {rollout['id']}")
        self._probation_since = time.monotonic()
        update_rollout(self.control, rollout, "probation", previous_version=previous, handed_over_at=utc_iso(),
                       driver_pid=self.state.driver_pid)

    def handover_failed(self, failure) -> None:
        """The old driver stopped but the new version's standby did not take the lease: the old version starts
        again from the same checkpoint (not a restart of the budget)."""
        self._standby_version = None
        self._end_rollout("failed", "rollout_failed", f"{failure.reason}; the standby of {self.rollout['version']} "
                          f"did not take the lease: version {self.version or 'of the checkout'} starts again",
                          f"handover to version {self.rollout['version']}")

    # -- probation and rollback -------------------------------------------------------------------------------

    def on_probation(self) -> bool:
        return self.rollout is not None and self.rollout.get("phase") == "probation"

    def _during_probation(self, lease: LeaseInfo | None):
        """Probation passed (``done``), or a quarantine share far above the previous version's: the new driver is
        stopped after its micro-batch and a ``DriverEnd`` returned (the supervisor then rolls back); else None."""
        rollout = self.rollout
        if self._probation_since is None:
            self._probation_since = time.monotonic()
        if lease is None or lease.released or not self.driver.owns(lease.pid):
            return None
        quarantined = self._quarantine_verdict()
        if quarantined is not None:
            started = time.monotonic()
            code, _ = self.driver.stop(self.policy.stop_grace_seconds, driver_pid=lease.pid)
            return DriverEnd(f"version {rollout['version']} quarantines far more than the version before: "
                             f"{quarantined} (stopped in {time.monotonic() - started:.1f} s)", code,
                             self.driver.log_tail(LOG_TAIL_LINES))
        last, before = lease.details.get("last_committed_batch"), rollout.get("batch_before")
        batches = 0 if last is None else last - (before if before is not None else -1)
        rollout["batches_on_probation"] = batches
        elapsed = time.monotonic() - self._probation_since
        wanted, seconds = self.policy.probation_batches, self.policy.probation_seconds
        if elapsed < seconds or (batches < wanted and elapsed < QUIET_PROBATION_FACTOR * seconds):
            return None
        self._end_rollout("done", "probation_passed", f"version {rollout['version']} committed {batches} batches "
                          f"in {elapsed:.0f} s of probation without a crash or a stall: it stays",
                          f"probation of version {rollout['version']}", batches_on_probation=batches)
        if self.standby is not None and self._standby_version != self.version:
            self._drop_standby()  # the previous version's: a standby of the new one replaces it
            self._standby_version = None
        return None

    def _quarantine_verdict(self) -> str | None:
        """The quarantine rule (:mod:`spark_jobs.control.rollout.probation`), looked at every few seconds."""
        from spark_jobs.control.rollout.probation import probation_rows, quarantine_verdict

        if time.monotonic() - self._quarantine_checked < QUARANTINE_CHECK_SECONDS:
            return None
        self._quarantine_checked = time.monotonic()
        try:
            new, old = probation_rows(self.lake.root, self.job, self.rollout["version"],
                                      self.rollout.get("from_version"))
        except Exception as exc:  # noqa: BLE001 - an unreadable history: the crash and stall checks still hold
            log.warning("could not read the progress of %s on probation: %s", self.job.name, exc)
            return None
        return quarantine_verdict(self.job, new, old, self.policy.quarantine_factor, self.policy.quarantine_margin)

    def roll_back(self, failure) -> bool:
        """The new version failed on probation: back to the previous version. True when the previous version's warm
        standby took over (adopted); False: the supervisor starts the previous version from the same checkpoint."""
        rollout = self.rollout
        previous = rollout.get("previous_version")  # what this supervisor ran: a release, or None (the checkout's)
        self.version = previous
        set_job_version(self.control, previous, "rollback", f"rollout {rollout['id']} rolled back: {failure.reason}")
        warm = self.standby is not None and self._standby_version == previous and self._standby_took_over(failure)
        named = previous or rollout.get("from_version") or "the checkout's code"
        how = (f"the warm standby of {named} (pid {self.standby.pid}) took over" if warm else
               f"{named} starts again from the same checkpoint")
        if warm:
            self._adopt_standby(failure, counted=False, kind="rollback",
                                outcome=f"rolled back to {named}: {how} (not a restart: none of the budget)")
        else:
            self._drop_standby()
            self._event("rollback", reason=failure.reason, outcome=f"rolled back to {named}: {how} (not a restart: "
                        "none of the budget)", rollout=rollout["id"],
                        version=rollout["version"], exit_code=failure.exit_code, log_tail=failure.log_tail)
        self.rollout = None
        update_rollout(self.control, rollout, "rolled_back", outcome=f"version {rollout['version']} failed on "
                       f"probation: {failure.reason}; {how}", ended_at=utc_iso(),
                       batches_on_probation=rollout.get("batches_on_probation", 0))
        return warm

    # -- a destructive rollout: stop, reset, the new version on a new checkpoint ----------------------------------

    def _stop_for_reset(self, lease: LeaseInfo | None):
        """The standby and the driver stopped (after its micro-batch) for the move: a ``DriverEnd`` with
        ``destructive``; None when the version cannot start (the rollout ends ``failed``, the driver runs on)."""
        from spark_jobs.model.errors import UsageError

        rollout = self.rollout
        try:
            self.driver_env(rollout["version"])
        except UsageError as exc:
            self._end_rollout("failed", "rollout_failed", f"not started: {exc}", f"destructive rollout of "
                              f"{self.job.name} to {rollout['version']} asked by {rollout.get('by')}")
            return None
        self._drop_standby()  # first: it would take the lease the driver releases
        update_rollout(self.control, rollout, "resetting", old_driver_pid=self.state.driver_pid,
                       batch_before=lease.details.get("last_committed_batch") if lease is not None else None)
        self._event("rollout", reason=f"destructive rollout of {self.job.name} from "
                    f"{rollout.get('from_version') or 'the checkout'} to {rollout['version']} asked by "
                    f"{rollout.get('by')}: {rollout.get('reason') or 'no reason given'}",
                    outcome=f"the driver (pid {self.state.driver_pid}) stops after its micro-batch; its checkpoint and "
                            f"tables are moved aside; {rollout['version']} starts on a new checkpoint and rebuilds them",
                    rollout=rollout["id"], version=rollout["version"], asked_by=rollout.get("by"), destructive=True)
        return self._stop_driver_for(f"destructive rollout to version {rollout['version']}", lease, destructive=True)

    def reset_for_version(self, failure) -> None:
        """The driver is stopped: its checkpoint and tables are moved aside under the lease, and the new version becomes
        the job's (the supervisor then starts it: not a restart). A refused move ends the rollout ``failed``: the
        version before starts again on its own checkpoint."""
        from spark_jobs.control.rollout.destructive import MoveRefused, backup_folder, move_aside

        rollout = self.rollout
        try:
            moved = move_aside(self.lake, self.job, rollout)
        except MoveRefused as exc:
            self._end_rollout("failed", "rollout_failed", f"the checkpoint and tables were not moved: {exc}; version "
                              f"{self.version or 'of the checkout'} starts again on its checkpoint",
                              f"destructive rollout to version {rollout['version']}")
            return
        previous, self.version = self.version, rollout["version"]
        set_job_version(self.control, self.version, rollout.get("by") or "rollout", f"destructive rollout {rollout['id']}")
        backup = str(backup_folder(self.lake, self.job, rollout["id"]))
        update_rollout(self.control, rollout, "rebuilding", previous_version=previous, backup=backup, moved=moved,
                       reset_at=utc_iso())
        self._event("rollout_reset", reason=failure.reason if failure is not None else "a destructive rollout cut "
                    "short by the supervisor's end, carried on", outcome=f"the checkpoint and the tables were moved to "
                    f"{backup}; version {self.version} starts on a new checkpoint and rebuilds every table from the "
                    "input (not a restart: none of the budget)", rollout=rollout["id"], version=self.version,
                    moved=moved)

    def rebuilding(self) -> bool:
        return self.rollout is not None and self.rollout.get("phase") == "rebuilding"

    def _during_rebuild(self, lease: LeaseInfo | None):
        """``done`` once the new version's driver holds the lease and has committed its first batch."""
        if lease is None or lease.released or not self.driver.owns(lease.pid):
            return None
        if lease.details.get("last_committed_batch") is None:
            return None
        self._end_rollout("done", "rollout_done", f"version {self.rollout['version']} committed its first batch on the "
                          "new checkpoint; it goes on rebuilding the tables from the input (its backlog says how far)",
                          f"destructive rollout to version {self.rollout['version']}")
        return None

    def rebuild_failed(self, failure) -> None:
        """The new version ended before its first batch on the new checkpoint: the rollout ends ``failed``; the
        supervisor restarts it as any failure (the old checkpoint does not fit the new tables)."""
        rollout = self.rollout
        self._end_rollout("failed", "rollout_failed", f"version {rollout['version']} ended before its first batch on "
                          f"the new checkpoint: {failure.reason}; it is restarted as any failure (the old checkpoint, "
                          f"kept in {rollout.get('backup')}, does not fit the new tables); the way back is a "
                          f"destructive rollout to {rollout.get('from_version') or 'the checkout'}",
                          f"destructive rollout to version {rollout['version']}")
