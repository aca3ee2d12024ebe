"""The live job keeps priority during a large backfill: its freshness idle, and while a backfill runs.

``python -m spark_jobs bench --only backfill_priority [--records N]``. One live job runs as people run
it (``python -m spark_jobs run cloudtrail_etl --trigger processing-time:1s``, its own JVM); the
freshness of its table (file landed -> its events visible to a Spark reader, :mod:`freshness`) is
measured with files landing ``gap_s`` apart:

1. **idle**: nothing else runs;
2. **during a backfill** of the benchmark's large input (``python -m spark_jobs backfill`` into the
   *same* tables, its own checkpoint), at the registry's ``backfill_priority`` (the default way);
3. optionally **during a backfill at priority normal** (the live job's own) of a second input, to
   show what the priority buys.

The goal: p50 during the backfill within 2x the idle p50. The backfill's own throughput (records/s,
files/s, from its summary line) is reported too, with how long it overlapped the measurement.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from tools.bench import freshness
from tools.bench.data import BenchData
from spark_jobs.model.lake import PROJECT_ROOT
from spark_jobs.registry import get_job

log = logging.getLogger("tools.bench")
JOB = get_job("cloudtrail_etl")
GOAL_RATIO = 2.0


class Backfill:
    """``python -m spark_jobs backfill JOB --source DATA --lake LAKE --priority P`` in the background."""

    def __init__(self, data: BenchData, lake: Path, priority: str, log_path: Path):
        env = {**os.environ, f"{JOB.name.upper()}_INPUT_ROOTS": str(data.landing)}
        self.data, self.priority, self.log_path = data, priority, log_path
        self.out = log_path.open("w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "spark_jobs", "backfill", JOB.name, "--source",
                                      str(data.landing), "--lake", str(lake), "--priority", priority],
                                     cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=self.out, text=True)
        self.ended: float | None = None

    def running(self) -> bool:
        if self.proc.poll() is None:
            return True
        self.ended = self.ended or time.monotonic()
        return False

    def wait_until_batching(self, timeout: float = 600) -> None:
        """Until its first micro-batch runs (JVM and query started): the measurement starts then."""
        deadline = time.monotonic() + timeout
        while f"query {JOB.name} started" not in self.log_path.read_text():
            if not self.running():
                raise RuntimeError(f"the backfill exited early ({self.proc.returncode}):\n{self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the backfill did not start within {timeout} s:\n{self.tail()}")
            time.sleep(0.5)

    def finish(self, timeout: float = 3600) -> dict:
        """Wait for its end; its summary with records/s and files/s."""
        out, _ = self.proc.communicate(timeout=timeout)
        self.ended = self.ended or time.monotonic()
        self.out.close()
        if self.proc.returncode != 0:
            raise RuntimeError(f"the backfill failed ({self.proc.returncode}):\n{self.tail()}")
        summary = json.loads(out.strip().splitlines()[-1])
        seconds = summary["seconds"]
        return {"priority": self.priority, "files": summary["input_files"], "rows": summary["rows"], "seconds": seconds,
                "records_per_s": round(self.data.records / seconds, 1), "files_per_s": round(
                    summary["input_files"] / seconds, 2), "batches": summary["batches"]}

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text().splitlines()[-lines:])


def measure_backfill_priority(spark, run: "freshness.FreshnessRun", datas: list[BenchData], files: int, gap_s: float,
                              run_dir: Path, compare_without_priority: bool = True) -> dict:
    """Idle freshness, then during a backfill at ``backfill_priority`` (and at ``normal`` on ``datas[1]``).

    :param run: the live job (:func:`freshness.start_job`); stopped here.
    :param datas: the large inputs to backfill (a second one for the comparison at priority normal).
    """
    phases: dict = {}
    backfills: dict = {}
    try:
        clock = freshness.LatencyClock(spark, run)
        clock.wait_warmed_up()
        phases["idle"] = clock.summary(clock.land(files, gap_s, "idle"))
        plan = [("during_backfill", JOB.backfill_priority, datas[0])]
        if compare_without_priority and len(datas) > 1:
            plan.append(("during_backfill_normal", "normal", datas[1]))
        for name, priority, data in plan:
            backfill = Backfill(data, run.lake.root, priority, run_dir / f"{name}.log")
            try:
                backfill.wait_until_batching()
                log.info("%s: the backfill (priority %s) is running; measuring the live table's freshness", name,
                         priority)
                started = time.monotonic()
                phases[name] = clock.summary(clock.land(files, gap_s, name))
                phases[name]["backfill_ran_throughout"] = backfill.running()
                phases[name]["measured_for_s"] = round(time.monotonic() - started, 1)
                backfills[name] = backfill.finish()
            finally:
                if backfill.proc.poll() is None:
                    backfill.proc.terminate()
                    backfill.proc.wait(timeout=120)
    finally:
        run.job.stop()
    idle = phases["idle"]["p50_s"]
    ratio = round(phases["during_backfill"]["p50_s"] / idle, 2) if "during_backfill" in phases else None
    return {
        "what": "freshness of the live table (processing-time:1s, files landing, read by a Spark reader) idle and "
                "while a backfill of the large input writes into the same tables; the backfill's throughput",
        "gap_s": gap_s, "records_per_file": run.records_per_file, "phases": phases, "backfills": backfills,
        "ratio_p50_during_to_idle": ratio,
        "ratio_p50_normal_priority_to_idle": (round(phases["during_backfill_normal"]["p50_s"] / idle, 2)
                                              if "during_backfill_normal" in phases else None),
        "goal": f"p50 during the backfill <= {GOAL_RATIO:g}x idle",
        "met": ratio is not None and ratio <= GOAL_RATIO,
    }
