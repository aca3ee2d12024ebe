"""Benchmark part ``state``: does the stateful jobs' state stay flat when the stream covers 10x the event time?

Usage::

    python -m spark_jobs bench --only state            # 1x = 6 hours of events, 10x = 60 hours
    python -m spark_jobs bench --only state --quick    # 1x = 3 hours, 10x = 30 hours

For each span, a fresh lake gets ``cloudtrail_events`` commits of one hour of event time each (the
same traffic per hour: 3 accounts, a fixed set of APIs, failed console sign-ins from a fixed set of
users and IPs, root calls), and ``cloudtrail_activity`` and ``cloudtrail_alerts`` run available-now
over them, one commit per micro-batch, as a live stream would see them. ``word_count`` reads 5 or 50
text files of one vocabulary. The state rows are then read with Spark's ``statestore`` data source
(every state variable of every operator, timers included, :mod:`spark_jobs.driver.stream_state`), and
the last micro-batch's ``stateOperators[].numRowsTotal`` is reported beside them. The ratio 10x / 1x
of the state rows is the figure; the goal is at most 1.2.

What keeps each bounded: the activity windows are evicted when the watermark passes their end; the
alert rules drop a key's windows older than ``allowed_lateness`` behind its newest event, and their
keys are as many as the (account, user, IP) combinations seen within ``state_ttl``; the word count
holds one row per distinct word.
"""

from __future__ import annotations

import logging
import random
import shutil
import time
from datetime import timedelta
from pathlib import Path

from tools import sample_events as se

log = logging.getLogger("tools.bench")

JOBS = ("cloudtrail_activity", "cloudtrail_alerts")
VOCABULARY = [f"word{i}" for i in range(200)]


def hourly_commits(hours: int, per_hour: int = 60, seed: int = 5) -> list[list[dict]]:
    """``hours`` commits of one hour of the same kind of traffic each (see the module docstring)."""
    rng = random.Random(seed)
    commits = se.event_stream(commits=hours, per_commit=per_hour, step=timedelta(hours=1),
                              start=se.START.replace(hour=0), seed=seed).commits
    for k, rows in enumerate(commits):
        base = rows[0]["eventTime"].replace(minute=0, second=0)
        for i in range(4):
            user, ip = rng.choice(("alice", "bob")), rng.choice(("203.0.113.1", "203.0.113.2"))
            rows.append(se.event(f"login-{seed}-{k}-{i}", base + timedelta(minutes=rng.randrange(60)),
                                 se.ACCOUNTS[0], "signin.amazonaws.com", "ConsoleLogin", user=user, ip=ip,
                                 response={"ConsoleLogin": "Failure"}, error_message="Failed authentication"))
        rows.append(se.event(f"root-{seed}-{k}", base + timedelta(minutes=30), se.ACCOUNTS[1], "iam.amazonaws.com",
                             "ListUsers", identity="Root"))
    return commits


def _run(spark, job_name: str, lake, input_path=None, **options) -> tuple[list, float]:

    from tools.bench.probes import ProgressRecorder
    from spark_jobs.registry import get_job
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.driver.runner import resolve_input, run_streaming
    from spark_jobs.model.triggers import parse_trigger

    job = get_job(job_name)
    path = input_path or resolve_input(job, None, str(lake.root))
    started = time.monotonic()
    with ProgressRecorder(spark) as recorder:
        run_streaming(job, RunOptions(path, lake, parse_trigger("available-now"),
                                               {**job.file_source_options, **options}), spark=spark)
        progress = recorder.latest_run()
    return progress, time.monotonic() - started


def _state_rows(spark, lake, job_name: str, progress: list) -> dict:
    from spark_jobs.driver.stream_state import read_state

    variables = read_state(spark, str(lake.checkpoint_path(job_name)))
    last = progress[-1] if progress else None
    return {"state_rows": sum(v.rows for v in variables),
            "by_variable": {f"{v.operator_id}:{v.variable or v.operator}": v.rows for v in variables},
            "num_rows_total_last_batch": sum(op.numRowsTotal for op in last.stateOperators) if last else None,
            "batches": len(progress)}


def measure_span(spark, root: Path, hours: int) -> dict:
    """Run the stateful jobs over ``hours`` of events (and ``hours`` // 6 * 5 text files); their state rows."""
    from spark_jobs.model.lake import Lake
    from spark_jobs.driver.job_modules import prepare_source
    from spark_jobs.registry import get_job

    shutil.rmtree(root, ignore_errors=True)
    lake = Lake(root / "lake")
    table = lake.table_path("cloudtrail_events")
    prepare_source(spark, get_job("cloudtrail_activity"), table)
    started = time.monotonic()
    commits = hourly_commits(hours)
    se.append_commits(spark, table, commits)
    result: dict = {"hours": hours, "events": sum(len(c) for c in commits),
                    "write_s": round(time.monotonic() - started, 1)}
    for name in JOBS:
        progress, seconds = _run(spark, name, lake, maxFilesPerTrigger="1")
        result[name] = {**_state_rows(spark, lake, name, progress), "run_s": round(seconds, 1)}
        log.info("state, %d hours, %s: %s", hours, name, result[name])
    words = root / "words"
    words.mkdir(parents=True)
    rng = random.Random(hours)
    for number in range(max(1, hours * 5 // 6)):
        (words / f"{number}.txt").write_text("\n".join(" ".join(rng.choices(VOCABULARY, k=12)) for _ in range(50)))
    progress, seconds = _run(spark, "word_count", lake, input_path=words)
    result["word_count"] = {**_state_rows(spark, lake, "word_count", progress), "run_s": round(seconds, 1)}
    return result


def measure_state(spark, run_dir: Path, hours: int = 6) -> dict:
    """The ``state`` section of the benchmark report: 1x and 10x the event-time span, per job, and the ratio."""
    one = measure_span(spark, run_dir / "state-1x", hours)
    ten = measure_span(spark, run_dir / "state-10x", hours * 10)
    jobs = {}
    for name in (*JOBS, "word_count"):
        ratio = ten[name]["state_rows"] / one[name]["state_rows"] if one[name]["state_rows"] else None
        jobs[name] = {"state_rows_1x": one[name]["state_rows"], "state_rows_10x": ten[name]["state_rows"],
                      "ratio": round(ratio, 3) if ratio is not None else None, "1x": one[name], "10x": ten[name]}
    worst = max(j["ratio"] for j in jobs.values() if j["ratio"] is not None)
    return {"ratio": worst, "goal": "<= 1.2", "met": worst <= 1.2, "span_hours": [hours, hours * 10],
            "events": [one["events"], ten["events"]], "jobs": jobs,
            "how": "state rows read with Spark's statestore data source after an available-now run reading one "
                   "hour of events per micro-batch; ratio = 10x / 1x, the worst job's"}
