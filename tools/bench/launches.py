"""Costs of launching the job: a no-op catch-up against a bare SparkSession, and Airflow against spark-submit.

Each launch is a fresh process timed by wall clock, as a scheduler would see it. The lake given is
already caught up with the landing folder, so every job run here finds nothing new: the work is
identical (none) and what is measured is the launch.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tools.bench.probes import median
from spark_jobs.launch.submit import SparkConnection, Submission
from spark_jobs.model.lake import PROJECT_ROOT
from spark_jobs.registry import get_job

log = logging.getLogger("tools.bench")
JOB = get_job("cloudtrail_etl")
DAG_ID = f"{JOB.name}_catchup"
BARE_SESSION = "from spark_jobs.driver.session import build_session; build_session({name!r}).stop()"


def timed(command: list[str], env: dict | None = None, timeout: float = 900) -> tuple[float, str]:
    """Run ``command`` in the project folder; its wall time and stdout.

    :raises RuntimeError: with the tail of its output if it fails.
    """
    started = time.monotonic()
    done = subprocess.run(command, cwd=PROJECT_ROOT, env=env or dict(os.environ), capture_output=True,
                          text=True, timeout=timeout)
    seconds = round(time.monotonic() - started, 3)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise RuntimeError(f"{' '.join(command[:4])} ... failed (exit {done.returncode}):\n{tail}")
    return seconds, done.stdout


def _summary(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def _check_noop(stdout: str, what: str) -> None:
    batches = _summary(stdout).get("batches")
    if batches != 0:
        raise AssertionError(f"{what} was meant to find nothing new, but ran {batches} batches")


def measure_noop_catchup(landing: Path, lake: Path, repeat: int) -> dict:
    """``python -m spark_jobs run`` (available-now, nothing new) vs a process that starts and stops a SparkSession."""
    job_cmd = [sys.executable, "-m", "spark_jobs", "run", JOB.name, "--input", str(landing), "--lake", str(lake),
               "--trigger", "available-now"]
    bare_cmd = [sys.executable, "-c", BARE_SESSION.format(name=JOB.name)]
    job_s, bare_s, in_run_streaming, skipped = [], [], [], []
    for i in range(repeat):
        log.info("no-op catch-up: repetition %d of %d", i + 1, repeat)
        seconds, _ = timed(bare_cmd)
        bare_s.append(seconds)
        seconds, out = timed(job_cmd)
        _check_noop(out, "the no-op run")
        job_s.append(seconds)
        in_run_streaming.append(_summary(out).get("seconds"))
        skipped.append(_summary(out).get("skipped"))
    ratio = round(median(job_s) / median(bare_s), 2)
    return {
        "what": "wall time of `python -m spark_jobs run cloudtrail_etl` with nothing new (the input's files "
                "all seen) vs `python -c` that builds the same SparkSession (spark_jobs.driver.session) and stops it",
        "job_run": {"seconds": job_s, "median_s": median(job_s),
                    "in_run_streaming_s": in_run_streaming, "skipped": skipped,
                    "note": "in_run_streaming_s is the run's own summary (the checkpoint inspection and, unless "
                            "it proved there is nothing new, session start, query start, listing and stop); the "
                            "rest is the interpreter start and imports; skipped is the run's reason for not "
                            "starting Spark (null: it started Spark)"},
        "bare_session": {"seconds": bare_s, "median_s": median(bare_s)},
        "ratio": ratio,
        "goal": "<= 1.2",
        "met": ratio <= 1.2,
    }


SQL_QUERY = "SELECT eventSource, count(*) AS n FROM cloudtrail_events WHERE date = '{day}' GROUP BY 1 ORDER BY 2 DESC"


def measure_sql_command(lake: Path, day: str, repeat: int) -> dict:
    """The whole ``python -m spark_jobs sql --engine duckdb`` command (no JVM), against a bare interpreter start."""
    query = SQL_QUERY.format(day=day)
    command = [sys.executable, "-m", "spark_jobs", "sql", "--engine", "duckdb", "--format", "json", "--lake",
               str(lake), query]
    interpreter_s, sql_s, rows = [], [], None
    for i in range(repeat + 1):  # the first run warms the page cache, and is reported apart
        log.info("sql command: run %d of %d", i + 1, repeat + 1)
        seconds, _ = timed([sys.executable, "-c", "pass"])
        interpreter_s.append(seconds)
        seconds, out = timed(command)
        sql_s.append(seconds)
        answer = [json.loads(line) for line in out.splitlines() if line.startswith("{")]  # one object per row
        if not answer:
            raise AssertionError(f"the query found no rows for {day}: {query}")
        rows = len(answer)
    median_s = median(sql_s[1:])
    return {
        "what": "wall time of `python -m spark_jobs sql --engine duckdb --format json` (delta-rs + DuckDB, process "
                "start included), a group-by over one day of cloudtrail_events; beside it a bare `python -c pass`",
        "query": query,
        "result_rows": rows,
        "command": {"seconds": sql_s[1:], "median_s": median_s, "first_s": sql_s[0]},
        "bare_interpreter": {"seconds": interpreter_s, "median_s": median(interpreter_s)},
        "seconds": median_s,
        "goal": "<= 1.5 s",
        "met": median_s <= 1.5,
    }


def spark_submit_command(connection: SparkConnection) -> list[str]:
    """The command the catch-up DAG's SparkSubmitOperator runs on ``connection`` (see dags/catchup.py)."""
    return Submission.of(["run", JOB.name, "--trigger", "available-now"], name=JOB.name).argv(connection)


def spark_default() -> SparkConnection:
    """The DAGs' Spark connection as this process's environment has it (``local[2]`` without one)."""
    return SparkConnection.from_airflow_env(default=SparkConnection("local[2]"))


def _last_run_state(home: Path) -> str | None:
    with sqlite3.connect(home / "airflow.db") as db:
        row = db.execute("SELECT state FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (DAG_ID,)).fetchone()
    return row[0] if row else None


_SHIM = """#!/bin/sh
# Benchmark shim: note when the real spark-submit starts and ends, for the Airflow run's breakdown.
date +%s.%N >> "{marks}"
"{real}" "$@"
status=$?
date +%s.%N >> "{marks}"
exit $status
"""


def timing_shim(folder: Path) -> tuple[Path, Path]:
    """A ``spark-submit`` in ``folder`` that runs the real one and appends its start and end times to a file.

    :returns: the folder (to put first on ``PATH``) and the file of times (epoch seconds, one a line).
    """
    folder.mkdir(parents=True, exist_ok=True)
    marks = folder / "marks"
    script = folder / "spark-submit"
    script.write_text(_SHIM.format(marks=marks, real=shutil.which("spark-submit")))
    script.chmod(0o755)
    return folder, marks


def airflow_part_skipped() -> dict | None:
    """A benchmark part that runs Airflow: why it is skipped outside the project's environment (``None``: it can
    run; the project's plugins are then importable)."""
    missing = [tool for tool in ("airflow", "spark-submit") if shutil.which(tool) is None]
    if missing or not os.environ.get("AIRFLOW__CORE__DAGS_FOLDER"):
        return {"status": "skipped", "why": f"needs the project environment (eval \"$(make -s env)\"): "
                f"{', '.join(missing) or 'AIRFLOW__CORE__DAGS_FOLDER'} missing"}
    plugins = str(PROJECT_ROOT / "plugins")
    if plugins not in sys.path:
        sys.path.insert(0, plugins)
    return None


def measure_orchestration(landing: Path, lake: Path, airflow_home: Path, workdir: Path, repeat: int) -> dict:
    """``airflow dags test cloudtrail_etl_catchup`` vs the same spark-submit run directly, same environment.

    Airflow's metadata DB is a SQLite file in ``airflow_home`` (migrated on first use, kept for later
    benchmark runs), so the project's own ``.airflow`` is neither used nor changed. ``workdir`` holds
    the timing shim (see :func:`timing_shim`).
    """
    skipped = airflow_part_skipped()
    if skipped:
        return skipped
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
           "LAKE_ROOT": str(lake), JOB.input_env_var: str(landing)}
    setup_s = 0.0
    if not (airflow_home / "airflow.db").is_file():
        airflow_home.mkdir(parents=True, exist_ok=True)
        log.info("orchestration: migrating a metadata DB for the benchmark in %s", airflow_home)
        setup_s, _ = timed(["airflow", "db", "migrate"], env)
    submit = spark_submit_command(spark_default())
    shim, marks = timing_shim(workdir / "spark-submit-shim")
    airflow_env = {**env, "PATH": f"{shim}{os.pathsep}{env['PATH']}"}
    airflow_s, submit_s, split = [], [], {"before_spark_submit_s": [], "spark_submit_s": [], "after_spark_submit_s": []}
    for i in range(repeat):
        log.info("orchestration: repetition %d of %d (spark-submit, then airflow dags test)", i + 1, repeat)
        seconds, out = timed(submit, env)
        _check_noop(out, "spark-submit")
        submit_s.append(seconds)
        marks.unlink(missing_ok=True)
        started = time.time()
        seconds, _ = timed(["airflow", "dags", "test", DAG_ID], airflow_env)
        state = _last_run_state(airflow_home)
        if state != "success":
            raise RuntimeError(f"airflow dags test {DAG_ID} ended with the run in state {state!r}")
        airflow_s.append(seconds)
        begin, end = (float(line) for line in marks.read_text().split())
        for key, value in zip(split, (begin - started, end - begin, started + seconds - end)):
            split[key].append(round(value, 3))
    difference = round(median(airflow_s) - median(submit_s), 2)
    return {
        "what": f"`airflow dags test {DAG_ID}` (parses the DAGs, runs the SparkSubmitOperator task in-process; "
                "no scheduler or executor queueing) vs the same spark-submit run directly; nothing new to ingest",
        "spark_submit_command": " ".join(submit),
        "airflow_dags_test": {"seconds": airflow_s, "median_s": median(airflow_s),
                              **{key: {"seconds": values, "median_s": median(values)} for key, values in split.items()},
                              "note": "split by a timing shim named spark-submit put first on PATH for this run: "
                                      "before = CLI start, DAG parse, run creation, task start; after = task end, "
                                      "run bookkeeping, exit"},
        "spark_submit": {"seconds": submit_s, "median_s": median(submit_s)},
        "difference_s": difference,
        "airflow_db_setup_s": setup_s,
        "goal": None,
        "note": "the cold CLI, reported beside orchestration_live (a running scheduler), which has the goal",
    }


_JVM_START = """import json, time
started = time.monotonic()
from spark_jobs.driver.session import build_session
spark = build_session({name!r})
built = time.monotonic()
spark.read.json(spark.sparkContext.parallelize(['{{"a": 1, "b": "x"}}'] * 1000)).groupBy("b").count().collect()
done = time.monotonic()
arguments = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
mapped = any(str(a).startswith("-XX:SharedArchiveFile=") for a in arguments)
spark.stop()
print(json.dumps({{"session_s": round(built - started, 3), "first_job_s": round(done - built, 3), "mapped": mapped}}))
"""


def measure_jvm_start(repeat: int) -> dict:
    """Starting a SparkSession and running its first job, with and without the driver's class archive
    (:mod:`spark_jobs.launch.class_archive`), alternating so that both see the same machine load."""
    from spark_jobs.launch.class_archive import ARCHIVE_ENV, OFF, archive_path, check

    problem = check()
    if problem:
        return {"status": "skipped", "why": problem}
    command = [sys.executable, "-c", _JVM_START.format(name=JOB.name)]
    runs: dict[str, dict[str, list[float]]] = {
        mode: {"process_s": [], "session_s": [], "first_job_s": []} for mode in ("archive", "no_archive")}
    for i in range(repeat):
        for mode in ("no_archive", "archive"):
            log.info("jvm start: repetition %d of %d, %s", i + 1, repeat, mode.replace("_", " "))
            env = {**os.environ, ARCHIVE_ENV: OFF if mode == "no_archive" else str(archive_path())}
            seconds, out = timed(command, env)
            summary = _summary(out)
            if summary.pop("mapped", None) != (mode == "archive"):
                raise AssertionError(f"the {mode.replace('_', ' ')} run's driver JVM was started "
                                     f"{'without' if mode == 'archive' else 'with'} -XX:SharedArchiveFile")
            runs[mode]["process_s"].append(seconds)
            for key, value in summary.items():
                runs[mode][key].append(value)
    medians = {mode: {key: median(values) for key, values in figures.items()} for mode, figures in runs.items()}
    return {
        "what": "a fresh `python -c` that builds the project's SparkSession (spark_jobs.driver.session) and runs a first "
                "small job (JSON parse, group-by), with the driver's class archive and without it "
                f"({ARCHIVE_ENV}=off), alternating",
        "archive": str(archive_path()),
        "archive_mb": round(archive_path().stat().st_size / 1e6),
        **{mode: {key: {"seconds": runs[mode][key], "median_s": medians[mode][key]} for key in runs[mode]}
           for mode in runs},
        "ratio_process": round(medians["archive"]["process_s"] / medians["no_archive"]["process_s"], 2),
        "goal": None,
    }
