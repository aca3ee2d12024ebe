"""Benchmark: the ``cloudtrail_etl`` pipeline against bare Spark, on the same files, machine and run.

Usage::

    python -m spark_jobs bench --quick             # 50k records, fewer repetitions (~2 min)
    python -m spark_jobs bench                     # the full run: ~1M records, 3 repetitions
    python -m spark_jobs bench --records 200000 --only throughput,profile,memory

It writes realistic CloudTrail input under ``.spark/bench/data/`` (real records from
``../shared/data/real/cloudtrail`` with fresh eventIDs and eventTimes; reused by later runs with the
same size and seed), measures, and prints one JSON report on stdout (logs go to stderr), also saved
as ``.spark/bench/report.json``. Each measurement is repeated and reported as a median; where it has a
bare-Spark counterpart it is a ratio to the best bare Spark does on the same files, machine and run
(so it holds on a noisy machine), with the absolute numbers and the goal beside it:

- ``throughput``: records/s and MB/s of an available-now run against bare Spark's parse, explode,
  flatten and partitioned write, in one SparkSession; ``profile``: where the job's time goes;
  ``write_shapes``: the same transform written in simpler one-pass shapes (no dedup; dedup without
  quarantine), the ceiling of any design of the writer (:mod:`tools.bench.write_shapes`).
- ``noop_catchup``: an available-now run with nothing new against starting and stopping a session.
- ``cores``: the catch-up on ``local[1]`` against ``local[2]`` (:mod:`tools.bench.cores`).
- ``orchestration``: ``airflow dags test`` of the catch-up DAG against the same spark-submit (the
  cold CLI); ``orchestration_live``: a run triggered through the REST API of a running Airflow
  against the same spark-submit (:mod:`tools.bench.orchestration_live`).
- ``freshness``: file landed to events visible to a reader, with a ``processing-time:1s`` job.
- ``freshness_large``: the same from a job's start on a table of 10M events, seen by a delta-rs reader and a
  Spark reader, the first minute apart (:mod:`tools.bench.freshness_large`).
- ``backfill_priority``: that freshness idle and during a backfill of the input into the same tables
  (at the registry's ``backfill_priority``, and at ``normal`` on a second input), and the backfill's throughput
  (:mod:`tools.bench.backfill_priority`).
- ``adhoc_query``: one query on the raw JSON files and on the table (same answer checked).
- ``sql_command``: the whole ``python -m spark_jobs sql --engine duckdb`` command (no JVM).
- ``jvm_start``: a SparkSession's start and first job with and without the driver's class archive
  (:mod:`spark_jobs.launch.class_archive`).
- ``memory``: peak resident memory of the Spark JVM (driver and executor are one JVM in local
  mode) and of the Python processes, during the in-process measurements.
- ``min_driver_memory``: the catch-up with less and less ``--driver-memory`` until it fails.
- ``cold_start``: a catch-up of one new file, process start to exit, against the floor (a fresh bare-Spark process
  with the Delta jars that appends the file's rows to a Delta table), on a small lake and on a table of 10M
  events; and a run's first micro-batch against its warm ones (:mod:`tools.bench.cold_start`).
- ``dedup_cost``: a live batch of 1,000 events through the job's write path on tables of 100k, 1M and
  10M events in one day, with the MERGE bounded by the files' delivery times and by dates only
  (:mod:`tools.bench.merge_cost`); the ratio is the largest table's batch time to the smallest's.
- ``state``: state rows of the stateful jobs after 1x and 10x the event-time span (:mod:`tools.bench.state_size`).
- ``recovery``: measured by ``python -m spark_jobs trial recovery`` (:mod:`tools.bench.recovery`).
- ``history_scale``: discovery per trigger, restart to first commit, ``checkpoint inspect``, the no-op catch-up,
  LIST requests and the state's size once a landing holds 10k, 100k and 1M ingested deliveries (and 1k and 100k
  objects in the local S3 server), as ratios to the smallest (:mod:`tools.bench.history_scale`).
- ``landing_to_rows``: a file landing in the watched folder of a running Airflow to its rows in the table, through the
  catch-up-on-data DAG, split by the run's own records (:mod:`tools.bench.landing_to_rows`).

``--quick`` (under 3 minutes on 2 cores): 50k records, 2 repetitions (1 per process launch), a
warm-up on a tenth of the input, no noop-sink stand-ins in the profile, and none of freshness, the
Airflow comparisons, the core, driver-memory, JVM-start and write-shape runs (see :data:`QUICK_LEAVES_OUT`; add them with ``--only``).

Exit status: 0 when every measurement ran (goals met or not: the report says), 1 when one failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Callable

from spark_jobs.model.lake import PROJECT_ROOT

log = logging.getLogger("tools.bench")

BENCH_ROOT = PROJECT_ROOT / ".spark" / "bench"
IN_PROCESS = ("throughput", "profile", "write_shapes", "adhoc_query", "memory", "freshness", "freshness_large",
              "backfill_priority", "state", "dedup_cost", "cold_start")
LAUNCHES = ("noop_catchup", "orchestration", "orchestration_live", "sql_command", "cores", "min_driver_memory",
            "jvm_start", "object_store", "history_scale", "landing_to_rows")
MEASUREMENTS = IN_PROCESS + LAUNCHES
# What --quick leaves out, and why: each needs minutes of process starts and warm-up to mean anything.
QUICK_LEAVES_OUT = {
    "orchestration": "two more process launches (~60 s)",
    "orchestration_live": "starts a whole Airflow (api-server, scheduler, dag-processor, triggerer) and triggers "
                          "runs through its REST API (~2 min)",
    "cores": "two more catch-ups of the whole input, on local[1] and local[2] (~2 min at 50k records)",
    "min_driver_memory": "up to six more catch-ups of the whole input with less and less driver memory",
    "jvm_start": "two SparkSession starts per repetition, with and without the class archive (~40 s each)",
    "write_shapes": "three more writes of the whole input and one more bare-Spark run per repetition (~1 min at "
                    "50k records)",
    "freshness": "a freshly started job needs ~8 micro-batches to warm up, so a meaningful figure needs "
                 "warm-up files plus 30 files 3 s apart (~2.5 min)",
    "freshness_large": "a table of 10M events (built once, ~5 min, then cached under .spark/bench/live_tables), "
                       "then 50 files 3 s apart from a job's start, seen by two readers (~3 min)",
    "backfill_priority": "a live job, two backfills of the whole input and three freshness phases (~10+ min)",
    "object_store": "a local S3 server, then catch-ups of the whole input from disk and from a bucket, and two "
                    "freshness runs (~3+ min at 50k records)",
    "state": "two stateful jobs over 1x and 10x an event-time span, one micro-batch per hour of events (~66 "
             "micro-batches each with --quick, ~5 min)",
    "cold_start": "fresh processes of the job and of bare Spark with Delta, each on one new file, on a small lake and on "
                  "a table of 10M events (built once, ~5 min, then cached under .spark/bench/live_tables; ~6 min)",
    "dedup_cost": "tables of 100k, 1M and 10M events (built once, ~5 min, then cached under .spark/bench/live_tables) "
                  "and 2 x 5 live batches on each (~5 min)",
    "history_scale": "landings of 10k, 100k and 1M files (built once, ~1 min, then cached under .spark/bench/history) "
                     "and of 1k and 100k objects in the S3 server, then three restarts, inspections and no-op runs "
                     "on each (~25 min)",
    "landing_to_rows": "starts a whole Airflow with the catch-up-on-data DAG unpaused, then lands five files one at "
                       "a time and waits for each one's rows (~4 min)",
}
# These build their own input: a run of only these does not write the generated landing.
OWN_INPUT = ("history_scale", "landing_to_rows")
QUICK = tuple(name for name in MEASUREMENTS if name not in QUICK_LEAVES_OUT)
# These read the lake the throughput runs leave (caught up with the input), so they run it too.
NEEDS_THROUGHPUT = ("throughput", "profile", "write_shapes", "adhoc_query", "memory", "noop_catchup", "orchestration",
                    "orchestration_live", "sql_command")
# The order: throughput (and its profile), no-op catch-up, orchestration, freshness,
# ad-hoc queries, recovery, state, memory.
REPORT_ORDER = ("throughput", "profile", "write_shapes", "cold_start", "cores", "noop_catchup", "orchestration", "orchestration_live",
                "dedup_cost", "freshness", "freshness_large",
                "backfill_priority", "adhoc_query", "sql_command", "recovery", "state", "memory", "min_driver_memory",
                "jvm_start", "object_store", "history_scale", "landing_to_rows")
# Each goal (as the issue states it) and the figures it is about.
GOALS = {"throughput": (">= 0.9", ("ratio",)), "cores": (">= 1.8", ("ratio",)), "noop_catchup": ("<= 1.2", ("ratio",)),
         "orchestration_live": ("<= 5 s more", ("difference_s",)),
         "freshness": ("p50 <= 1.5 s, p95 <= 2.5 s", ("p50_s", "p95_s")), "adhoc_query": (">= 25", ("ratio",)),
         "sql_command": ("<= 1.5 s", ("seconds",)),
         "backfill_priority": ("live p50 during a backfill <= 2x idle", ("ratio_p50_during_to_idle",)),
         "state": ("<= 1.2", ("ratio",)), "dedup_cost": ("<= 1.3", ("ratio",)),
         "cold_start": ("one new file: the job <= 1.0x the floor (bare Spark + Delta, a fresh process each); its first "
                        "batch <= 2x a warm one", ("ratio_to_floor", "first_batch_to_warm")),
         "freshness_large": ("each reader: p50 <= 1.5 s, p95 <= 2.5 s; the first minute after the start p95 <= 4 s",
                             ("table_events",)),
         "history_scale": ("1M vs 10k files (local), 100k vs 1k objects (S3): discovery, restart to first commit, "
                           "inspect, no-op <= 1.3x; requests per trigger flat; state <= 2x",
                           ("worst_time_ratio", "requests_ratio", "worst_state_ratio")),
         "landing_to_rows": ("a landed file's rows in the table through the catch-up-on-data DAG: median <= 20 s",
                             ("median_s", "max_s"))}
NOT_YET = {
    "recovery": "measured by its own trial, `python -m spark_jobs trial recovery --kills 5` (kill -9 of a "
                "supervised job's driver to the next commit, goal median <= 20 s, max <= 30 s, exact output; "
                "report in .spark/bench/trial-recovery.json)",
}


@dataclass(frozen=True)
class BenchConfig:
    """What a benchmark run does.

    :param mode: ``full`` or ``quick`` (a label for the report).
    :param records: events in the generated input.
    :param records_per_file: events per log file.
    :param repeat: repetitions of each in-process measurement.
    :param warmup_fraction: the share of the input the throughput warm-up runs read.
    :param profile_stand_ins: also time the batch stand-ins of the profile (noop-sink runs).
    :param launch_repeat: repetitions of each process launch (no-op catch-up, orchestration).
    :param freshness_files: files landed one by one for the freshness measurement.
    :param freshness_gap_s: seconds between two landings.
    :param freshness_warmup_files: files (one micro-batch each) that warm the job up first.
    :param cold_start_table: events in the large table of ``cold_start`` (0: the small lake only).
    :param seed: the seed of the generated input.
    :param only: the measurements to run (the others are reported as skipped).
    :param root: where data, lakes, Airflow's benchmark DB and the report go.
    """

    mode: str = "full"
    records: int = 1_000_000
    records_per_file: int = 1000
    repeat: int = 3
    warmup_fraction: float = 1.0
    profile_stand_ins: bool = True
    launch_repeat: int = 3
    freshness_files: int = 30
    freshness_gap_s: float = 3.0
    freshness_warmup_files: int = 3
    cold_start_table: int = 10_000_000
    seed: int = 1
    only: tuple[str, ...] = MEASUREMENTS
    root: Path = field(default=BENCH_ROOT)

    @classmethod
    def quick(cls) -> "BenchConfig":
        """The ``--quick`` settings: a smaller input and fewer repetitions."""
        return cls(mode="quick", records=50_000, repeat=2, warmup_fraction=0.1, profile_stand_ins=False,
                   launch_repeat=1, freshness_files=10, cold_start_table=0, only=QUICK)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``bench`` command's options (shared by ``python -m spark_jobs bench`` and this module)."""
    parser.add_argument("--quick", action="store_true",
                        help="50k records, 2 repetitions, fewer parts (see QUICK_LEAVES_OUT; < 3 minutes)")
    parser.add_argument("--records", type=int, help="events in the generated input (default: 1,000,000; quick 50,000)")
    parser.add_argument("--repeat", type=int, help="repetitions of each measurement (default: 3; quick 2)")
    parser.add_argument("--freshness-files", type=int, help="files landed for freshness (default: 30; quick 10)")
    parser.add_argument("--seed", type=int, help="seed of the generated input (default 1)")
    parser.add_argument("--only", help=f"comma-separated measurements to run, of: {', '.join(MEASUREMENTS)} "
                                       f"({', '.join(n for n in NEEDS_THROUGHPUT if n != 'throughput')} also run "
                                       "throughput, whose lake they use)")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """A :class:`BenchConfig` from parsed ``bench`` options.

    :raises UsageError: for an unknown measurement or a non-positive number.
    """
    from spark_jobs.model.errors import UsageError

    config = BenchConfig.quick() if args.quick else BenchConfig()
    changes = {}
    for name in ("records", "repeat", "freshness_files", "seed"):
        value = getattr(args, name)
        if value is not None:
            if value < (0 if name == "seed" else 1):
                raise UsageError(f"--{name.replace('_', '-')} must be a positive whole number, got {value}")
            changes[name] = value
    if args.repeat is not None:
        changes["launch_repeat"] = args.repeat
    if args.only:
        only = tuple(name.strip() for name in args.only.split(",") if name.strip())
        unknown = [name for name in only if name not in MEASUREMENTS]
        if unknown:
            raise UsageError(f"unknown measurement(s) {', '.join(unknown)} in --only; use: {', '.join(MEASUREMENTS)}")
        changes["only"] = only
    return replace(config, **changes)


def machine() -> dict:
    """What the numbers were measured on."""
    import pyspark

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else None
    memory_kb = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemTotal")), 0) if Path("/proc/meminfo").exists() else 0
    java = shutil.which("java")
    java_version = None
    if java:
        import subprocess

        done = subprocess.run([java, "-version"], capture_output=True, text=True)
        java_version = (done.stderr or done.stdout).splitlines()[0] if (done.stderr or done.stdout) else None
    return {"cores": os.cpu_count(), "cpu": model, "memory_gb": round(memory_kb / 1024 ** 2, 1),
            "os": platform.platform(), "python": platform.python_version(), "java": java_version,
            "spark": pyspark.__version__, "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def goals(measurements: dict) -> dict:
    """Each goal with the measured figure beside it, and whether it was met (``None``: not measured)."""
    summary = {}
    for name, (goal, keys) in GOALS.items():
        section = measurements.get(name, {})
        summary[name] = {"goal": goal, "value": {k: section.get(k) for k in keys},
                         "met": section.get("met"), **({"status": section["status"]} if "status" in section else {})}
    return summary


def _attempt(name: str, fn: Callable[[], dict], failures: list[str]) -> dict:
    """Run one measurement; a failure is reported (and logged with its traceback), not raised."""
    log.info("== %s ==", name)
    started = time.monotonic()
    try:
        section = fn()
    except Exception as exc:  # noqa: BLE001 - one failed measurement must not lose the others
        log.error("%s failed:\n%s", name, traceback.format_exc())
        failures.append(name)
        section = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc).strip()[:2000]}"}
    log.info("%s took %.1f s", name, time.monotonic() - started)
    return {**section, "measurement_took_s": round(time.monotonic() - started, 1)}


def run_benchmark(config: BenchConfig, spark=None) -> dict:
    """Generate the input, run the measurements of ``config.only``, and return the report.

    :param config: what to run.
    :param spark: a SparkSession to use (else one is built with :func:`spark_jobs.driver.session.build_session`
        and stopped at the end).
    """
    from tools.bench.data import RecordSource, write_landing

    started = time.monotonic()
    report: dict = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "mode": config.mode,
                    "machine": machine()}
    run_dir = config.root / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    measured: dict = {}
    failures: list[str] = []
    if set(config.only) <= set(OWN_INPUT):
        report["data"] = {"status": "not written", "why": f"{', '.join(config.only)} build their own input"}
        _own_input(config, run_dir, measured, failures)
        return _finish(config, report, measured, failures, started)
    source = RecordSource()
    data = write_landing(config.root / "data" / f"r{config.records}-f{config.records_per_file}-s{config.seed}",
                         config.records, config.records_per_file, config.seed, source)
    log.info("input: %d records in %d files (%s)", data.records, data.files,
             "reused" if data.reused else f"written in {data.seconds} s")
    report["data"] = {**data.to_dict(), "mb_compressed": round(data.bytes_compressed / 1e6, 1),
                      "mb_uncompressed": round(data.bytes_uncompressed / 1e6, 1)}
    lake = _in_process(config, spark, data, source, run_dir, measured, failures)
    if lake is not None and "noop_catchup" in config.only:
        from tools.bench.launches import measure_noop_catchup

        measured["noop_catchup"] = _attempt("noop_catchup", lambda: measure_noop_catchup(
            data.landing, lake, config.launch_repeat), failures)
    if lake is not None and "orchestration" in config.only:
        from tools.bench.launches import measure_orchestration

        measured["orchestration"] = _attempt("orchestration", lambda: measure_orchestration(
            data.landing, lake, config.root / "airflow", run_dir, config.launch_repeat), failures)
    if lake is not None and "orchestration_live" in config.only:
        from tools.bench.orchestration_live import measure_orchestration_live

        measured["orchestration_live"] = _attempt("orchestration_live", lambda: measure_orchestration_live(
            data.landing, lake, run_dir / "orchestration-live", config.launch_repeat), failures)
    if lake is not None and "sql_command" in config.only:
        from tools.bench.launches import measure_sql_command

        measured["sql_command"] = _attempt("sql_command", lambda: measure_sql_command(
            lake, data.dates[len(data.dates) // 2], config.launch_repeat), failures)
    if "cores" in config.only:
        from tools.bench.cores import measure_cores

        measured["cores"] = _attempt("cores", lambda: measure_cores(data.landing, run_dir / "cores"), failures)
    if "min_driver_memory" in config.only:
        from tools.bench.cores import measure_min_driver_memory

        measured["min_driver_memory"] = _attempt("min_driver_memory", lambda: measure_min_driver_memory(
            data.landing, run_dir / "min-driver-memory", default_run=measured.get("cores", {}).get("local_2")),
            failures)
    if "jvm_start" in config.only:
        from tools.bench.launches import measure_jvm_start

        measured["jvm_start"] = _attempt("jvm_start", lambda: measure_jvm_start(config.launch_repeat), failures)
    if "object_store" in config.only:
        from tools.bench.object_store import measure_object_store

        measured["object_store"] = _attempt("object_store", lambda: measure_object_store(
            data.landing, data.records, run_dir, config.repeat, config.freshness_files), failures)
    _own_input(config, run_dir, measured, failures)
    return _finish(config, report, measured, failures, started)


def _own_input(config: BenchConfig, run_dir: Path, measured: dict, failures: list[str]) -> None:
    """The parts that build their own input (:data:`OWN_INPUT`)."""
    if "history_scale" in config.only:
        from tools.bench.history_scale import measure_history_scale

        measured["history_scale"] = _attempt("history_scale", lambda: measure_history_scale(
            run_dir, config.launch_repeat, cache=config.root / "history"), failures)
    if "landing_to_rows" in config.only:
        from tools.bench.landing_to_rows import measure_landing_to_rows

        measured["landing_to_rows"] = _attempt("landing_to_rows", lambda: measure_landing_to_rows(
            run_dir / "landing-to-rows", repeat=5), failures)


def _finish(config: BenchConfig, report: dict, measured: dict, failures: list[str], started: float) -> dict:
    """The report of a run: every part (measured, or skipped with why), the goals, the load at the end."""
    for name in MEASUREMENTS:
        if name in config.only:
            why = "needs the lake of the throughput runs, which failed"
        elif config.mode == "quick" and config.only == QUICK:
            why = f"--quick leaves it out: {QUICK_LEAVES_OUT[name]}; add it with --quick --only {name}"
        else:
            why = "not in --only"
        measured.setdefault(name, {"status": "skipped", "why": why})
    for name, why in NOT_YET.items():
        measured[name] = {"status": "not applicable yet", "why": why}
    report["measurements"] = {name: measured[name] for name in REPORT_ORDER}
    report["goals"] = goals(report["measurements"])
    report["failed"] = failures
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["wall_s"] = round(time.monotonic() - started, 1)
    return report


def _in_process(config: BenchConfig, spark, data, source, run_dir: Path, measured: dict,
                failures: list[str]) -> Path | None:
    """The measurements made with this process's SparkSession; returns the caught-up lake (or ``None``).

    Freshness is measured first: its job is started (and warmed up) while this process's session
    starts, and it is stopped before anything else is measured.
    """
    from tools.bench import freshness
    from tools.bench.adhoc import measure_adhoc
    from tools.bench.probes import MemorySampler
    from tools.bench.throughput import measure_profile, measure_throughput, warm_up
    from spark_jobs.driver.session import build_session

    if not any(name in config.only for name in IN_PROCESS + NEEDS_THROUGHPUT):
        return None  # the other launches start their own processes
    fresh_job = freshness.start_job(run_dir, source, config.freshness_warmup_files, config.records_per_file,
                                    config.seed) if "freshness" in config.only else None
    own_session = spark is None
    session_started = time.monotonic()
    try:
        spark = spark or build_session("cloudtrail_etl_bench", long_running=True)
    except BaseException:
        if fresh_job:
            fresh_job.job.stop()
        raise
    if own_session:
        log.info("SparkSession started in %.1f s", time.monotonic() - session_started)
    raw: dict = {}
    warmup: dict = {}
    try:
        if fresh_job:
            measured["freshness"] = _attempt("freshness", lambda: freshness.measure_freshness(
                spark, fresh_job, config.freshness_files, config.freshness_gap_s), failures)
        if "freshness_large" in config.only:
            from tools.bench.freshness_large import measure_freshness_large

            measured["freshness_large"] = _attempt("freshness_large", lambda: measure_freshness_large(
                spark, run_dir, source, files=config.freshness_files + 20, gap_s=config.freshness_gap_s), failures)
        if "backfill_priority" in config.only:
            measured["backfill_priority"] = _attempt("backfill_priority", lambda: _backfill_priority(
                config, spark, data, source, run_dir), failures)
        if "state" in config.only:
            from tools.bench.state_size import measure_state

            measured["state"] = _attempt("state", lambda: measure_state(
                spark, run_dir, hours=3 if config.mode == "quick" else 6), failures)
        if "dedup_cost" in config.only:
            from tools.bench.merge_cost import measure as measure_dedup_cost

            measured["dedup_cost"] = _attempt("dedup_cost", lambda: measure_dedup_cost(spark=spark), failures)
        if "cold_start" in config.only:
            from tools.bench.cold_start import measure_cold_start

            measured["cold_start"] = _attempt("cold_start", lambda: measure_cold_start(
                spark, run_dir, source, config.launch_repeat, config.cold_start_table), failures)
        if not any(name in config.only for name in NEEDS_THROUGHPUT):
            return None
        warmup.update(_attempt("throughput warm-up", lambda: warm_up(spark, data, run_dir, config.warmup_fraction),
                               failures))
        with MemorySampler(spark._jvm.java.lang.ProcessHandle.current().pid()) as memory:
            def throughput() -> dict:
                section, runs = measure_throughput(spark, data, run_dir, config.repeat, warmup)
                raw.update(runs)
                return section

            measured["throughput"] = _attempt("throughput", throughput, failures)
            if "profile" in config.only and raw:
                measured["profile"] = _attempt("profile", lambda: measure_profile(
                    spark, data, raw, stand_ins=config.profile_stand_ins), failures)
            if "write_shapes" in config.only and raw:
                from tools.bench.write_shapes import measure_write_shapes

                measured["write_shapes"] = _attempt("write_shapes", lambda: measure_write_shapes(
                    spark, data, run_dir, config.repeat, raw, measured["throughput"]["job"]["median_s"]), failures)
            if "adhoc_query" in config.only and raw:
                measured["adhoc_query"] = _attempt("adhoc_query", lambda: measure_adhoc(
                    spark, data, raw["lake"], config.repeat), failures)
        if "memory" in config.only:
            measured["memory"] = {
                **memory.report(),
                "spark.driver.memory": spark.conf.get("spark.driver.memory", None),
                "measured_during": "throughput, profile and ad-hoc query, in this process's SparkSession "
                                   "(the JVM figure is its high-water mark since it started)",
                "note": "local mode: driver and executor are one JVM; each Python worker's peak counts the "
                        "pages it shares with the daemon it was forked from",
                "goal": None,
            }
    finally:
        if own_session:
            spark.stop()
    return raw.get("lake")


def _backfill_priority(config: BenchConfig, spark, data, source, run_dir: Path) -> dict:
    """The live job's freshness idle and during backfills of the input (see :mod:`tools.bench.backfill_priority`)."""
    from tools.bench import freshness
    from tools.bench.backfill_priority import measure_backfill_priority
    from tools.bench.data import write_landing

    second = write_landing(config.root / "data" / f"r{config.records}-f{config.records_per_file}-s{config.seed + 1}",
                           config.records, config.records_per_file, config.seed + 1, source)
    live = freshness.start_job(run_dir, source, config.freshness_warmup_files, config.records_per_file, config.seed,
                               name="backfill_priority")
    return measure_backfill_priority(spark, live, [data, second], config.freshness_files, config.freshness_gap_s,
                                     run_dir)


def save_report(report: dict, path: Path) -> None:
    """Write the report as indented JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")


def run_from_args(args: argparse.Namespace) -> int:
    """The ``bench`` command: run, print the report on stdout, save it, and return the exit status."""
    from spark_jobs.driver.session import configure_logging

    config = config_from_args(args)
    configure_logging()
    report = run_benchmark(config)
    save_report(report, config.root / "report.json")
    print(json.dumps(report, indent=2, default=str))
    log.info("report saved to %s (%.0f s in all)", config.root / "report.json", report["wall_s"])
    return 1 if report["failed"] else 0


def parser(prog: str = "python -m spark_jobs bench") -> argparse.ArgumentParser:
    """The ``bench`` command's arguments."""
    made = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    add_arguments(made)
    return made


def main(argv: list[str] | None = None, prog: str = "python -m tools.bench.benchmark") -> int:
    """``python -m spark_jobs bench`` (and ``python -m tools.bench.benchmark``): run the benchmark."""
    return run_from_args(parser(prog).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
