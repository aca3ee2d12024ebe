"""A supervised job to roll out, for the rollout trials (:mod:`tools.bench.rollouts`, :mod:`tools.bench.rollout_kills`).

:class:`RolloutBench` is what a team has: ``python -m spark_jobs supervise cloudtrail_etl`` (its own process,
:class:`~tools.bench.supervised_job.SupervisedJob`) running the checkout's code (version 1) on a fresh lake, a
CloudTrail file landing every ``gap`` seconds (:class:`~tools.bench.recovery.Lander`), and releases of real code
changes (:mod:`tools.releases`: v2 and v2b compatible, v4 crashing in its first batch). A rollout is asked for as a
person asks, ``python -m spark_jobs rollout JOB VERSION``. What it reads back:

- :meth:`RolloutBench.commits`: ``cloudtrail_events``' Delta commits, each with the code version in its
  ``userMetadata``; :func:`gap_before` the time without commits at a change of version;
- :meth:`RolloutBench.check`: every landed event in the table exactly once (rows, distinct eventIDs, the landed
  events), one live driver of the job holding the lease, and each table's Delta log written by one writer (the
  stream's ``txn`` batch ids strictly increasing, commit after commit: no batch written twice, no two writers
  interleaved).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from spark_jobs.control.rollout.request import ACTIVE, read_rollout
from spark_jobs.launch.releases import RELEASES_ENV
from spark_jobs.model.lake import PROJECT_ROOT
from tools.bench.recovery import FIRST_COMMIT_TIMEOUT_S, TRIAL_ROOT, Lander
from tools.bench.supervised_job import JOB, SupervisedJob
from tools.releases import COMPATIBLE, CRASHES_IN_FIRST_BATCH, release_with

log = logging.getLogger("tools.bench")
TRIGGER = "processing-time:1s"  # a batch a second: the time without commits is the handover's, not the trigger's
# The registry's policy, with a probation short enough for several rollouts in a trial, room for the kills' restarts,
# and no warm standby of the job's own (the rollout starts the new version's): the documented defaults otherwise.
POLICY = {"warm_standby": False, "probation_batches": 2, "probation_seconds": 20, "max_restarts": 50,
          "window_seconds": 3600, "initial_backoff_seconds": 1, "max_backoff_seconds": 5, "poll_seconds": 0.5,
          "stop_grace_seconds": 90}
ROLLOUT_TIMEOUT_S = 900.0
CATCH_UP_TIMEOUT_S = 600.0
TABLES = ("cloudtrail_events", "cloudtrail_quarantine")


def add_bench_arguments(parser, name: str) -> None:
    """The options of the trial ``name`` that shape its :class:`RolloutBench`."""
    parser.add_argument("--seed", type=int, default=1, help="seed of the landed events (and the trial's draws; default 1)")
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between two landed files (default 1)")
    parser.add_argument("--records-per-file", type=int, default=20, help="events per landed file (default 20)")
    parser.add_argument("--trigger", default=TRIGGER, help=f"the job's trigger (default {TRIGGER})")
    parser.add_argument("--root", help=f"work folder (default {TRIAL_ROOT}/trial-{name}; emptied first)")


def bench_from(args, name: str) -> "RolloutBench":
    """The :class:`RolloutBench` the options of :func:`add_bench_arguments` ask for (logging to stderr)."""
    if args.gap <= 0 or args.records_per_file < 1:
        raise SystemExit("--gap must be > 0 and --records-per-file >= 1")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return RolloutBench(Path(args.root) if args.root else TRIAL_ROOT / f"trial-{name}", args.seed, args.gap,
                        args.records_per_file, args.trigger)


def trial_main(argv: list[str] | None, prog: str, name: str, description: str, count: tuple[str, int, str],
               run) -> int:
    """A rollout trial's command: ``--<count[0]> N`` (default ``count[1]``, help ``count[2]``) and the bench's
    options; ``run(bench, n, seed)`` gives the report, printed and written to ``.spark/bench/trial-<name>.json``;
    exit status 0 when it ``passed``."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(f"--{count[0]}", type=int, default=count[1], help=count[2])
    add_bench_arguments(parser, name)
    args = parser.parse_args(argv)
    wanted = getattr(args, count[0].replace("-", "_"))
    if wanted < 1:
        parser.error(f"--{count[0]} must be >= 1")
    report = run(bench_from(args, name), wanted, args.seed)
    text = json.dumps(report, indent=2)
    TRIAL_ROOT.mkdir(parents=True, exist_ok=True)
    (TRIAL_ROOT / f"trial-{name}.json").write_text(text + "\n")
    print(text)
    return 0 if report["passed"] else 1


def other_compatible(running: str | None) -> str:
    """The compatible release to roll out next from ``running`` (v2 and v2b in turn)."""
    names = list(COMPATIBLE)
    return names[(names.index(running) + 1) % len(names)] if running in names else names[0]


def gap_before(commits: list[dict], version: str, since_ms: float) -> dict | None:
    """The time without commits before ``version``'s first commit at or after ``since_ms``: from the commit before
    it (its version and timestamp) to it; None when ``version`` has not committed since."""
    for index, commit in enumerate(commits):
        if commit["code_version"] == version and commit["timestamp"] >= since_ms and index > 0:
            before = commits[index - 1]
            return {"from": before["code_version"], "to": version, "gap_s": (commit["timestamp"] - before["timestamp"]) / 1000,
                    "last_old_commit": before["delta_version"], "first_new_commit": commit["delta_version"]}
    return None


def steady_intervals(commits: list[dict]) -> list[float]:
    """Seconds between consecutive commits of the same version (the stream's ordinary pace)."""
    return [(b["timestamp"] - a["timestamp"]) / 1000 for a, b in zip(commits, commits[1:])
            if a["code_version"] == b["code_version"]]


def txn_problems(table: Path) -> list[str]:
    """Each commit of ``table``'s Delta log whose streaming ``txn`` batch id is not above the one before for the same
    writer (``appId``): a batch written twice, or two writers interleaved."""
    last: dict[str, tuple[int, int]] = {}
    problems = []
    for path in sorted((table / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            txn = json.loads(line).get("txn") if line.strip() else None
            if not txn:
                continue
            app, version, commit = txn["appId"], int(txn["version"]), int(path.stem)
            if app in last and version <= last[app][1]:
                problems.append(f"{table.name}: commit {commit} writes batch {version} of {app} after commit "
                                f"{last[app][0]} wrote batch {last[app][1]}")
            last[app] = (commit, version)
    return problems


class RolloutBench:
    """The supervised job, its landing and its releases under ``root`` (emptied first).

    :param root: the work folder.
    :param seed: the landed events' seed.
    :param gap: seconds between two landed files.
    :param records_per_file: events per landed file.
    :param trigger: the job's trigger.
    :param policy: RestartPolicy fields over :data:`POLICY`.
    """

    def __init__(self, root: Path, seed: int = 1, gap: float = 1.0, records_per_file: int = 20,
                 trigger: str = TRIGGER, policy: dict | None = None) -> None:
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        self.root, self.trigger = root, trigger
        self.landing, self.lake_root, self.releases = root / "landing", root / "lake", root / "releases"
        for name, changes in {**COMPATIBLE, **CRASHES_IN_FIRST_BATCH}.items():
            release_with(self.releases, name, changes)
        self.policy = {**POLICY, **(policy or {})}
        self.env = {**os.environ, RELEASES_ENV: str(self.releases)}
        self.lander = Lander(self.landing, gap, records_per_file, seed, delivered_as_s3_does=True)
        self.job: SupervisedJob | None = None
        self.load_averages: list[list[float]] = []

    def start(self) -> "RolloutBench":
        """Start landing and the supervisor; return once the job committed."""
        self.note_load()
        self.lander.start()
        self.job = SupervisedJob(self.landing, self.lake_root, self.trigger, self.root, self.policy, env=self.env)
        started = time.monotonic()
        self.job.wait(lambda: self.job.commits(), FIRST_COMMIT_TIMEOUT_S, "the first commit")
        log.info("rollout bench: the job committed %.1f s after the supervisor's start", time.monotonic() - started)
        return self

    def described(self) -> dict:
        """What the report says of the bench: the job, its trigger, the landing, the policy."""
        return {"job": JOB.name, "trigger": self.trigger, "file_every_s": self.lander.gap,
                "records_per_file": self.lander.records_per_file, "policy": self.policy}

    def note_load(self) -> None:
        self.load_averages.append([round(x, 2) for x in os.getloadavg()])

    @property
    def control(self) -> str:
        return str(self.job.control)

    # -- rollouts ----------------------------------------------------------------------------------------------

    def running_version(self) -> str | None:
        """The version the lease's holder runs."""
        lease = self.job.lease()
        return lease.details.get("version") if lease is not None and not lease.released else None

    def ask(self, version: str, reason: str = "trial") -> dict:
        """``python -m spark_jobs rollout cloudtrail_etl VERSION`` as a person runs it; the request written."""
        done = subprocess.run([sys.executable, "-m", "spark_jobs", "rollout", JOB.name, version, "--lake",
                               str(self.lake_root), "--by", "trial", "--reason", reason], cwd=PROJECT_ROOT,
                              env=self.env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"the rollout to {version} was not asked for (status {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-1000:]}")
        asked = read_rollout(self.control)
        log.info("rollout bench: asked %s -> %s (%s)", asked.get("from_version"), version, asked["id"])
        return asked

    def rollout_now(self, asked: dict) -> dict | None:
        found = read_rollout(self.control)
        return found if found and found.get("id") == asked["id"] else None

    def wait_ended(self, asked: dict, timeout: float = ROLLOUT_TIMEOUT_S) -> dict:
        """The rollout once it is in a final phase."""
        return self.job.wait(lambda: (r := self.rollout_now(asked)) and r["phase"] not in ACTIVE and r, timeout,
                             f"the rollout to {asked['version']} to end")

    def wait_committing(self, since: float, timeout: float = ROLLOUT_TIMEOUT_S):
        """The lease of a live driver that committed a batch after ``since`` (epoch seconds)."""
        def committing():
            lease = self.job.live_driver()
            fresh = any(p.stat().st_mtime > since for p in self.job.commits().values())
            return lease if lease is not None and fresh else None

        return self.job.wait(committing, timeout, "a live driver committing")

    # -- what the tables say ---------------------------------------------------------------------------------

    def commits(self) -> list[dict]:
        """``cloudtrail_events``' batch commits in order: Delta version, timestamp (ms), the code version."""
        from deltalake import DeltaTable

        history = DeltaTable(str(self.lake_root / "tables" / "cloudtrail_events")).history()
        return [{"delta_version": c["version"], "timestamp": c["timestamp"],
                 "code_version": json.loads(c["userMetadata"]).get("version")}
                for c in sorted(history, key=lambda c: c["version"]) if c.get("userMetadata")]

    def caught_up(self) -> bool:
        """No landed file waits and every planned batch is committed (``checkpoint inspect``)."""
        from spark_jobs.control.checkpoint.inspect import inspect_checkpoint

        report = inspect_checkpoint(JOB, str(self.lake_root), str(self.landing))
        return (report.backlog_files == 0 and report.in_flight_files == 0
                and report.latest_offset_batch == report.latest_commit_batch)

    def settle(self) -> dict:
        """Stop landing, wait until the job read every landed file, check the tables (:meth:`check`), land again."""
        self.lander.stop()
        try:
            self.job.wait(self.caught_up, CATCH_UP_TIMEOUT_S, "every landed file committed")
            return self.check()
        finally:
            self.lander.start()

    def drivers(self) -> list[int]:
        """The live Python drivers of this job on this lake (``python -m spark_jobs run cloudtrail_etl``)."""
        import psutil

        lake = str(self.lake_root)
        found = []
        for process in psutil.process_iter(["pid", "cmdline", "status"]):
            line = process.info["cmdline"] or []
            if (process.info["status"] != psutil.STATUS_ZOMBIE and "spark_jobs" in line and "run" in line
                    and JOB.name in line and lake in line):
                found.append(process.info["pid"])
        return sorted(found)

    def check(self) -> dict:
        """Exactly once, one writer: the figures and ``exact`` / ``one_writer``."""
        import deltalake

        ids = deltalake.DeltaTable(str(self.lake_root / "tables" / "cloudtrail_events")).to_pyarrow_table(
            columns=["eventID"]).column("eventID").to_pylist()
        counts, landed = Counter(ids), Counter(self.lander.event_ids)
        lease, drivers = self.job.lease(), self.drivers()
        holder = lease.pid if lease is not None and not lease.released and lease.alive_locally() else None
        txn = [p for name in TABLES if (self.lake_root / "tables" / name / "_delta_log").is_dir()
               for p in txn_problems(self.lake_root / "tables" / name)]
        found = {"events_landed": len(self.lander.event_ids), "rows": len(ids), "distinct_event_ids": len(counts),
                 "duplicated_events": sum(1 for n in counts.values() if n > 1),
                 "missing_events": len(set(landed) - set(counts)), "unexpected_events": len(set(counts) - set(landed)),
                 "exact": counts == landed, "drivers": drivers, "lease_holder": holder, "txn_problems": txn}
        found["one_writer"] = holder is not None and drivers == [holder] and not txn
        return found

    def finish(self) -> dict:
        """Stop landing, catch up, stop the supervisor (SIGTERM: a graceful stop); the final check."""
        self.lander.stop()
        try:
            self.job.wait(self.caught_up, CATCH_UP_TIMEOUT_S, "every landed file committed")
            found = self.check()
        finally:
            status, stop_s, left = self.job.stop(timeout=self.policy["stop_grace_seconds"] + 60)
        self.note_load()
        return {**found, "supervisor_exit_status": status, "graceful_stop_s": round(stop_s, 2),
                "processes_left": left}

    def close(self) -> None:
        """Whatever happened: no lander, no supervisor, no driver of this bench left."""
        import signal

        self.lander.stop()
        if self.job is not None and self.job.proc.poll() is None:
            self.job.stop(timeout=self.policy["stop_grace_seconds"] + 60)
        for pid in self.drivers():
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
