"""Freshness: from a file landing (atomically) to its records being visible to a reader of the table.

The job runs as people run it (``python -m spark_jobs run cloudtrail_etl --trigger
processing-time:1s``, its own process and JVM); the reader is the benchmark's own, already running
SparkSession, which reads the table's Delta log as ``python -m spark_jobs sql``
does. Files land one at a time, ``gap_s`` apart. Each poll lists the table as a reader does (the
files of every committed batch) and, when that list changed, runs a query for the input files now
visible; a file's time is when the poll that first showed it returned (the reader knows it then, and
the poll's own time is part of the latency, as it is for any reader; until 2026-11-23 it was when that
poll started, which under load made some latencies look like 0 s). The job is warmed up first (its first micro-batches after a JVM start are several times
slower), on files landed while this process's SparkSession starts.
"""

from __future__ import annotations

import logging
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

from tools.bench.data import RecordSource, write_file
from tools.bench.probes import median, percentile
from spark_jobs.model.lake import PROJECT_ROOT, Lake
from spark_jobs.registry import get_job
from tools.sample_data import DELIVERY_TARGETS

log = logging.getLogger("tools.bench")
JOB = get_job("cloudtrail_etl")
TRIGGER = "processing-time:1s"
POLL_PAUSE_S = 0.1
VISIBLE_TIMEOUT_S = 300.0  # a first Delta batch on a loaded 2-core machine can take minutes


class JobProcess:
    """``python -m spark_jobs run ...`` in the background, its stderr collected by a thread."""

    def __init__(self, args: list[str]):
        self.proc = subprocess.Popen([sys.executable, "-m", "spark_jobs", *args], cwd=PROJECT_ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip())

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.lines[-lines:])

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the job exited early (status {self.proc.returncode}):\n{self.tail()}")

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            self.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {text!r} from the job within {timeout} s:\n{self.tail()}")
            time.sleep(0.1)

    def stop(self, timeout: float = 60) -> str:
        """SIGTERM, then wait; returns its stdout (the run summary)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self._reader.join(timeout=5)
        return out


class TableWatcher:
    """Which input files' events a Spark reader of a table sees, cheaply enough to ask every 0.1 s.

    :param spark: the reader's session.
    :param table: the table folder.
    :param schema: its schema.
    """

    def __init__(self, spark: SparkSession, table: Path, schema):
        self.spark, self.table, self.schema = spark, table, schema
        self._files: frozenset[str] = frozenset()
        self.visible: set[str] = set()
        self.queries = 0

    def _current(self) -> frozenset[str]:
        from spark_jobs.driver.sql import read_table

        return frozenset(read_table(self.spark, self.table, self.schema).inputFiles())

    def prime(self) -> None:
        """Take the table's present files as seen (a table that held rows before the measured files landed)."""
        self._files = self._current()

    def poll(self) -> set[str]:
        """List the table's committed files; if new ones appeared, query the input files they hold.

        Only the new data files are read (the cost of a poll does not grow with the table, which a
        backfill into the same table makes large); files a compaction replaced hold rows already seen.
        """
        if not (self.table / "_delta_log").is_dir():
            return self.visible
        files = self._current()
        new = sorted(files - self._files)
        if new:
            rows = self.spark.read.parquet(*new).select("_source_file").distinct().collect()
            self.visible |= {row[0].rsplit("/", 1)[-1] for row in rows}
            self.queries += 1
        self._files = files
        return self.visible


def start_job(workdir: Path, source: RecordSource, warmup_files: int, records_per_file: int,
              seed: int, name: str = "freshness") -> "FreshnessRun":
    """Start the ``processing-time:1s`` job on an empty landing folder and warm it up in the background.

    Started before the benchmark's own SparkSession, so the JVM starts and the warm-up overlap it
    (none of them is measured).

    :param name: the folder under ``workdir`` for its landing folder and lake.
    """
    root = workdir / name
    shutil.rmtree(root, ignore_errors=True)
    (root / "landing").mkdir(parents=True)
    job = JobProcess(["run", JOB.name, "--input", str(root / "landing"), "--lake", str(root / "lake"),
                      "--trigger", TRIGGER])
    run = FreshnessRun(job, root / "landing", Lake(root / "lake"), source, records_per_file, random.Random(seed))
    run.warmup = threading.Thread(target=run.warm_up, args=(warmup_files,), daemon=True)
    run.warmup.start()
    return run


class FreshnessRun:
    """The running job, its landing folder and lake, and the files landed so far (by name: landing time)."""

    def __init__(self, job: JobProcess, landing: Path, lake: Lake, source: RecordSource, records_per_file: int,
                 rng: random.Random):
        self.job, self.landing, self.lake = job, landing, lake
        self.source, self.records_per_file, self.rng = source, records_per_file, rng
        self.landed: dict[str, float] = {}
        self.warmup_names: list[str] = []
        self.warmup: threading.Thread | None = None
        self.warmup_error: BaseException | None = None

    def land(self) -> str:
        """Write the next file atomically; returns its name."""
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        stamp = now.replace(minute=now.minute - now.minute % 5)
        target = DELIVERY_TARGETS[len(self.landed) % len(DELIVERY_TARGETS)]
        path, _, _ = write_file(self.landing, self.rng, self.source, self.records_per_file, stamp, target)
        self.landed[path.name] = time.monotonic()
        return path.name

    def warm_up(self, files: int) -> None:
        """Land ``files`` files one micro-batch after another (the job's log says when a batch is done)."""
        try:
            self.job.wait_for("started", timeout=180)
            for index in range(files):
                self.warmup_names.append(self.land())
                self.job.wait_for(f"batch {index}:", timeout=VISIBLE_TIMEOUT_S)
        except BaseException as exc:  # noqa: BLE001 - reported by measure_freshness
            self.warmup_error = exc


class LatencyClock:
    """Lands files into a running job's landing folder and times each until a reader of the table sees it.

    :param spark: the reader's session.
    :param run: what :func:`start_job` returned (the job keeps running; the caller stops it).
    """

    def __init__(self, spark: SparkSession, run: FreshnessRun):
        from spark_jobs.driver.job_modules import output_schemas

        self.run = run
        self.watcher = TableWatcher(spark, run.lake.table_path("cloudtrail_events"),
                                    output_schemas(spark, JOB)["cloudtrail_events"])
        self.latencies: dict[str, float] = {}
        self.poll_starts: list[float] = []

    def poll_until(self, deadline: float, wanted: set[str]) -> None:
        while not wanted <= self.latencies.keys() and time.monotonic() < deadline:
            self.run.job.check_alive()
            self.poll_starts.append(time.monotonic())
            visible = self.watcher.poll()
            seen_at = time.monotonic()  # the reader knows it when its query returns
            for name in visible - self.latencies.keys():
                if name in self.run.landed:
                    self.latencies[name] = round(seen_at - self.run.landed[name], 3)
            time.sleep(POLL_PAUSE_S)

    def wait_warmed_up(self) -> None:
        """Wait until the warm-up files (one micro-batch each) are visible."""
        run = self.run
        run.warmup.join(timeout=VISIBLE_TIMEOUT_S + 180)
        if run.warmup_error or run.warmup.is_alive():
            raise RuntimeError(f"the warm-up did not finish: {run.warmup_error!r}\n{run.job.tail()}")
        self.poll_until(time.monotonic() + VISIBLE_TIMEOUT_S, set(run.warmup_names))

    def land(self, files: int, gap_s: float, label: str = "freshness") -> list[str]:
        """Land ``files`` files ``gap_s`` apart on a fixed clock, wait until each is visible; their names."""
        started = time.monotonic()
        order = []
        for index in range(files):  # on a fixed clock: file k lands gap_s * k after the first
            log.info("%s: landing file %d of %d", label, index + 1, files)
            order.append(self.run.land())
            self.poll_until(started + gap_s * (index + 1), set(order))
        self.poll_until(time.monotonic() + VISIBLE_TIMEOUT_S, set(order))
        missing = [name for name in order if name not in self.latencies]
        if missing:
            raise TimeoutError(f"{len(missing)} files never became visible within {VISIBLE_TIMEOUT_S} s")
        return order

    def summary(self, order: list[str]) -> dict:
        """p50, p95 and max of the files in ``order``, with the raw latencies."""
        values = [self.latencies[name] for name in order]
        return {"files": len(values), "latencies_s": values, "p50_s": percentile(values, 50),
                "p95_s": percentile(values, 95), "max_s": max(values)}


def measure_freshness(spark: SparkSession, run: FreshnessRun, files: int, gap_s: float) -> dict:
    """Once the warm-up is done, land ``files`` files ``gap_s`` apart and time each until a reader sees it.

    :param run: what :func:`start_job` returned; its job is stopped (SIGTERM) here.
    """
    job = run.job
    try:
        clock = LatencyClock(spark, run)
        clock.wait_warmed_up()
        warmup_batches = len(run.warmup_names)
        started = time.monotonic()
        order = clock.land(files, gap_s)
    finally:
        summary = job.stop()
    measured = clock.summary(order)
    p50, p95 = measured["p50_s"], measured["p95_s"]
    periods = [b - a for a, b in zip(clock.poll_starts, clock.poll_starts[1:])]
    batches = [line.split("INFO spark_jobs: ", 1)[-1] for line in job.lines if "INFO spark_jobs: batch" in line]
    return {
        "what": f"file landed (os.replace) -> its events visible to a Spark reader polling the table; "
                f"job: python -m spark_jobs run {JOB.name} --trigger {TRIGGER}",
        "files": files,
        "records_per_file": run.records_per_file,
        "gap_s": gap_s,
        "latencies_s": measured["latencies_s"],
        "p50_s": p50,
        "p95_s": p95,
        "max_s": measured["max_s"],
        "warmup": {"files": len(run.warmup_names), "batches_ms": [_batch_ms(b) for b in batches[:warmup_batches]]},
        "poll_period_median_s": median(periods) if periods else None,
        "reader_queries": clock.watcher.queries,
        "measured_for_s": round(time.monotonic() - started, 1),
        "job_batches": batches[warmup_batches:],
        "job_summary": summary.strip().splitlines()[-1] if summary.strip() else None,
        "goal": "p50 <= 1.5 s, p95 <= 2.5 s",
        "met": p50 <= 1.5 and p95 <= 2.5,
    }


def _batch_ms(line: str) -> int | None:
    """The duration in a runner log line ``batch N: F input files in T ms (...)``."""
    try:
        return int(line.split(" in ", 1)[1].split(" ms", 1)[0])
    except (IndexError, ValueError):
        return None
