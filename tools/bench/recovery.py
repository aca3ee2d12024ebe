"""Supervision trials: recovery after ``kill -9`` of the driver, and a soak without false restarts.

Usage::

    python -m spark_jobs trial recovery --kills 5     # median and max seconds from kill to next commit
    python -m spark_jobs trial soak --minutes 30      # a healthy supervised job: restarts must be 0
    python -m spark_jobs trial recovery --through airflow   # the same, supervised by a running scheduler
    python -m spark_jobs trial recovery --through airflow --kills 5 --standby   # each kill taken over by a warm standby
    python -m spark_jobs trial recovery --through airflow --standby --kills 9 --kill driver,jvm,group
    python -m spark_jobs trial queue-kills --kills 10   # kill -9 of queue-mode drivers (tools/bench/queue_kills.py)
    python -m spark_jobs trial rollout --rollouts 5     # the handover's time without commits (tools/bench/rollouts.py)
    python -m spark_jobs trial rollout-kills --kills 10   # kill -9 during rollouts (tools/bench/rollout_kills.py)

Both run the job as a person does: ``python -m spark_jobs supervise cloudtrail_etl`` (its own
process; the registry's restart policy and continuous trigger unless ``--trigger`` is given) on a
fresh lake, while a steady stream of CloudTrail files lands in its input folder (atomically: temp
name, then rename). ``recovery`` waits until the job commits, then ``kill -9``s the Python driver
(the pid in its lease) ``--kills`` times and times each kill to the first batch committed by the
driver that replaced it (the first commit file written after the new lease was taken, by its
modification time). Each kill is a *first* failure: the trial gives the supervisor
``healthy_reset_seconds`` of ``--healthy-reset`` (60 s) and kills a random 5-15 s after the
supervisor reset its consecutive failures, so every restart is a first failure, restarted at once (back-to-back
kills back off 0, 2, 4, 8, 16 s by design; ``--healthy-reset 0`` measures that). With ``--standby`` the supervisor
keeps a warm standby (``RestartPolicy.warm_standby``) and each kill waits until it is warm: each recovery is a
take-over (``take_over`` in each kill's record), judged by the standby's goal (:data:`STANDBY_RECOVERY_GOALS`).
``--kill`` names what each kill hits, in turn: ``driver``, the Python driver (the pid ``status`` shows and the
lease holds: under spark-submit, the JVM's child); ``jvm``, the Java process of that driver's group (the OOM killer's
usual choice); ``group``, the driver's whole process group. ``soak`` kills nothing for ``--minutes``. With ``--through airflow`` the supervisor is the ``supervise`` task
of ``cloudtrail_etl_continuous`` under a running Airflow (:mod:`tools.bench.recovery_airflow`).
At the end the landing stops, the job catches up, the supervisor is stopped with SIGTERM (a
graceful stop) and the trial checks that every landed event is in ``cloudtrail_events`` exactly
once, that the restarts in ``events.jsonl`` are exactly the kills, and that no process of the
supervisor's is left. The JSON report goes to stdout and ``.spark/bench/trial-<name>.json``; logs
to stderr. Exit status 0 when every goal was met, 1 otherwise. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import logging
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT
from tools.bench.supervised_job import JOB, SupervisedJob, batch_files, committed_files

log = logging.getLogger("tools.bench")
TRIAL_ROOT = PROJECT_ROOT / ".spark" / "bench"
TRIALS = ("recovery", "soak")
# trials with arguments of their own: name -> module with main(argv, prog)
OTHER_TRIALS = {"queue-kills": "tools.bench.queue_kills", "rollout": "tools.bench.rollouts",
                "rollout-kills": "tools.bench.rollout_kills"}
THROUGH = ("cli", "airflow")
RECOVERY_GOALS = {"median_s": 20.0, "max_s": 30.0}  # issue 27, goal 4 (issue 13 asked 45 s and 60 s)
STANDBY_RECOVERY_GOALS = {"median_s": 5.0, "max_s": 10.0}  # issue 41: a warm standby takes each kill over
FIRST_COMMIT_TIMEOUT_S = 300.0
RECOVERY_TIMEOUT_S = 300.0
CATCH_UP_TIMEOUT_S = 600.0


def add_trial_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``trial`` command's options."""
    parser.add_argument("trial", choices=TRIALS, help="recovery: kill -9 the driver N times; soak: no kills")
    parser.add_argument("--kills", type=int, default=5, help="recovery: kills of the driver (default 5, at least 1)")
    parser.add_argument("--minutes", type=float, default=30.0, help="soak: how long the job runs (default 30)")
    parser.add_argument("--gap", type=float, default=5.0, help="seconds between two landed files (default 5)")
    parser.add_argument("--records-per-file", type=int, default=20, help="events per landed file (default 20)")
    parser.add_argument("--trigger", help="the job's trigger (default: the registry's continuous_trigger)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the events and of the kill times (default 1)")
    parser.add_argument("--root", help=f"work folder (default {TRIAL_ROOT}/trial-<name>; emptied first)")
    parser.add_argument("--through", choices=THROUGH, default="cli",
                        help="cli: the supervisor is `python -m spark_jobs supervise` (default); airflow: it is the "
                             "`supervise` task of <job>_continuous under a running Airflow on loopback (its own "
                             "home and port in the trial folder), started by unpausing the DAG and stopped by "
                             "pausing it")
    parser.add_argument("--kill", default="driver",
                        help="recovery: what each kill hits, comma-separated and taken in turn: driver (the Python "
                             "driver, the pid in its lease and in `status`), jvm (its group's Java process), group "
                             "(the whole process group); default driver")
    parser.add_argument("--standby", action="store_true",
                        help="recovery: the supervisor keeps a warm standby (RestartPolicy.warm_standby), and each "
                             "kill waits until the standby is warm, so every kill is a take-over")
    parser.add_argument("--healthy-reset", type=float, default=60.0,
                        help="recovery: the supervisor's healthy_reset_seconds, and each kill waits until the driver "
                             "was healthy that long (its consecutive failures reset), so every kill is a first "
                             "failure with the initial backoff (default 60; 0: the registry's policy, kills back to "
                             "back, each backing off longer)")


class Lander:
    """Lands one gzipped CloudTrail file every ``gap`` seconds (temp name, then rename) in a thread.

    :param folder: the landing folder.
    :param gap: seconds between files.
    :param records_per_file: events per file.
    :param seed: the events' seed.
    :param delivered_as_s3_does: name each file as CloudTrail's S3 delivery does (``YYYY/MM/DD/<account>_CloudTrail_
        <region>_<delivery time>_<id>.json.gz``), so the job reads it by its key layout as in production; else a
        flat ``trial_<n>.json.gz`` with no delivery date.
    """

    def __init__(self, folder: Path, gap: float, records_per_file: int, seed: int,
                 delivered_as_s3_does: bool = False) -> None:
        self.folder, self.gap, self.records_per_file = folder, gap, records_per_file
        self.delivered_as_s3_does = delivered_as_s3_does
        self.rng = random.Random(seed)
        self.event_ids: list[str] = []
        self.files: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        folder.mkdir(parents=True, exist_ok=True)

    def land_one(self) -> None:
        from tools.sample_data import generate_records

        now = datetime.now(UTC)
        records = generate_records(self.rng, self.records_per_file, now)
        name = f"trial_{len(self.files):06d}.json.gz"
        if self.delivered_as_s3_does:
            name = f"{now:%Y/%m/%d}/111122223333_CloudTrail_us-east-1_{now:%Y%m%dT%H%MZ}_{len(self.files):016x}.json.gz"
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.parent / f".{path.name}.tmp"
        temp.write_bytes(gzip.compress(json.dumps({"Records": records}).encode()))
        os.replace(temp, path)
        self.files.append(name)
        self.event_ids.extend(record["eventID"] for record in records)

    def _loop(self) -> None:
        started, landed = time.monotonic(), 0
        while not self._stop.is_set():
            self.land_one()
            landed += 1
            self._stop.wait(max(0.0, started + self.gap * landed - time.monotonic()))

    def start(self) -> "Lander":
        """Start landing (again, after :meth:`stop`)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="lander", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


KILL_KINDS = ("driver", "jvm", "group")


def kill_target(lease_pid: int, kind: str) -> tuple[str, int]:
    """What ``kill -9`` hits for ``kind`` (:data:`KILL_KINDS`) of the driver whose lease names ``lease_pid``:
    ``("pid", n)`` or ``("group", pgid)``."""
    import psutil

    group = os.getpgid(lease_pid)
    if kind == "driver":
        return "pid", lease_pid
    if kind == "group":
        return "group", group
    for process in psutil.process_iter(["pid", "name"]):
        try:
            if process.info["name"] == "java" and os.getpgid(process.info["pid"]) == group:
                return "pid", process.info["pid"]
        except (ProcessLookupError, psutil.Error):
            continue
    raise RuntimeError(f"no Java process in the process group {group} of the driver pid {lease_pid}")


def _kill_and_time(job: SupervisedJob, rng: random.Random, wait_for_reset: bool, standby: bool = False,
                   kind: str = "driver") -> dict:
    """Kill -9 the running driver (``kind``: :data:`KILL_KINDS`) once it has committed (and, with ``wait_for_reset``,
    once the supervisor reset its consecutive failures; with ``standby``, once a warm standby waits); seconds from the
    kill to the next driver's commit."""
    lease = job.wait(job.live_driver, RECOVERY_TIMEOUT_S, "a running driver")
    job.wait(lambda: any(p.stat().st_mtime > datetime.fromisoformat(lease.started_at).timestamp()
                         for p in job.commits().values()), RECOVERY_TIMEOUT_S, "a commit by the running driver")
    if wait_for_reset:
        job.wait(lambda: job.state().get("consecutive_failures") == 0, RECOVERY_TIMEOUT_S + 600,
                 "the supervisor's healthy reset")
    time.sleep(rng.uniform(5, 15))
    if standby:
        from spark_jobs.control.supervision.standby_state import read_standby

        def warm() -> bool:  # the standby says it waits, and it is the supervisor's (under spark-submit, the JVM's child)
            said, started = read_standby(str(job.control)) or {}, job.state().get("standby_pid")
            try:
                return bool(said.get("pid") and started and os.getpgid(said["pid"]) == started)
            except ProcessLookupError:
                return False

        job.wait(warm, RECOVERY_TIMEOUT_S, "a warm standby")
    lease = job.wait(job.live_driver, RECOVERY_TIMEOUT_S, "a running driver")
    in_flight = bool(set(batch_files(job.checkpoint / "offsets")) - set(job.commits()))
    what, target = kill_target(lease.pid, kind)
    killed_at = time.time()
    (os.killpg if what == "group" else os.kill)(target, signal.SIGKILL)
    log.info("trial: kill -9 of the %s (%s %d) of driver pid %d (lease generation %d)%s", kind, what, target,
             lease.pid, lease.generation, ", a batch in flight" if in_flight else "")

    def next_driver():
        new = job.lease()
        return new if new is not None and new.generation > lease.generation else None

    new = job.wait(next_driver, RECOVERY_TIMEOUT_S, "a new driver taking the lease")
    backoff = next((e.get("backoff_seconds") for e in reversed(job.events()) if e["kind"] == "restart"), None)
    taken_at = datetime.fromisoformat(new.started_at).timestamp()

    def committed_after():
        times = [p.stat().st_mtime for p in job.commits().values() if p.stat().st_mtime >= taken_at]
        return min(times) if times else None

    committed_at = job.wait(committed_after, RECOVERY_TIMEOUT_S, "a commit after the restart")
    take_over = next((bool(e.get("take_over")) for e in reversed(job.events()) if e["kind"] == "restart"), False)
    result = {"killed": kind, "killed_pid": target, "driver_pid": lease.pid, "batch_in_flight": in_flight, "backoff_s": backoff, "take_over": take_over,
              "lease_taken_after_s": round(taken_at - killed_at, 2),
              "recovery_s": round(committed_at - killed_at, 2)}
    log.info("trial: recovered in %.1f s (new driver took the lease after %.1f s)", result["recovery_s"],
             result["lease_taken_after_s"])
    return result


def _table_event_ids(lake: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "spark_jobs", "sql", "--lake", str(lake), "--format", "json",
                           "--limit", "100000000", "SELECT eventID FROM cloudtrail_events"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"reading cloudtrail_events failed:\n{done.stderr[-2000:]}")
    return [json.loads(line)["eventID"] for line in done.stdout.splitlines() if line.strip()]


def run_supervised(name: str, args: argparse.Namespace) -> dict:
    """One trial (``recovery`` or ``soak``): the report as a dict."""
    from collections import Counter

    root = Path(args.root) if args.root else TRIAL_ROOT / f"trial-{name}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    landing, lake = root / "landing", root / "lake"
    rng = random.Random(args.seed)
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    overrides = {"healthy_reset_seconds": args.healthy_reset} if name == "recovery" and args.healthy_reset else {}
    standby = name == "recovery" and getattr(args, "standby", False)
    if name == "recovery":
        overrides["warm_standby"] = standby  # the registry's default for the job, stated either way
    lander = Lander(landing, args.gap, args.records_per_file, args.seed).start()
    through = getattr(args, "through", "cli")
    if through == "airflow":
        from tools.bench.recovery_airflow import AirflowSupervisedJob

        job: SupervisedJob = AirflowSupervisedJob(landing, lake, args.trigger, root, overrides)
    else:
        job = SupervisedJob(landing, lake, args.trigger, root, overrides)
    started = time.monotonic()
    kills: list[dict] = []
    try:
        job.wait(lambda: job.commits(), FIRST_COMMIT_TIMEOUT_S, "the first commit")
        log.info("trial %s: first commit after %.1f s", name, time.monotonic() - started)
        if name == "recovery":
            kinds = kill_kinds(args.kill)
            for index in range(args.kills):
                log.info("trial: kill %d of %d", index + 1, args.kills)
                kills.append(_kill_and_time(job, rng, wait_for_reset="healthy_reset_seconds" in overrides,
                                            standby=standby, kind=kinds[index % len(kinds)]))
        else:
            deadline = started + args.minutes * 60
            while time.monotonic() < deadline:
                job.check_alive()
                time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        lander.stop()
        wanted = set(lander.files)
        job.wait(lambda: wanted <= committed_files(job.checkpoint)
                 and set(batch_files(job.checkpoint / "offsets")) == set(job.commits()),
                 CATCH_UP_TIMEOUT_S, "catching up with every landed file")
    finally:
        lander.stop()
        status, stop_s, left = job.stop(timeout=JOB.restart.stop_grace_seconds + 60)
    ids = _table_event_ids(lake)
    events = job.events()
    restarts = [e for e in events if e["kind"] == "restart"]
    exact = Counter(ids) == Counter(lander.event_ids)
    report = {
        "trial": name,
        "through": through,
        "standby": standby,
        "job": JOB.name,
        "trigger": args.trigger or JOB.continuous_trigger,
        "policy": {**asdict(JOB.restart), **(overrides or {})},
        "lease_ttl_s": JOB.health.lease_ttl_seconds,
        "files_landed": len(lander.files),
        "events_landed": len(lander.event_ids),
        "events_in_table": len(ids),
        "distinct_events_in_table": len(set(ids)),
        "tables_exact": exact,
        "batches_committed": len(job.commits()),
        "restarts": len(restarts),
        "restart_reasons": [e["reason"] for e in restarts],
        "give_ups": sum(e["kind"] == "give_up" for e in events),
        "supervisor_exit_status": status,
        "graceful_stop_s": round(stop_s, 2),
        "processes_left": left,
        "ran_for_s": round(time.monotonic() - started, 1),
        "load_average_at_start": load_at_start,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    if name == "recovery":
        times = [k["recovery_s"] for k in kills]
        goals = STANDBY_RECOVERY_GOALS if standby else RECOVERY_GOALS
        report.update(kills=kills, median_s=round(statistics.median(times), 2), max_s=max(times),
                      goal=f"median <= {goals['median_s']:g} s, max <= {goals['max_s']:g} s")
        report["met"] = (report["median_s"] <= goals["median_s"] and report["max_s"] <= goals["max_s"]
                         and exact and len(restarts) == len(kills) and not left and status == 0
                         and (not standby or all(k["take_over"] for k in kills)))
    else:
        report.update(minutes=args.minutes, goal="0 restarts, tables exact")
        report["met"] = not restarts and exact and not left and status == 0
    return report


def kill_kinds(text: str) -> list[str]:
    """``--kill``'s kinds, in turn.

    :raises UsageError: naming a kind that is not one of :data:`KILL_KINDS`.
    """
    from spark_jobs.model.errors import UsageError

    kinds = [k.strip() for k in text.split(",") if k.strip()]
    wrong = [k for k in kinds if k not in KILL_KINDS]
    if wrong or not kinds:
        raise UsageError(f"--kill {text!r}: {', '.join(wrong) or 'nothing'} is not a kind; give some of "
                         f"{', '.join(KILL_KINDS)}, comma-separated")
    return kinds


def run_trial(args: argparse.Namespace) -> int:
    """``python -m spark_jobs trial ...``: run it, print the JSON report, exit 0 when every goal was met."""
    from spark_jobs.model.errors import UsageError

    if args.kills < 1 or args.minutes <= 0 or args.gap <= 0 or args.records_per_file < 1:
        raise UsageError("--kills and --records-per-file must be >= 1, --minutes and --gap > 0")
    kill_kinds(args.kill)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    report = run_supervised(args.trial, args)
    TRIAL_ROOT.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report, indent=2, sort_keys=False)
    suffix = "" if getattr(args, "through", "cli") == "cli" else f"-{args.through}"
    (TRIAL_ROOT / f"trial-{args.trial}{suffix}.json").write_text(text + "\n")
    print(text)
    return 0 if report["met"] else 1


def main(argv: list[str] | None = None, prog: str = "python -m tools.bench.recovery") -> int:
    """``python -m spark_jobs trial`` (and ``python -m tools.bench.recovery``): run a supervision trial, or the
    queue-mode kill trials (``trial queue-kills``, :mod:`tools.bench.queue_kills`)."""
    if argv and argv[0] in OTHER_TRIALS:
        return importlib.import_module(OTHER_TRIALS[argv[0]]).main(argv[1:], f"{prog} {argv[0]}")
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    add_trial_arguments(parser)
    return run_trial(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
