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
``.spark/bench/trial-rollout.json``; exit status 0 when the goal was met and the table is exact (``passed``).
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from datetime import datetime

from tools.bench.rollout_bench import RolloutBench, gap_before, other_compatible, steady_intervals, trial_main

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
            events = bench.job.events()
            asked_at = next(i for i, e in enumerate(events) if e["kind"] == "rollout" and e.get("rollout") == rollout["id"])
            record["old_driver_stop"] = next((e["reason"] for e in events[asked_at:] if e["kind"] == "handover"), None)
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


def run(bench: RolloutBench, rollouts: int, seed: int | None = None) -> dict:
    """The whole trial on ``bench`` (not started yet): the report (``seed``: the bench's, for the report)."""
    started = time.monotonic()
    try:
        bench.start()
        records = measure_rollouts(bench, rollouts)
        end = bench.finish()
        commits = bench.commits()
    finally:
        bench.close()
    restarts = [e for e in bench.job.events() if e["kind"] in ("restart", "give_up")]
    report = {"trial": "rollout", **bench.described(), "seed": seed, **summary(records, commits), "rollouts": records,
              "restarts": len(restarts), "restart_reasons": [e["reason"] for e in restarts], **end,
              "seconds": round(time.monotonic() - started, 1), "load_averages": bench.load_averages}
    report["passed"] = bool(report["median_s"] is not None and report["median_s"] <= GOAL_MEDIAN_S
                            and report["rollouts_done"] == rollouts and report["exact"] and report["one_writer"]
                            and not restarts and not report["processes_left"])
    return report


def main(argv: list[str] | None = None, prog: str = "python -m tools.bench.rollouts") -> int:
    """``python -m spark_jobs trial rollout``: run it, print the JSON report, exit 0 when the goal was met."""
    return trial_main(argv, prog, "rollout", __doc__.split("\n")[0],
                      ("rollouts", 5, "rollouts, v2 and v2b in turn (default 5)"), run)


if __name__ == "__main__":
    sys.exit(main())
