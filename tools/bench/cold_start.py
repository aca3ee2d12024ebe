"""A catch-up run of one new file, from process start to exit, against the floor: bare Spark with Delta doing the same.

Every catch-up-on-data run and every restart of a continuous job starts a driver and runs its first
micro-batch cold. Each repetition lands one new CloudTrail file (50 events, named with its delivery
time, as S3 writes it) in a landing folder whose older files a lake already holds, then times, each as
a fresh process:

- the job: ``python -m spark_jobs run cloudtrail_etl --trigger available-now`` (its first batch's
  ``addBatch`` and whole duration from its own log line);
- the floor: ``python -c`` that starts a bare SparkSession (``local[2]``, the pinned Delta jars and
  Delta's SQL extension, nothing else of the project: no class archive, no settings), reads the same
  file with ``spark.read.json`` and the Records schema, flattens it as bare Spark does
  (:mod:`tools.bench.bare`) and appends the rows to a Delta table;
- the floor again with the JIT of the project's short-lived drivers (C1 only, :mod:`spark_jobs.launch.jit`),
  reported beside it for comparison (the goal is against the floor as bare Spark starts it);
- the first batch against a warm one: the job again on three new files, one per micro-batch
  (``--max-files-per-trigger 1``): its first batch's time against the median of the two after it.

On the small lake the tables hold the earlier files' events; on the large one (``size``) the events table
holds that many events in today's partition (:func:`tools.bench.merge_cost.build_table`, cached), which
the one file's insert is bounded into. Goals (issue 40): the job <= 1.0x the floor, the first batch <= 2x
a warm one.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from tools.bench.data import RecordSource
from tools.bench.probes import median
from spark_jobs.launch.jit import SHORT_LIVED_OPTIONS
from spark_jobs.model.lake import Lake, PROJECT_ROOT
from spark_jobs.registry import get_job

log = logging.getLogger("tools.bench")
JOB = get_job("cloudtrail_etl")
EVENTS = "cloudtrail_events"
GOAL_TO_FLOOR, GOAL_FIRST_TO_WARM = 1.0, 2.0
RECORDS_PER_FILE = 50
OLDER_FILES = 20
# The floor: a bare SparkSession with the Delta jars, one file read and appended to a Delta table.
FLOOR = """
import sys
from pyspark.sql import SparkSession
from spark_jobs.launch.jars import DELTA_CONF, spark_jars
from tools.bench import bare
builder = SparkSession.builder.master("local[2]").appName("cold-start-floor").config("spark.jars", spark_jars())
for key, value in DELTA_CONF.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
frame = bare.flatten(spark.read.schema(bare.records_schema()).json(sys.argv[1]).select(
    bare.F.col("_metadata.file_path").alias("_source_file"), bare.F.posexplode("Records").alias("_record_index", "rec")))
frame.write.format("delta").mode("append").save(sys.argv[2])
spark.stop()
"""
# The profile: the same catch-up in a fresh process that also reports where its time went (the run's own
# phases and every Spark job of it, by the step that started it).
PROFILE = """
import json, sys, time
started = time.monotonic()
from pathlib import Path
from spark_jobs.driver.runner import run_streaming
from spark_jobs.driver.session import build_session
from spark_jobs.model.lake import Lake
from spark_jobs.model.runs import RunOptions
from spark_jobs.model.triggers import parse_trigger
from spark_jobs.registry import get_job
from tools.bench.probes import spark_jobs_since
imported = time.monotonic()
job = get_job("cloudtrail_etl")
spark = build_session(job.name)
session = time.monotonic()
since = int(time.time() * 1000)
summary = run_streaming(job, RunOptions(Path(sys.argv[1]), Lake(Path(sys.argv[2])), parse_trigger("available-now"),
                                        dict(job.file_source_options)), spark=spark)
ran = time.monotonic()
jobs = spark_jobs_since(spark, since)
print(json.dumps({"imports_s": round(imported - started, 3), "session_s": round(session - imported, 3),
                  "run_streaming_s": round(ran - session, 3), "batches": summary.batches, "spark_jobs": jobs}))
"""
_BATCH_LINE = re.compile(r"batch (\d+): (\d+) input files in (\d+) ms \((.*)\)")


def _deliver(landing: Path, records: list[dict], delivered: dt.datetime, token: str) -> Path:
    """One CloudTrail delivery of ``records`` in S3's layout and name."""
    day = landing / "AWSLogs" / "111122223333" / "CloudTrail" / "eu-west-1" / f"{delivered:%Y/%m/%d}"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"111122223333_CloudTrail_eu-west-1_{delivered:%Y%m%dT%H%MZ}_{token}.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"Records": records}).encode()))
    return path


class _Deliveries:
    """New files of fresh events, each delivered a minute after the last, events a few minutes before it."""

    def __init__(self, source: RecordSource, start: dt.datetime, seed: int = 40):
        self.source, self.rng, self.clock, self.count = source, random.Random(seed), start, 0

    def land(self, landing: Path) -> Path:
        self.clock += dt.timedelta(minutes=1)
        self.count += 1
        records = []
        for i, record in enumerate(self.source.records(self.rng, RECORDS_PER_FILE, self.clock)):
            record["eventID"] = f"cold-{self.count:05d}-{i:03d}-{self.rng.getrandbits(32):08x}"
            moment = self.clock - dt.timedelta(minutes=5, seconds=RECORDS_PER_FILE - i)
            record["eventTime"] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
            records.append(record)
        return _deliver(landing, records, self.clock, f"cold{self.count:05d}")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "SPARK_LOG_LEVEL": "WARN"}


def _timed(command: list[str], stdout: bool = False, env: dict | None = None) -> tuple[float, str]:
    """Run ``command`` in the project folder: its seconds and its stderr (``stdout``: its stdout)."""
    import subprocess

    started = time.monotonic()
    done = subprocess.run(command, cwd=PROJECT_ROOT, env={**_env(), **(env or {})}, capture_output=True, text=True,
                          timeout=900)
    seconds = round(time.monotonic() - started, 3)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise RuntimeError(f"{' '.join(command[:5])} ... failed (exit {done.returncode}):\n{tail}")
    return seconds, done.stdout if stdout else done.stderr


def _batches(log_text: str) -> list[dict]:
    """The job's log lines of its micro-batches: id, duration and Spark's phases (ms)."""
    found = []
    for match in _BATCH_LINE.finditer(log_text):
        phases = dict((name, int(ms)) for name, ms in re.findall(r"(\w+) (\d+) ms", match.group(4)))
        found.append({"batch": int(match.group(1)), "files": int(match.group(2)), "ms": int(match.group(3)),
                      "add_batch_ms": phases.get("addBatch"), "phases_ms": phases})
    return found


def _job(landing: Path, lake: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "spark_jobs", "run", JOB.name, "--input", str(landing), "--lake", str(lake),
            "--trigger", "available-now", *extra]


def _one_lake(name: str, landing: Path, lake: Path, floor_table: Path, deliveries: _Deliveries, repeat: int) -> dict:
    """``repeat`` rounds of: one new file, the job's catch-up, the floor; then three files one batch each."""
    jobs, floors, floors_c1, first_batches = [], [], [], []
    for i in range(repeat):
        log.info("cold start (%s): repetition %d of %d", name, i + 1, repeat)
        new = deliveries.land(landing)
        seconds, err = _timed(_job(landing, lake))
        batches = _batches(err)
        if [b["files"] for b in batches] != [1]:
            raise AssertionError(f"the catch-up of one new file ran batches {batches}")
        jobs.append({"seconds": seconds, "batch_ms": batches[0]["ms"], "add_batch_ms": batches[0]["add_batch_ms"]})
        floor_s, _ = _timed([sys.executable, "-c", FLOOR, str(new), str(floor_table)])
        floors.append(floor_s)
        # The floor again with the JIT of the project's short-lived drivers (launch/jit.py), for comparison only.
        floor_s, _ = _timed([sys.executable, "-c", FLOOR, str(new), str(floor_table)],
                            env={"SPARK_SUBMIT_OPTS": SHORT_LIVED_OPTIONS})
        floors_c1.append(floor_s)
    deliveries.land(landing)
    _, out = _timed([sys.executable, "-c", PROFILE, str(landing), str(lake)], stdout=True)
    profile = _profile(json.loads(out.strip().splitlines()[-1]))
    for _ in range(3):
        deliveries.land(landing)
    seconds, err = _timed(_job(landing, lake, "--max-files-per-trigger", "1"))
    batches = _batches(err)
    if [b["files"] for b in batches] != [1, 1, 1]:
        raise AssertionError(f"three new files, one per batch, ran batches {batches}")
    first_batches = batches
    job_s, floor_s = median([j["seconds"] for j in jobs]), median(floors)
    first, warm = first_batches[0]["ms"], median([b["ms"] for b in first_batches[1:]])
    return {
        "job": {"runs": jobs, "median_s": job_s},
        "floor": {"seconds": floors, "median_s": floor_s},
        "ratio_to_floor": round(job_s / floor_s, 3), "goal_to_floor": f"<= {GOAL_TO_FLOOR}",
        "floor_with_c1": {"seconds": floors_c1, "median_s": median(floors_c1),
                          "ratio": round(job_s / median(floors_c1), 3),
                          "what": "the floor with the JIT of the project's short-lived drivers (C1 only), not the goal"},
        "first_batch": {"batches": first_batches, "first_ms": first, "warm_ms": warm,
                        "ratio": round(first / warm, 3), "goal": f"<= {GOAL_FIRST_TO_WARM}"},
        "met": job_s / floor_s <= GOAL_TO_FLOOR and first / warm <= GOAL_FIRST_TO_WARM,
        "profile_of_a_catch_up": profile,
    }


def _profile(found: dict) -> dict:
    """Where a cold catch-up's time went: its process's phases, and its Spark jobs summed by the step that ran them."""
    steps: dict[str, dict] = {}
    for job in found["spark_jobs"]:
        step = (job["description"] or job["name"] or "?").removeprefix("Delta: ")
        entry = steps.setdefault(step, {"jobs": 0, "ms": 0, "executor_cpu_ms": 0})
        entry["jobs"] += 1
        entry["ms"] += job["ms"] or 0
        entry["executor_cpu_ms"] += job["executor_cpu_ms"]
    return {"imports_s": found["imports_s"], "session_s": found["session_s"],
            "run_streaming_s": found["run_streaming_s"], "batches": found["batches"],
            "spark_jobs": len(found["spark_jobs"]),
            "spark_jobs_ms": sum(job["ms"] or 0 for job in found["spark_jobs"]),
            "by_step": dict(sorted(steps.items(), key=lambda item: -item[1]["ms"]))}


def _small_lake(spark: SparkSession, root: Path, deliveries: _Deliveries) -> tuple[Path, Path, Path]:
    """A landing of :data:`OLDER_FILES` files, a lake that holds them, and the floor's table of the same rows."""
    from tools.bench import bare
    from spark_jobs.driver.runner import run_streaming
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.model.triggers import parse_trigger

    landing, lake, floor_table = root / "landing", root / "lake", root / "floor-table"
    for _ in range(OLDER_FILES):
        deliveries.land(landing)
    run_streaming(JOB, RunOptions(landing, Lake(lake), parse_trigger("available-now"), dict(JOB.file_source_options)),
                  spark=spark)
    bare.events(spark, landing).write.format("delta").mode("overwrite").save(str(floor_table))
    return landing, lake, floor_table


def _large_lake(spark: SparkSession, root: Path, size: int, floor_table: Path) -> tuple[Path, Path, Path]:
    """A lake whose events table is the cached table of ``size`` events in today's partition (hard links)."""
    from tools.bench.freshness_large import _link_table
    from tools.bench.merge_cost import build_table

    base = build_table(spark, size, 1, last_day=dt.datetime.now(dt.UTC).date())
    lake = root / "lake"
    _link_table(base, Lake(lake))
    landing = root / "landing"
    landing.mkdir(parents=True)
    return landing, lake, floor_table


def measure_cold_start(spark: SparkSession, run_dir: Path, source: RecordSource, repeat: int,
                       large_size: int | None = 10_000_000) -> dict:
    """Measure as the module docstring says, on a small lake and (``large_size``) on a large table."""
    root = run_dir / "cold_start"
    shutil.rmtree(root, ignore_errors=True)
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    small = _Deliveries(source, now - dt.timedelta(hours=3))
    landing, lake, floor_table = _small_lake(spark, root / "small", small)
    report = {
        "what": "wall time of one available-now catch-up of one new 50-event file, a fresh process each (python -m "
                "spark_jobs run), against the floor: a fresh bare SparkSession with the Delta jars that reads the same "
                "file with spark.read.json and appends its rows to a Delta table; and the first micro-batch of a run "
                "against the warm ones after it (three new files, one per batch)",
        "small_lake": {"older_files": OLDER_FILES, "records_per_file": RECORDS_PER_FILE,
                       **_one_lake("small lake", landing, lake, floor_table, small, repeat)},
    }
    if large_size:
        large = _Deliveries(source, now - dt.timedelta(hours=2), seed=41)
        landing, lake, floor_table = _large_lake(spark, root / "large", large_size, floor_table)
        report["large_table"] = {"table_events": large_size,
                                 **_one_lake("large table", landing, lake, floor_table, large, repeat)}
    parts = [part for part in report.values() if isinstance(part, dict) and "met" in part]
    report["ratio_to_floor"] = max(part["ratio_to_floor"] for part in parts)
    report["first_batch_to_warm"] = max(part["first_batch"]["ratio"] for part in parts)
    report["met"] = all(part["met"] for part in parts)
    return report
