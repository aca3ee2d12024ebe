"""Throughput of ``cloudtrail_etl`` (available-now) against bare Spark on the same files, and where the time goes.

Both run in one SparkSession, alternating, on a fresh output each time. Warm-up runs come first
(the first runs after a JVM starts are much slower) and are reported, not counted in the medians.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

from pyspark.sql import SparkSession

from tools.bench import bare
from tools.bench.data import BenchData
from tools.bench.probes import ProgressRecorder, median, progress_breakdown, spark_jobs_since
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from spark_jobs.driver.session import session_conf
from spark_jobs.model.triggers import parse_trigger

log = logging.getLogger("tools.bench")
JOB = get_job("cloudtrail_etl")
MB = 1_000_000


def run_job(spark: SparkSession, landing: Path, lake: Path, progress: ProgressRecorder) -> dict:
    """One available-now run of the job on a fresh ``lake``: seconds, rows, progress and Spark jobs."""
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.driver.runner import run_streaming

    shutil.rmtree(lake, ignore_errors=True)
    options = RunOptions(landing, Lake(lake), parse_trigger("available-now"), dict(JOB.file_source_options))
    since = int(time.time() * 1000)
    started = time.monotonic()
    summary = run_streaming(JOB, options, spark=spark)
    seconds = time.monotonic() - started
    return {"seconds": round(seconds, 3), "rows": summary.rows, "batches": summary.batches,
            "progress_ms": progress_breakdown(progress.latest_run(), seconds),
            "spark_jobs": spark_jobs_since(spark, since)}


def run_bare(spark: SparkSession, landing: Path, out: Path, conf: dict[str, str]) -> dict:
    """One bare-Spark parse-explode-flatten-partitioned-write of ``landing`` to ``out`` with SQL ``conf``."""
    shutil.rmtree(out, ignore_errors=True)
    since = int(time.time() * 1000)
    with session_conf(spark, conf):
        started = time.monotonic()
        bare.write_events(spark, landing, out)
        seconds = time.monotonic() - started
    return {"seconds": round(seconds, 3), "spark_jobs": spark_jobs_since(spark, since)}


def _rates(data: BenchData, seconds: float) -> dict:
    return {"records_per_s": round(data.records / seconds),
            "mb_per_s_uncompressed": round(data.bytes_uncompressed / MB / seconds, 3),
            "mb_per_s_compressed": round(data.bytes_compressed / MB / seconds, 3)}


def warmup_landing(data: BenchData, workdir: Path, fraction: float) -> Path:
    """The input to warm up on: all of it, or hard links to a ``fraction`` of its files (at least one)."""
    if fraction >= 1:
        return data.landing
    files = sorted(p for p in data.landing.rglob("*.json.gz"))
    keep = files[:: max(1, round(1 / fraction))] or files[:1]
    folder = workdir / "warmup-landing"
    shutil.rmtree(folder, ignore_errors=True)
    for path in keep:
        target = folder / path.relative_to(data.landing)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(path, target)
    return folder


def warm_up(spark: SparkSession, data: BenchData, workdir: Path, fraction: float = 1.0) -> dict:
    """One run of the job and one of bare Spark, not measured: the first runs after a JVM starts are slow.

    :param fraction: the share of the input files they read (1: all of them; 0: no warm-up).
    :returns: their times, for the report.
    """
    if fraction <= 0:
        return {"input_share": 0}
    log.info("throughput: warm-up runs of the job and bare Spark on %d%% of the input", round(fraction * 100))
    warmup_input = warmup_landing(data, workdir, fraction)
    with ProgressRecorder(spark) as progress:
        job_s = run_job(spark, warmup_input, workdir / "job-lake-warmup", progress)["seconds"]
    shutil.rmtree(workdir / "job-lake-warmup", ignore_errors=True)
    bare_s = run_bare(spark, warmup_input, workdir / "bare-out", {})["seconds"]
    return {"input_share": fraction, "job_s": job_s, "bare_s": bare_s}


def measure_throughput(spark: SparkSession, data: BenchData, workdir: Path, repeat: int,
                       warmup: dict) -> tuple[dict, dict]:
    """Alternate bare Spark (each reader setting of :data:`bare.READ_VARIANTS`) and the job, ``repeat`` times.

    Bare Spark's figure is its best setting's median. A job run that writes the wrong number of
    events fails the measurement.

    :param warmup: what :func:`warm_up` (run before) returned.
    :returns: the report section, and the raw runs (for the profile); the last job run's lake stays at
        ``raw["lake"]`` for the measurements that need a caught-up lake.
    """
    landing = data.landing
    bare_out = workdir / "bare-out"
    with ProgressRecorder(spark) as progress:
        jobs: list[dict] = []
        bares: dict[str, list[dict]] = {name: [] for name in bare.READ_VARIANTS}
        for i in range(repeat):
            log.info("throughput: repetition %d of %d (bare Spark, then the job)", i + 1, repeat)
            for name, conf in bare.READ_VARIANTS.items():
                bares[name].append(run_bare(spark, landing, bare_out, conf))
            lake = workdir / f"job-lake-{i}"
            jobs.append(run_job(spark, landing, lake, progress))
            if jobs[-1]["rows"].get("cloudtrail_events") != data.records:
                raise AssertionError(f"the job wrote {jobs[-1]['rows']} rows, expected {data.records} events")
            if i < repeat - 1:
                shutil.rmtree(lake)
    bare_rows = spark.read.parquet(str(bare_out)).count()
    if bare_rows != data.records:
        raise AssertionError(f"bare Spark wrote {bare_rows} rows, expected {data.records}")
    medians = {name: median([r["seconds"] for r in runs]) for name, runs in bares.items()}
    best = min(medians, key=medians.get)
    job_s, bare_s = median([r["seconds"] for r in jobs]), medians[best]
    ratio = round(bare_s / job_s, 3)
    section = {
        "what": "an available-now run of cloudtrail_etl on a fresh lake vs bare Spark's spark.read.json + "
                "posexplode + flatten + write.partitionBy('date').parquet, same files, same SparkSession; "
                "ratio = job speed / bare speed",
        "repetitions": repeat,
        "warmup": warmup,
        "job": {"seconds": [r["seconds"] for r in jobs], "median_s": job_s, **_rates(data, job_s)},
        "bare_spark": {"seconds": [r["seconds"] for r in bares[best]], "median_s": bare_s, **_rates(data, bare_s),
                       "reader_settings": best, "settings": bare.READ_VARIANTS[best],
                       "seconds_by_settings": {name: [r["seconds"] for r in runs] for name, runs in bares.items()}},
        "ratio": ratio,
        "goal": ">= 0.9",
        "met": ratio >= 0.9,
        "per_core": per_core(data.records / job_s, data.records / bare_s),
    }
    raw = {"jobs": jobs, "bares": bares[best], "best_conf": bare.READ_VARIANTS[best],
           "lake": workdir / f"job-lake-{repeat - 1}"}
    return section, raw


SEED_001_RECORDS_PER_HOUR = 14e9
SEED_001_NODES = 10


def per_core(job_records_per_s: float, bare_records_per_s: float, cores: int | None = None) -> dict:
    """Records/s per core here, beside seed 001's "14+ billion records/hour on 10 nodes" per node and per core."""
    import os

    cores = cores or os.cpu_count() or 1
    per_node = SEED_001_RECORDS_PER_HOUR / 3600 / SEED_001_NODES
    return {
        "cores": cores,
        "job_records_per_s_per_core": round(job_records_per_s / cores),
        "bare_spark_records_per_s_per_core": round(bare_records_per_s / cores),
        "seed_001": {
            "claim": "14+ billion records/hour on 10 nodes",
            "records_per_s_per_node": round(per_node),
            "records_per_s_per_core_if_8_core_nodes": round(per_node / 8),
            "records_per_s_per_core_if_16_core_nodes": round(per_node / 16),
            "assumptions": "the claim names neither node size nor record size; 8 and 16 cores per node "
                           "bracket common worker sizes; records assumed comparable (~1 KB of JSON each)",
            "job_per_core_vs_seed_001_per_core": {
                "if_8_core_nodes": round(job_records_per_s / cores / (per_node / 8), 3),
                "if_16_core_nodes": round(job_records_per_s / cores / (per_node / 16), 3),
            },
        },
    }


# ---- Profile: where the job's time goes ---------------------------------------------------------


def _noop(frame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _timed(fn) -> float:
    started = time.monotonic()
    fn()
    return round(time.monotonic() - started, 3)


def label_jobs(jobs: list[dict]) -> dict[str, int]:
    """Milliseconds of a one-batch streaming run's Spark jobs by what they do, from the step names the runner
    gives them (the first line of their descriptions).

    ``list_input_files`` is the file source listing a batch's files in a Spark job (only past
    ``spark.sql.sources.parallelPartitionDiscovery.threshold`` files); ``delta_log`` Delta reading its own
    log (snapshots before and after a commit); ``one_pass`` a batch written in one pipelined pass
    (:mod:`spark_jobs.driver.write.pipelined`: the listing of its files, then parse, in-batch dedup and MERGE);
    ``parse_and_count`` decoding and parsing every file into the batch's cache while counting each
    table's rows and collecting the event dates; ``merge_and_write`` each table's write from that cache
    (in-batch dedup, MERGE, Parquet write) and the count of input files; ``other`` anything else.
    """
    from spark_jobs.driver.write.pipelined import STEP_LIST, STEP_PIPELINED
    from spark_jobs.driver.write.cached import STEP_COUNT, STEP_PARSE, STEP_WRITE

    totals: dict[str, int] = {}
    for job in jobs:
        description = job["description"] or ""
        if description.startswith("Listing leaf files"):
            label = "list_input_files"
        elif description.startswith("Delta:") or "recordDeltaOperation" in description:
            label = "delta_log"
        elif description.startswith((STEP_LIST, STEP_PIPELINED)):
            label = "one_pass"
        elif description.startswith(STEP_PARSE):
            label = "parse_and_count"
        elif description.startswith((STEP_WRITE, STEP_COUNT)):
            label = "merge_and_write"
        else:
            label = "other"
        totals[label] = totals.get(label, 0) + (job["ms"] or 0)
    return totals


def _median_run(runs: list[dict]) -> dict:
    ordered = sorted(runs, key=lambda r: r["seconds"])
    return ordered[(len(ordered) - 1) // 2]


def measure_profile(spark: SparkSession, data: BenchData, raw: dict, stand_ins: bool = True) -> dict:
    """Where the job's time goes, next to bare Spark's: streaming phases, Spark jobs, and batch stand-ins.

    The stand-ins run the same plans into Spark's ``noop`` sink (everything computed, nothing written):
    the job's Python decoding alone, the job's whole transform, bare Spark's read alone and bare
    Spark's read + explode + flatten. Each runs once, warm.

    :param stand_ins: run the stand-ins (without them the profile is the median runs' breakdown only).
    """
    import functools

    from spark_jobs.transforms.cloudtrail import decode
    from spark_jobs.transforms.cloudtrail.schema import KNOWN_TOP_LEVEL_KEYS
    from spark_jobs.driver.job_modules import job_module
    from spark_jobs.driver.source_readers import read_files

    module = job_module(JOB)
    landing = data.landing

    def files():
        return read_files(spark, JOB, landing, dict(JOB.file_source_options), streaming=False)

    stand_in_s: dict[str, float] = {}
    if stand_ins:
        with session_conf(spark, raw["best_conf"]):
            stand_in_s["bare_read_only (read.json with the Records schema)"] = _timed(lambda: _noop(
                spark.read.schema(bare.records_schema()).option("recursiveFileLookup", "true").json(str(landing))))
            stand_in_s["bare_parse_and_flatten (read.json + posexplode + flatten)"] = _timed(
                lambda: _noop(bare.events(spark, landing)))
        stand_in_s["job_split_only (binaryFile + Python gunzip, simdjson check, key walk)"] = _timed(lambda: _noop(
            files().select("path", "content").mapInArrow(
                functools.partial(decode.split_batches, known=KNOWN_TOP_LEVEL_KEYS), decode.SPLIT_DDL)))
        stand_in_s["job_transform (decode + split + parse + flatten + quarantine rules + rescued data)"] = _timed(
            lambda: _noop(module.transform(files(), JOB)))

    job_run, bare_run = _median_run(raw["jobs"]), _median_run(raw["bares"])
    by_label = label_jobs(job_run["spark_jobs"])
    bare_write_s = bare_run["seconds"]
    return {
        "what": "the median job run and the median bare run, broken down; then the same plans into a noop sink",
        "job_run_seconds": job_run["seconds"],
        "job_streaming_phases_ms": job_run["progress_ms"],
        "job_spark_jobs_ms": by_label,
        "job_spark_jobs": job_run["spark_jobs"],
        "bare_run_seconds": bare_write_s,
        "bare_spark_jobs": bare_run["spark_jobs"],
        "noop_sink_seconds": stand_in_s or "not run (--quick)",
        "findings": _findings(job_run, by_label, list(stand_in_s.values()), bare_write_s),
    }


def _findings(job_run: dict, by_label: dict, stand_ins: list[float], bare_write: float) -> list[str]:
    """Plain sentences from the numbers (nothing the numbers do not carry)."""
    phases = {key: ms / 1000 for key, ms in job_run["progress_ms"].items()}
    notes = [
        f"job run {job_run['seconds']:.1f} s vs bare Spark {bare_write:.1f} s: listing {phases['listing']:.1f} s, "
        f"planning {phases['query_planning']:.1f} s, foreachBatch {phases['add_batch']:.1f} s, "
        f"offset/commit logs {phases['commit']:.1f} s, query start/stop {phases['outside_batches']:.1f} s",
    ]
    if "list_input_files" in by_label:
        listing = by_label["list_input_files"] / 1000
        notes.append(f"listing: a Spark job with one task per input file spends {listing:.1f} s on the batch's "
                     "files (getBatch); bare Spark lists one folder in the driver")
    if "parse_and_count" in by_label:
        notes.append(f"foreachBatch: decoding and parsing every file into the batch's cache (counting rows, "
                     f"collecting event dates) takes {by_label['parse_and_count'] / 1000:.1f} s; the in-batch "
                     f"dedup, MERGE and write of each table {by_label.get('merge_and_write', 0) / 1000:.1f} s; "
                     f"Delta's own log reads {by_label.get('delta_log', 0) / 1000:.1f} s")
    if "one_pass" in by_label:
        notes.append(f"foreachBatch: the one pass (listing the batch's files, then decoding, parsing, ranking by "
                     f"key and the insert-only MERGE of the events) takes {by_label['one_pass'] / 1000:.1f} s; "
                     f"what it left for the batch's cache {by_label.get('parse_and_count', 0) / 1000:.1f} s + "
                     f"{by_label.get('merge_and_write', 0) / 1000:.1f} s; Delta's own log reads "
                     f"{by_label.get('delta_log', 0) / 1000:.1f} s")
    if stand_ins:
        bare_read, bare_parse, split_only, transform = stand_ins
        notes.append(f"into a noop sink: the job's transform takes {transform:.1f} s (the Python split alone "
                     f"{split_only:.1f} s), bare Spark's parse + flatten {bare_parse:.1f} s (its JSON read alone "
                     f"{bare_read:.1f} s); bare Spark's write adds {max(bare_write - bare_parse, 0):.1f} s")
    return notes
