"""What the benchmark reads while things run: streaming progress, Spark's job timeline, memory.

All three read Spark's own typed records (the progress events of a
:class:`~pyspark.sql.streaming.StreamingQueryListener`, the JVM's status store) or ``/proc``; none
parses logs.
"""

from __future__ import annotations

import statistics
import threading
import time

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from tools.bench.sampler import BackgroundSampler, status_kb


def median(values: list[float]) -> float:
    """The median, rounded to milliseconds."""
    return round(statistics.median(values), 3)


def percentile(values: list[float], pct: int) -> float:
    """The ``pct``-th percentile (inclusive linear interpolation), rounded to milliseconds."""
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[pct - 1], 3)


class ProgressRecorder(StreamingQueryListener):
    """Keeps every streaming progress event of this session, by run id, until removed.

    Use as a context manager around the runs: ``with ProgressRecorder(spark) as progress: ...``.
    """

    def __init__(self, spark: SparkSession):
        self._spark = spark
        self._lock = threading.Lock()
        self._progress: dict[str, list] = {}
        self._terminated: set[str] = set()

    def __enter__(self) -> "ProgressRecorder":
        self._spark.streams.addListener(self)
        return self

    def __exit__(self, *exc) -> None:
        self._spark.streams.removeListener(self)

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        with self._lock:
            self._progress.setdefault(str(event.progress.runId), []).append(event.progress)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        with self._lock:
            self._terminated.add(str(event.runId))

    def latest_run(self, timeout: float = 10.0) -> list:
        """The progress of the most recently terminated run, once its termination event has arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                done = [run for run in self._progress if run in self._terminated]
            if done:
                break
            time.sleep(0.05)
        with self._lock:
            runs = [run for run in self._progress if run in self._terminated]
            return self._progress.pop(runs[-1]) if runs else []


def progress_breakdown(progress: list, wall_seconds: float) -> dict:
    """Where a streaming run's wall time went, in ms, from its progress events' ``durationMs``.

    ``listing`` is ``latestOffset`` + ``getBatch`` (finding the new files, planning their read);
    ``add_batch`` is the ``foreachBatch`` call (parse and write both tables); ``commit`` is the
    offset log and the commit log; ``outside_batches`` is query start and stop.
    """
    total: dict[str, int] = {}
    for event in progress:
        for key, ms in event.durationMs.items():
            total[key] = total.get(key, 0) + ms
    trigger = total.get("triggerExecution", 0)
    return {
        "batches": sum(1 for event in progress if event.numInputRows > 0),
        "listing": total.get("latestOffset", 0) + total.get("getBatch", 0),
        "query_planning": total.get("queryPlanning", 0),
        "add_batch": total.get("addBatch", 0),
        "commit": total.get("walCommit", 0) + total.get("commitOffsets", 0),
        "trigger_execution": trigger,
        "outside_batches": max(0, round(wall_seconds * 1000) - trigger),
    }


def _seq(scala_seq) -> list:
    return [scala_seq.apply(i) for i in range(scala_seq.length())]


def spark_jobs_since(spark: SparkSession, since_epoch_ms: int) -> list[dict]:
    """Every Spark job submitted since ``since_epoch_ms``, from the JVM's status store.

    :returns: dicts with the job's id, call site (``name``), first line of its description, wall
        ``ms``, tasks, and summed executor run and CPU time and spill of its stages. Executor CPU
        time counts JVM threads only: time a task waits for a Python worker is run time, not CPU.
    """
    store = spark._jsc.sc().statusStore()
    jobs = []
    for job in _seq(store.jobsList(None)):
        submitted, completed = job.submissionTime(), job.completionTime()
        if not submitted.isDefined() or submitted.get().getTime() < since_epoch_ms:
            continue
        run_ms = cpu_ms = spilled = 0
        for stage_id in _seq(job.stageIds()):
            try:
                stage = store.lastStageAttempt(stage_id)
            except Exception:  # noqa: BLE001 - a skipped stage has no attempt
                continue
            run_ms += stage.executorRunTime()
            cpu_ms += stage.executorCpuTime() // 1_000_000
            spilled += stage.memoryBytesSpilled() + stage.diskBytesSpilled()
        description = job.description()
        jobs.append({
            "id": job.jobId(),
            "name": job.name().split(" at ")[0],
            "description": str(description.get()).splitlines()[0][:80] if description.isDefined() else None,
            "ms": completed.get().getTime() - submitted.get().getTime() if completed.isDefined() else None,
            "tasks": job.numTasks(),
            "executor_run_ms": run_ms,
            "executor_cpu_ms": cpu_ms,
            "spilled_bytes": spilled,
        })
    return sorted(jobs, key=lambda j: j["id"])


class MemorySampler(BackgroundSampler):
    """Peak resident memory of this Python driver, the Spark JVM and the JVM's Python workers.

    In local mode the driver and the executor are one JVM. Its peak is the kernel's high-water mark
    (``VmHWM``), exact; the Python workers come and go, so they are sampled every ``interval``
    seconds (peak of their sum, and the largest one).

    :param jvm_pid: the Spark JVM's process id.
    """

    def __init__(self, jvm_pid: int, interval: float = 0.25):
        super().__init__(interval, "bench-memory")
        self.jvm_pid = jvm_pid
        self.workers_sum_kb = self.worker_max_kb = 0

    def sample(self) -> bool:
        import psutil

        try:
            workers = [p for p in psutil.Process(self.jvm_pid).children(recursive=True) if "python" in p.name()]
            sizes = [status_kb(p.pid, "VmHWM") for p in workers]
        except psutil.Error:
            return True
        self.workers_sum_kb = max(self.workers_sum_kb, sum(sizes))
        self.worker_max_kb = max([self.worker_max_kb, *sizes])
        return True

    def report(self) -> dict:
        """Peaks in MB."""
        import os

        return {
            "jvm_driver_and_executor_peak_rss_mb": round(status_kb(self.jvm_pid, "VmHWM") / 1024),
            "python_driver_peak_rss_mb": round(status_kb(os.getpid(), "VmHWM") / 1024),
            "python_workers_peak_rss_sum_mb": round(self.workers_sum_kb / 1024),
            "python_worker_peak_rss_max_mb": round(self.worker_max_kb / 1024),
        }
