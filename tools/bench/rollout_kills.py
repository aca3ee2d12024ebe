"""Random ``kill -9`` during rollouts of a running continuous job: each ends in a defined state, exactly once, one
writer (issue 59).

Usage::

    python -m spark_jobs trial rollout-kills --kills 10 [--seed 1]

The job runs supervised as in ``trial rollout`` (:class:`~tools.bench.rollout_bench.RolloutBench`: a real
``python -m spark_jobs supervise``, files landing every second, releases of real code changes). Each trial asks for
a rollout (a compatible release, v2 and v2b in turn; for the rollback phase v4, which crashes in its first batch)
and ``kill -9``s one thing at a random moment of one phase of it:

- phases: ``preflight`` (the new version's standby checks and warms up beside the running driver), ``handover`` (the
  old driver finishes its micro-batch, the standby takes the lease), ``probation`` (the new version runs, watched),
  ``rollback`` (v4 crashed; the version before starts again from the same checkpoint, until its first commit);
- what is killed, as a person or the kernel would: ``old`` (the old version's driver, its whole process group),
  ``new`` (the new version's standby or driver, its group), ``jvm`` (the Java process of one of them: the OOM
  killer's usual choice), ``supervisor`` (the ``supervise`` process itself; the trial starts it again, as Airflow's
  retry or a person would).

The phases are taken in turn and each one's targets in a seeded order; the moment is drawn within the phase. The
phase actually hit is read at the kill (``rollout.json``'s phase; for ``rollback``, whether the restored version had
committed yet). Then the trial waits until the rollout ended and a driver commits again, lets the job catch up (the
landing paused) and checks: the rollout ended in a defined state (``done`` with the new version running;
``refused``, ``failed``, ``interrupted`` or ``rolled_back`` with the old version running), every landed event is in
``cloudtrail_events`` exactly once (rows == distinct eventIDs == events landed), one live driver holds the lease and
each table's Delta log has one writer (:meth:`~tools.bench.rollout_bench.RolloutBench.check`). The report (JSON,
one record per trial) goes to stdout and ``.spark/bench/trial-rollout-kills.json``; exit status 0 when every trial
passed.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sys
import time
from datetime import datetime

from spark_jobs.control.rollout.request import ACTIVE
from tools.bench.recovery import kill_target
from tools.bench.rollout_bench import RolloutBench, other_compatible, trial_main
from tools.releases import CRASHES_IN_FIRST_BATCH

log = logging.getLogger("tools.bench")
PHASES = ("preflight", "handover", "probation", "rollback")
TARGETS = {"preflight": ("old", "new", "jvm", "supervisor"), "handover": ("old", "new", "jvm", "supervisor"),
           "probation": ("new", "jvm", "supervisor"), "rollback": ("old", "jvm", "supervisor")}
# the moment of the kill, in seconds after the phase began (pre-flight lasts a JVM's start and its checks, 20-60 s
# here; a handover a few seconds; probation POLICY's 20 s and more; a rollback a cold start)
MOMENT_S = {"preflight": (0.5, 20.0), "handover": (0.0, 2.0), "probation": (0.5, 15.0), "rollback": (0.0, 8.0)}
FINAL = {"done", "refused", "failed", "interrupted", "rolled_back"}
PHASE_TIMEOUT_S = 600.0


def plan(kills: int, rng: random.Random) -> list[tuple[str, str]]:
    """``kills`` (phase, target) pairs: the phases in turn; for each, a target the phase allows, the least killed so
    far (then the least in that phase; ties drawn), so that every phase and every target is hit about as often."""
    from collections import Counter

    overall, pairs, chosen = Counter(), Counter(), []
    for index in range(kills):
        phase = PHASES[index % len(PHASES)]
        fewest = min((overall[t], pairs[phase, t]) for t in TARGETS[phase])
        target = rng.choice([t for t in TARGETS[phase] if (overall[t], pairs[phase, t]) == fewest])
        overall[target] += 1
        pairs[phase, target] += 1
        chosen.append((phase, target))
    return chosen


def _group_of(pid: int | None) -> int | None:
    try:
        return os.getpgid(pid) if pid else None
    except ProcessLookupError:
        return None


class Trial:
    """One rollout and one kill during it."""

    def __init__(self, bench: RolloutBench, phase: str, target: str, rng: random.Random) -> None:
        self.bench, self.phase, self.target, self.rng = bench, phase, target, rng
        self.record: dict = {"phase": phase, "target": target}

    def _rollout(self) -> dict | None:
        return self.bench.rollout_now(self.asked)

    def _wait_phase(self, phases: tuple[str, ...]) -> dict:
        return self.bench.job.wait(lambda: (r := self._rollout()) and r["phase"] in phases and r, PHASE_TIMEOUT_S,
                                   f"the rollout's phase {' or '.join(phases)}")

    def run(self) -> dict:
        bench = self.bench
        old_lease = bench.wait_committing(0)
        running = old_lease.details.get("version")
        version = next(iter(CRASHES_IN_FIRST_BATCH)) if self.phase == "rollback" else other_compatible(running)
        self.record.update(from_version=running, version=version)
        bench.note_load()
        self.asked = bench.ask(version, f"trial: kill -9 of {self.target} during {self.phase}")
        old_group = _group_of(old_lease.pid)
        # the phase, or (missed: it was short) the first one after it; a rollback begins once the rollout says so
        first = "rolled_back" if self.phase == "rollback" else self.phase
        self._wait_phase((*ACTIVE[ACTIVE.index(first):], *FINAL) if first in ACTIVE else tuple(FINAL))
        moment = self.rng.uniform(*MOMENT_S[self.phase])
        time.sleep(moment)
        self.record["moment_s"] = round(moment, 2)
        self._kill(old_group)
        self._recover()
        return self.record

    def _hit(self) -> str:
        """The phase the rollout is in now (for the rollback trials: ``rollback`` until the restored version's first
        commit after the rollback)."""
        rollout = self._rollout() or {}
        if self.phase == "rollback" and rollout.get("phase") == "rolled_back":
            ended = datetime.fromisoformat(rollout["ended_at"]).timestamp()
            committed = any(p.stat().st_mtime > ended for p in self.bench.job.commits().values())
            return "after the rollback" if committed else "rollback"
        return rollout.get("phase", "?")

    def _target_pid(self, old_group: int | None) -> tuple[str, int | None]:
        """(whose, a pid of that process group): the old version's driver, or the new version's standby (its driver
        on probation); in a rollback the version before, started again."""
        job = self.bench.job
        if self.phase == "rollback":
            return "old", job.state().get("driver_pid")
        lease = job.live_driver()
        new = lease.pid if self.phase == "probation" and lease is not None else (self._rollout() or {}).get(
            "standby_pid")
        if self.target == "old":
            return "old", old_group
        if self.target == "new" or self.phase == "probation":
            return "new", new
        return ("old", old_group) if self.rng.random() < 0.5 else ("new", new)  # a JVM: the old one's or the new one's

    def _kill(self, old_group: int | None) -> None:
        job = self.bench.job
        self.record["phase_hit"] = self._hit()
        if self.target == "supervisor":
            pid = job.proc.pid
            os.kill(pid, signal.SIGKILL)
            job.proc.wait()
            self.record["killed"] = f"the supervisor (pid {pid})"
            log.info("trial: kill -9 of the supervisor (pid %d) in %s", pid, self.record["phase_hit"])
            job.restart()
            return
        whose, pid = self._target_pid(old_group)
        if _group_of(pid) is None:
            self.record["killed"] = f"nothing: the {whose} version's process was gone"
            log.warning("trial: no %s process to kill in %s", whose, self.record["phase_hit"])
            return
        kind = "jvm" if self.target == "jvm" else "group"
        try:
            what, number = kill_target(pid, kind)
        except RuntimeError:  # no JVM yet (the driver's Python starts it): the group
            what, number = "group", os.getpgid(pid)
        (os.killpg if what == "group" else os.kill)(number, signal.SIGKILL)
        self.record["killed"] = f"{'the JVM' if what == 'pid' else 'the process group'} ({what} {number}) of the " \
                                f"{whose} version's {'driver' if whose == 'old' else 'standby or driver'}"
        log.info("trial: kill -9 %s in %s", self.record["killed"], self.record["phase_hit"])

    def _recover(self) -> None:
        bench = self.bench
        started = time.monotonic()
        rollout = bench.wait_ended(self.asked)
        lease = bench.wait_committing(time.time())
        self.record.update(outcome=rollout["phase"], phases=[h["phase"] for h in rollout.get("history", [])],
                           outcome_text=rollout.get("outcome"),
                           running=lease.details.get("version"), recovered_in_s=round(time.monotonic() - started, 1))
        wanted = self.record["version"] if rollout["phase"] == "done" else self.record["from_version"]
        self.record["defined"] = rollout["phase"] in FINAL and self.record["running"] == wanted
        check = bench.settle()
        self.record.update(check)
        self.record["passed"] = bool(self.record["defined"] and check["exact"] and check["one_writer"])
        log.info("trial: %s -> %s: %s, running %s, exact %s, one writer %s", self.record["from_version"],
                 self.record["version"], rollout["phase"], self.record["running"], check["exact"], check["one_writer"])


def run_kill_trials(bench: RolloutBench, kills: int, seed: int = 1,
                    pairs: list[tuple[str, str]] | None = None) -> list[dict]:
    """``kills`` trials on the running ``bench`` (``pairs``: these (phase, target) instead of :func:`plan`'s); their
    records, each also appended to ``<bench root>/trials.jsonl`` as it ends (a long run cut short keeps them)."""
    rng = random.Random(seed)
    chosen = plan(kills, rng) if pairs is None else list(pairs)
    records = []
    for index, (phase, target) in enumerate(chosen):
        log.info("trial %d of %d: kill -9 of %s during %s", index + 1, len(chosen), target, phase)
        record = {"trial": index + 1, **Trial(bench, phase, target, rng).run()}
        records.append(record)
        with open(bench.root / "trials.jsonl", "a") as out:
            out.write(json.dumps(record) + "\n")
    return records


def run(bench: RolloutBench, kills: int, seed: int = 1) -> dict:
    """The whole trial on ``bench`` (not started yet): the report."""
    started = time.monotonic()
    try:
        bench.start()
        trials = run_kill_trials(bench, kills, seed)
        end = bench.finish()
    finally:
        bench.close()
    events = bench.job.events()
    report = {"trial": "rollout-kills", **bench.described(), "seed": seed, "kills": kills,
              "phases_hit": sorted({t["phase_hit"] for t in trials}), "passed_trials": sum(t["passed"] for t in trials),
              "outcomes": {o: sum(t["outcome"] == o for t in trials) for o in sorted({t["outcome"] for t in trials})},
              "restarts": sum(e["kind"] == "restart" for e in events),
              "give_ups": sum(e["kind"] == "give_up" for e in events), "final": end, "trials": trials,
              "seconds": round(time.monotonic() - started, 1), "load_averages": bench.load_averages}
    report["passed"] = (report["passed_trials"] == kills and end["exact"] and not end["txn_problems"]
                        and not end["processes_left"] and not report["give_ups"])
    return report


def main(argv: list[str] | None = None, prog: str = "python -m tools.bench.rollout_kills") -> int:
    """``python -m spark_jobs trial rollout-kills``: run the trials, print the JSON report, exit 0 when all passed."""
    return trial_main(argv, prog, "rollout-kills", __doc__.split("\n")[0],
                      ("kills", 10, "trials, one kill -9 each (default 10)"), run)


if __name__ == "__main__":
    sys.exit(main())
