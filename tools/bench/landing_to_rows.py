"""``bench --only landing_to_rows``: a file landing in a watched folder to its rows in the table, through Airflow.

A running Airflow (api-server, scheduler, dag-processor and triggerer on loopback:
:class:`tools.local_airflow.LocalAirflow`, the code behind ``make airflow``, with its own home and SQLite database
in this part's folder) with ``cloudtrail_etl_catchup`` unpaused: its catch-up runs on data (the registry's
``CatchupTrigger(on="data")``: an Asset watcher lists the landing every ``poll_seconds``). A small lake is made first
(the sample landing's files, taken by the run unpausing schedules). Then, ``repeat`` times, one new delivery of 50
events lands (written atomically, as CloudTrail's own writer does), and this process polls the table with delta-rs
(what any reader sees) until its 50 eventIDs are all there, once each. Per landing, the time is split by the run's
own records: landing -> the DAG run queued (the watcher's poll and the Asset event), -> the spark-submit's start (the
scheduler, the ``plan`` task, the ``spark_submit`` task's start; from a timing shim first on the components'
``PATH``), the spark-submit itself, and its end -> the rows seen by the reader.

The goal (issue "A stream that never looks away"): the median over the landings <= 20 s.
"""

from __future__ import annotations

import logging
import shutil
import time
from datetime import datetime
from pathlib import Path

from tools.bench.launches import DAG_ID, airflow_part_skipped
from tools.bench.orchestration_live import airflow_with_timing_shim
from tools.bench.probes import median
from tools.bench.recovery_airflow import wait_for_api

log = logging.getLogger("tools.bench")


EVENTS_TABLE = "cloudtrail_events"
GOAL_S = 20.0
PARSE_TIMEOUT_S = 300.0
ROWS_TIMEOUT_S = 300.0
POLL_S = 0.2
RECORDS_PER_FILE = 50


def _epoch(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso).timestamp() if iso else None


def _events_seen(table: Path, wanted: set[str]) -> int | None:
    """How many of ``wanted`` the table holds (a count of rows, duplicates included); None while it has none."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    import pyarrow.compute as pc

    try:
        rows = DeltaTable(str(table)).to_pyarrow_dataset().to_table(
            columns=["eventID"], filter=pc.field("eventID").isin(list(wanted)))
    except (TableNotFoundError, FileNotFoundError, OSError):
        return None
    return rows.num_rows


def _land(landing: Path, seed: int) -> set[str]:
    """One new delivery of 50 events (written atomically), newer than every earlier one, as CloudTrail's are; its
    eventIDs."""
    from tools.sample_data import DEFAULT_START, SPAN, write_sample_landing

    manifest = write_sample_landing(landing, files=1, records_per_file=RECORDS_PER_FILE, seed=seed,
                                    start=DEFAULT_START + SPAN * (seed - 99), include_bad_files=False)
    return set(manifest.good_event_ids)


def _watcher_triggers(api) -> list[int]:
    """The triggers watching the landing's Asset (``cloudtrail_etl_landing``); empty until the triggerer has one."""
    assets = api.api("GET", "/assets?name_pattern=cloudtrail_etl_landing")["assets"]
    return [watcher["trigger_id"] for asset in assets for watcher in asset.get("watchers") or []]


def _one_landing(api, landing: Path, table: Path, marks: Path, seed: int) -> dict:
    marks.unlink(missing_ok=True)
    before = {r["dag_run_id"] for r in api.runs(DAG_ID)}
    landed = time.time()
    wanted = _land(landing, seed)
    deadline = time.monotonic() + ROWS_TIMEOUT_S
    while (seen := _events_seen(table, wanted)) != len(wanted):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the {len(wanted)} events of the landing of seed {seed} were not all in {table} "
                               f"within {ROWS_TIMEOUT_S:g} s (seen: {seen}); see the task logs under the part's "
                               "airflow home")
        time.sleep(POLL_S)
    visible = time.time()
    run = wait_for_api("the run that loaded the file",
                       lambda: [r for r in api.runs(DAG_ID) if r["dag_run_id"] not in before
                                and r["state"] in ("success", "failed")], 120, 0.5)[0]
    marked = [float(line) for line in marks.read_text().split()] if marks.exists() else []
    begin, end = (marked[0], marked[1]) if len(marked) >= 2 else (None, None)
    queued = _epoch(run.get("queued_at"))
    split = {
        "landing_to_run_queued_s": round(queued - landed, 3) if queued else None,
        "run_queued_to_spark_submit_s": round(begin - queued, 3) if begin and queued else None,
        "spark_submit_s": round(end - begin, 3) if begin else None,
        "spark_submit_end_to_rows_seen_s": round(visible - end, 3) if end else None,
    }
    return {"seconds": round(visible - landed, 3), "run_id": run["dag_run_id"], "run_type": run["run_type"],
            "run_state": run["state"], "rows": seen, **split}


def measure_landing_to_rows(workdir: Path, repeat: int = 5) -> dict:
    """Files landing to rows in ``cloudtrail_events`` through the catch-up-on-data DAG of a running Airflow.

    :param workdir: this part's folder (its landing, lake, Airflow home and timing shim; made afresh).
    :param repeat: landings, one at a time (each waits for the last one's rows and run).
    """
    skipped = airflow_part_skipped()
    if skipped:
        return skipped
    from tools.local_airflow import marked_processes
    from tools.sample_data import write_sample_landing
    from spark_jobs.model.lake import Lake
    from spark_jobs.registry import get_job

    shutil.rmtree(workdir, ignore_errors=True)
    landing, lake, home = workdir / "landing", workdir / "lake", workdir / "airflow"
    first = write_sample_landing(landing, files=12, records_per_file=RECORDS_PER_FILE, seed=1, include_bad_files=False)
    table = Lake(lake).table_path(EVENTS_TABLE)
    poll = get_job("cloudtrail_etl").catchup.poll_seconds
    with airflow_with_timing_shim(home, lake, landing, workdir / "shim") as (api, marks, start_s):
        wanted = set(first.good_event_ids)
        wait_for_api("the first run to load the sample landing", lambda: _events_seen(table, wanted) == len(wanted),
                     ROWS_TIMEOUT_S, 0.5)
        wait_for_api("the first runs to end",
                     lambda: all(r["state"] in ("success", "failed") for r in api.runs(DAG_ID)), ROWS_TIMEOUT_S, 0.5)
        # The watcher's first listing is its baseline (files there fire nothing): land only after it made one.
        wait_for_api("the landing's watcher to run in the triggerer", lambda: _watcher_triggers(api), PARSE_TIMEOUT_S)
        time.sleep(2 * poll + 1)
        landings = []
        for i in range(repeat):
            log.info("landing_to_rows: landing %d of %d", i + 1, repeat)
            landings.append(_one_landing(api, landing, table, marks, seed=100 + i))
    left = sorted(marked_processes(str(home)))
    seconds = [one["seconds"] for one in landings]
    parts = ("landing_to_run_queued_s", "run_queued_to_spark_submit_s", "spark_submit_s",
             "spark_submit_end_to_rows_seen_s")
    return {
        "what": f"one new {RECORDS_PER_FILE}-event delivery landing in the watched folder of a running Airflow "
                f"({DAG_ID} unpaused, catch-up on data, the watcher's poll {poll:g} s; LocalExecutor, SQLite) to "
                "its rows all in cloudtrail_events as delta-rs reads it, one landing at a time, on a small lake",
        "seconds": seconds,
        "median_s": median(seconds),
        "max_s": max(seconds),
        **{part: {"seconds": [one[part] for one in landings],
                  "median_s": median([one[part] for one in landings if one[part] is not None] or [0.0])}
           for part in parts},
        "landings": landings,
        "exact": all(one["rows"] == RECORDS_PER_FILE for one in landings),
        "airflow_start_s": start_s,
        "processes_left": left,
        "goal": f"median <= {GOAL_S:g} s",
        "met": median(seconds) <= GOAL_S and all(one["rows"] == RECORDS_PER_FILE for one in landings),
    }
