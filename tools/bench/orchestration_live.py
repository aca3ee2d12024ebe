"""Orchestration through a running scheduler: a REST-triggered catch-up run against the same spark-submit.

The benchmark's ``orchestration`` part times ``airflow dags test``, a cold CLI that parses the DAGs and
runs the tasks in its own process. A person or another system triggers the DAG of a running Airflow
instead, so this part starts one (api-server, scheduler, dag-processor and triggerer on loopback:
:class:`tools.local_airflow.LocalAirflow`, the code behind ``make airflow``, with its own home,
port and SQLite database in the benchmark's folder), unpauses ``cloudtrail_etl_catchup``, lets the
run that unpausing schedules end, and then, ``repeat`` times:

1. runs the catch-up's spark-submit directly (the same command the DAG's task runs, same environment);
2. triggers a run through the REST API (``POST /api/v2/dags/<dag>/dagRuns``) and polls it until it
   ends, with a timing shim named ``spark-submit`` first on the components' ``PATH``
   (:func:`tools.bench.launches.timing_shim`) noting when the real one starts and ends.

The lake is caught up with the landing folder, so both find nothing new: the work is identical and
what differs is the orchestration. The run is split into trigger -> spark-submit start (the
scheduler picking the run up, the ``plan`` task, the ``spark_submit`` task starting), the
spark-submit itself, and its end -> the run marked ``success`` (the run's own ``end_date`` from the
API, so polling adds nothing), with each task's start and end from the API beside it.

Nothing here is Airflow's own API beyond the REST calls: Airflow has no "time from trigger to task
start" metric for one run, so the times are taken from the run and task records and the shim.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from tools.bench.launches import (DAG_ID, _check_noop, airflow_part_skipped, spark_default, spark_submit_command, timed,
                                  timing_shim)
from tools.bench.probes import median
from tools.bench.recovery_airflow import airflow_env, wait_for_api

log = logging.getLogger("tools.bench")
PARSE_TIMEOUT_S = 300.0
RUN_TIMEOUT_S = 600.0
POLL_S = 0.2


@contextmanager
def airflow_with_timing_shim(home: Path, lake: Path, landing: Path, shim_folder: Path):
    """A running Airflow of the benchmark's own (home, SQLite database, lake and landing; a timing shim named
    ``spark-submit`` first on its components' ``PATH``) with ``cloudtrail_etl_catchup`` parsed and unpaused; stopped
    on leaving. Yields its API client, the shim's file of times and the seconds until the DAG was parsed."""
    from streaming.hooks.airflow_api import AirflowApi
    from tools.local_airflow import LocalAirflow, free_port

    env = airflow_env(home, lake, landing, trigger=None, policy=None)
    shim, marks = timing_shim(shim_folder)
    airflow = LocalAirflow(home, free_port(), {**env, "PATH": f"{shim}{os.pathsep}{env['PATH']}"}, auth="simple")
    started = time.monotonic()
    airflow.start()
    try:
        api = AirflowApi(airflow.url)
        wait_for_api(f"the dag-processor to parse {DAG_ID}", lambda: api.dag(DAG_ID), PARSE_TIMEOUT_S)
        parsed_s = round(time.monotonic() - started, 1)
        api.set_paused(DAG_ID, False)
        yield api, marks, parsed_s
    finally:
        airflow.stop(grace=30)


def _epoch(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso).timestamp() if iso else None


def _one_triggered_run(api, marks: Path) -> dict:
    """Trigger a run, wait for its end, and split its time (seconds, epoch-based on this machine)."""
    marks.unlink(missing_ok=True)
    triggered = time.time()
    run_id = api.trigger(DAG_ID)
    def ended() -> dict | None:
        current = api.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")
        return current if current["state"] in ("success", "failed") else None

    run = wait_for_api(f"run {run_id} to end", ended, RUN_TIMEOUT_S, POLL_S)
    seen = time.time()
    if run["state"] != "success":
        raise RuntimeError(f"the triggered run {run_id} of {DAG_ID} ended {run['state']!r}; see the task logs "
                           "under the benchmark's airflow home")
    begin, end = (float(line) for line in marks.read_text().split())
    tis = {ti["task_id"]: ti for ti in api.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]}
    run_end = _epoch(run["end_date"])
    tasks = {task_id: {"start_after_trigger_s": round(_epoch(ti["start_date"]) - triggered, 3),
                       "took_s": round(_epoch(ti["end_date"]) - _epoch(ti["start_date"]), 3)}
             for task_id, ti in tis.items() if ti.get("start_date") and ti.get("end_date")}
    return {"run_id": run_id, "trigger_to_success_s": round(run_end - triggered, 3),
            "trigger_to_spark_submit_s": round(begin - triggered, 3), "spark_submit_s": round(end - begin, 3),
            "spark_submit_end_to_success_s": round(run_end - end, 3),
            "observed_by_polling_s": round(seen - triggered, 3), "tasks": tasks}


def measure_orchestration_live(landing: Path, lake: Path, workdir: Path, repeat: int) -> dict:
    """A REST-triggered ``cloudtrail_etl_catchup`` run of a running Airflow vs the same spark-submit directly.

    :param landing: the input folder (caught up by ``lake``).
    :param lake: the lake root.
    :param workdir: this part's folder: Airflow's home is ``<workdir>/airflow``, the shim ``<workdir>/shim``.
    :param repeat: triggered runs (each beside one direct spark-submit).
    """
    skipped = airflow_part_skipped()
    if skipped:
        return skipped
    from tools.local_airflow import marked_processes

    home = workdir / "airflow"
    shutil.rmtree(home, ignore_errors=True)
    env = airflow_env(home, lake, landing, trigger=None, policy=None)  # the direct spark-submit's: the tasks' own
    submit = spark_submit_command(spark_default())
    with airflow_with_timing_shim(home, lake, landing, workdir / "shim") as (api, marks, start_s):
        # Unpausing schedules the latest interval's run (catchup=False); let it end so it queues nothing.
        time.sleep(3)
        wait_for_api("the scheduled run to end",
                     lambda: all(r["state"] in ("success", "failed") for r in api.runs(DAG_ID)), RUN_TIMEOUT_S)
        direct, runs = [], []
        for i in range(repeat):
            log.info("orchestration_live: repetition %d of %d (spark-submit, then a triggered run)", i + 1, repeat)
            seconds, out = timed(submit, env)
            _check_noop(out, "spark-submit")
            direct.append(seconds)
            runs.append(_one_triggered_run(api, marks))
        scheduled = [r["dag_run_id"] for r in api.runs(DAG_ID) if r["run_type"] == "scheduled"]
    left = sorted(marked_processes(str(home)))
    total = [r["trigger_to_success_s"] for r in runs]
    difference = round(median(total) - median(direct), 2)
    keys = ("trigger_to_spark_submit_s", "spark_submit_s", "spark_submit_end_to_success_s", "observed_by_polling_s")
    return {
        "what": f"a run of {DAG_ID} triggered through the REST API of a running Airflow (scheduler, api-server, "
                "dag-processor, triggerer on loopback; LocalExecutor, SQLite) from the trigger to the run's "
                "end_date, vs the same spark-submit run directly; nothing new to ingest",
        "spark_submit_command": " ".join(submit),
        "triggered_run": {"seconds": total, "median_s": median(total),
                          **{key: {"seconds": [r[key] for r in runs], "median_s": median([r[key] for r in runs])}
                             for key in keys},
                          "tasks": [r["tasks"] for r in runs],
                          "note": "trigger -> spark-submit start covers the scheduler picking up the run, the "
                                  "plan task and the spark_submit task's start; spark-submit start and end come "
                                  "from a timing shim first on the components' PATH"},
        "spark_submit": {"seconds": direct, "median_s": median(direct)},
        "difference_s": difference,
        "airflow_start_s": start_s,
        "scheduled_runs": scheduled,
        "scheduled_runs_note": "runs the scheduler made itself (the one unpausing schedules, ended before the "
                               "first trigger; one more means an hourly boundary passed during the part)",
        "processes_left": left,
        "goal": "<= 5 s more",
        "met": difference <= 5,
    }
