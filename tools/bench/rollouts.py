"""The handover's time without commits, over rollouts of a running continuous job (issue 59).

Usage::

    python -m spark_jobs trial rollout --rollouts 5 [--seed 1] [--gap 1] [--trigger processing-time:1s]

A real supervisor (``python -m spark_jobs supervise cloudtrail_etl``, its own process) runs the checkout's code on a
fresh lake while a CloudTrail file lands every ``--gap`` seconds (:class:`~tools.bench.rollout_bench.RolloutBench`).
It is rolled out ``--rollouts`` times, to two releases in turn, each a real small code change (v2, v2b, v2, ...:
:mod:`tools.releases`), each asked for as a person asks (``python -m spark_jobs rollout``) once the one before
passed its probation. A rollout's **time without commits** is the gap between the old version's last commit to
``cloudtrail_events`` and the new version's first: both read from the Delta log (its commit timestamps, and the
version each commit names in its ``userMetadata``). The stream's ordinary pace, the seconds between two commits of
one version, is reported beside it. At the end the landing stops, the job catches up, the supervisor is stopped and
the table must be exact (every landed event once), with one writer and no restart counted.

Goal (issue 59): the median of the rollouts' times without commits <= 5 s. The report (JSON) goes to stdout and
``.spark/bench/trial-rollout.json``; exit status 0 when the goal was met and the table is exact.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

from tools.bench.recovery import TRIAL_ROOT
from tools.bench.rollout_bench import POLICY, TRIGGER, RolloutBench, gap_before, other_compatible, steady_intervals

log = logging.getLogger("tools.bench")
GOAL_MEDIAN_S = 5.0


def _phase_at(rollout: dict, phase: str) -> str | None:
    return next((h["at"] for h in rollout.get("history", []) if h["phase"] == phase), None)


def measure_rollouts(bench: RolloutBench, rollouts: int) -> list[dict]:
    """Roll the running ``bench`` out ``rollouts`` times (the compatible releases in turn), each to its end; each
    rollout's record, with its time without commits."""
    records = []
    for index in range(rollouts):
        version = other_compatible(bench.running_version())
        bench.note_load()
        asked = bench.ask(version, f"trial rollout {index + 1} of {rollouts}")
        rollout = bench.wait_ended(asked)
        record = {"rollout": index + 1, "from": rollout.get("from_version"), "to": version, "phase": rollout["phase"],
                  "outcome": rollout.get("outcome"), "preflight_s": (rollout.get("preflight") or {}).get("seconds"),
                  "batches_on_probation": rollout.get("batches_on_probation"),
                  "phases": {h["phase"]: h["at"] for h in rollout.get("history", [])}}
        handover = _phase_at(rollout, "handover")
        if rollout["phase"] == "done" and handover is not None:
            since_ms = datetime.fromisoformat(handover).timestamp() * 1000
            gap = bench.job.wait(lambda: gap_before(bench.commits(), version, since_ms), 120,
                                 f"version {version}'s first commit in the table")
            record.update(gap)
            events = [e for e in bench.job.events() if e.get("rollout") == rollout["id"] and e["kind"] == "handover"]
            record["old_driver_stop"] = events[0]["reason"] if events else None
            log.info("trial rollout %d: %s -> %s, %.2f s without commits", index + 1, record["from"], version,
                     record["gap_s"])
        else:
            log.warning("trial rollout %d: %s -> %s ended %s: %s", index + 1, record["from"], version,
                        rollout["phase"], rollout.get("outcome"))
        records.append(record)
    return records


def summary(records: list[dict], commits: list[dict]) -> dict:
    """The figures of ``records`` (the rollouts) against the goal."""
    gaps = [r["gap_s"] for r in records if "gap_s" in r]
    pace = steady_intervals(commits)
    return {"gaps_s": [round(g, 2) for g in gaps],
            "median_s": round(statistics.median(gaps), 2) if gaps else None, "max_s": round(max(gaps), 2) if gaps else None,
            "steady_commit_interval_median_s": round(statistics.median(pace), 2) if pace else None,
            "steady_commit_interval_max_s": round(max(pace), 2) if pace else None,
            "rollouts_done": sum(r["phase"] == "done" for r in records),
            "goal": f"median of the times without commits <= {GOAL_MEDIAN_S:g} s"}


def run(root: Path, rollouts: int, seed: int = 1, gap: float = 1.0, records_per_file: int = 20,
        trigger: str = TRIGGER, policy: dict | None = None) -> dict:
    """The whole trial under ``root``: the report."""
    bench = RolloutBench(root, seed, gap, records_per_file, trigger, policy)
    started = time.monotonic()
    try:
        bench.start()
        records = measure_rollouts(bench, rollouts)
        end = bench.finish()
        commits = bench.commits()
    finally:
        bench.close()
    restarts = [e for e in bench.job.events() if e["kind"] in ("restart", "give_up")]
    report = {"trial": "rollout", "job": "cloudtrail_etl", "trigger": trigger, "file_every_s": gap,
              "records_per_file": records_per_file, "policy": {**POLICY, **(policy or {})}, "seed": seed,
              **summary(records, commits), "rollouts": records, "restarts": len(restarts),
              "restart_reasons": [e["reason"] for e in restarts], **end,
              "seconds": round(time.monotonic() - started, 1), "load_averages": bench.load_averages}
    report["met"] = bool(report["median_s"] is not None and report["median_s"] <= GOAL_MEDIAN_S
                         and report["rollouts_done"] == rollouts and report["exact"] and report["one_writer"]
                         and not restarts and not report["processes_left"])
    return report


def main(argv: list[str] | None = None, prog: str = "python -m tools.bench.rollouts") -> int:
    """``python -m spark_jobs trial rollout``: run it, print the JSON report, exit 0 when the goal was met."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=5, help="rollouts, v2 and v2b in turn (default 5)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the landed events (default 1)")
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between two landed files (default 1)")
    parser.add_argument("--records-per-file", type=int, default=20, help="events per landed file (default 20)")
    parser.add_argument("--trigger", default=TRIGGER, help=f"the job's trigger (default {TRIGGER})")
    parser.add_argument("--root", help=f"work folder (default {TRIAL_ROOT}/trial-rollout; emptied first)")
    args = parser.parse_args(argv)
    if args.rollouts < 1 or args.gap <= 0 or args.records_per_file < 1:
        parser.error("--rollouts and --records-per-file must be >= 1, --gap > 0")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    report = run(Path(args.root) if args.root else TRIAL_ROOT / "trial-rollout", args.rollouts, args.seed, args.gap,
                 args.records_per_file, args.trigger)
    text = json.dumps(report, indent=2)
    TRIAL_ROOT.mkdir(parents=True, exist_ok=True)
    (TRIAL_ROOT / "trial-rollout.json").write_text(text + "\n")
    print(text)
    return 0 if report["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
