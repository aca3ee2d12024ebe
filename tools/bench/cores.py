"""Catch-up runs under other settings: throughput on 1 core against 2, and the smallest driver memory that completes.

Each run is the catch-up's spark-submit (``run cloudtrail_etl --trigger available-now``, client mode,
the project's jars and conf) of the benchmark's whole input into a fresh lake, in its own JVM, with
its process tree sampled every 0.25 s (:class:`TreeSampler`): CPU seconds of the JVM and its Python
workers (so "1 core" can be checked against what the run really used) and the JVM's peak resident
memory. The run's own time is its summary's ``seconds`` (session, query, micro-batches; not the
JVM's start), as in :mod:`tools.bench.cluster_cores`.

- ``cores``: ``--master local[1]`` against ``local[2]``; goal: 2 cores >= 1.8x the events per
  second of 1.
- ``min_driver_memory``: ``--driver-memory`` down a ladder (4g, 2g, 1g, 768m, 512m) until a run
  fails or the ladder ends (1g is spark-submit's default, what the DAGs run with: the ``cores`` part's
  ``local[2]`` run); every completed run must write the same events. Below ~450 MiB Spark
  refuses to start (``INVALID_DRIVER_MEMORY``: it reserves 300 MiB and wants 1.5 times that), which
  one short start at 400m shows.

Spark's own metrics give neither figure for a whole process tree (the executor's CPU time leaves out
the Python workers), hence the sampler.
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

from tools.bench.launches import JOB, _summary
from tools.bench.sampler import BackgroundSampler, status_kb
from spark_jobs.launch.submit import SparkConnection, Submission
from spark_jobs.model.lake import PROJECT_ROOT

log = logging.getLogger("tools.bench")
LADDER = ("4g", "2g", "1g", "768m", "512m")
REFUSED = "400m"
# What a spark-submit without --driver-memory gets (the DAGs pass none; spark_jobs.driver.session's 4g applies only
# to a session started outside spark-submit, whose JVM it starts itself).
SUBMIT_DEFAULT = "1g"
RUN_TIMEOUT_S = 1800.0


class TreeSampler(BackgroundSampler):
    """CPU seconds and the root's peak RSS of a process tree, sampled until the root exits.

    A process's CPU time is its last sample (a Python worker that lives less than ``interval`` may be
    missed: the figure is a lower bound).

    :param pid: the tree's root (spark-submit execs the JVM, so it is the JVM).
    """

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        super().__init__(interval, "bench-tree")
        self.pid = pid
        self.cpu: dict[int, float] = {}
        self.root_peak_kb = 0

    def sample(self) -> bool:
        import psutil

        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return False
        for process in tree:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            self.cpu[process.pid] = times.user + times.system
        self.root_peak_kb = max(self.root_peak_kb, status_kb(self.pid, "VmHWM"))
        return True

    @property
    def cpu_seconds(self) -> float:
        return round(sum(self.cpu.values()), 1)


def catchup_run(landing: Path, lake: Path, master: str = "local[2]", driver_memory: str | None = None) -> dict:
    """One catch-up spark-submit into ``lake``; its times, events, CPU and memory (``ok`` False if it failed)."""
    command = Submission.of(["run", JOB.name, "--trigger", "available-now", "--input", str(landing), "--lake",
                             str(lake)], name=JOB.name, driver_memory=driver_memory).argv(SparkConnection(master))
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with TreeSampler(process.pid) as sampler:
        out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    wall = round(time.monotonic() - started, 2)
    result = {"master": master, "driver_memory": driver_memory or SUBMIT_DEFAULT, "wall_s": wall,
              "cpu_s": sampler.cpu_seconds, "jvm_peak_rss_mb": round(sampler.root_peak_kb / 1024),
              "ok": process.returncode == 0}
    if process.returncode != 0:
        lines = (out + err).splitlines()
        cause = next((line.strip() for line in lines if "OutOfMemoryError" in line or "INVALID_DRIVER_MEMORY" in line
                      or "must be at least" in line), lines[-1].strip() if lines else "")
        return {**result, "exit": process.returncode, "error": cause[:500]}
    summary = _summary(out)
    events = summary["rows"].get("cloudtrail_events", 0)
    return {**result, "run_s": summary["seconds"], "batches": summary["batches"], "events": events,
            "events_per_s": round(events / summary["seconds"], 1), "cores_used": round(sampler.cpu_seconds / wall, 2)}


def measure_cores(landing: Path, workdir: Path) -> dict:
    """``local[1]`` against ``local[2]`` on the same input, each into a fresh lake."""
    one = catchup_run(landing, workdir / "lake-local-1", "local[1]")
    two = catchup_run(landing, workdir / "lake-local-2", "local[2]")
    for run in (one, two):
        if not run["ok"]:
            raise RuntimeError(f"the {run['master']} run failed: {run['error']}")
    if one["events"] != two["events"]:
        raise AssertionError(f"local[1] wrote {one['events']} events, local[2] {two['events']}")
    ratio = round(two["events_per_s"] / one["events_per_s"], 2)
    return {
        "what": "catch-up (available-now) of the whole input by spark-submit, --master local[1] vs local[2], "
                "each into a fresh lake; events/s from the run's own seconds; cores_used = CPU seconds of the "
                "JVM and its Python workers / wall",
        "local_1": one, "local_2": two,
        "ratio": ratio,
        "goal": ">= 1.8",
        "met": ratio >= 1.8,
    }


def measure_min_driver_memory(landing: Path, workdir: Path, ladder: tuple[str, ...] = LADDER,
                              default_run: dict | None = None) -> dict:
    """The catch-up with ``--driver-memory`` down ``ladder`` until a run fails; and Spark's refusal below ~450 MiB.

    :param default_run: a completed :func:`catchup_run` on ``local[2]`` without ``--driver-memory`` (the
        ``cores`` part's: spark-submit's default, 1g), used as the ladder's 1g step instead of running it again.
    """
    runs = []
    for memory in ladder:
        if memory == SUBMIT_DEFAULT and default_run and default_run.get("ok") and default_run["master"] == "local[2]":
            runs.append({**default_run, "from": "the cores part's local[2] run (no --driver-memory)"})
            continue
        log.info("min_driver_memory: --driver-memory %s", memory)
        run = catchup_run(landing, workdir / f"lake-{memory}", driver_memory=memory)
        runs.append(run)
        if not run["ok"]:
            break
    done = [run for run in runs if run["ok"]]
    if len({run["events"] for run in done}) > 1:
        raise AssertionError(f"the completed runs wrote different events: {[run['events'] for run in done]}")
    refused = catchup_run(landing, workdir / f"lake-{REFUSED}", driver_memory=REFUSED)
    return {
        "what": "catch-up of the whole input by spark-submit (local[2]) with --driver-memory down a ladder, each "
                "into a fresh lake, until a run fails; the JVM's peak RSS is beside each",
        "runs": runs,
        "smallest_completed": done[-1]["driver_memory"] if done else None,
        "ladder_exhausted": len(done) == len(ladder),
        "below_the_floor": {"driver_memory": REFUSED, "refused": not refused["ok"],
                            "error": refused.get("error"), "wall_s": refused["wall_s"]},
        "goal": None,
    }
