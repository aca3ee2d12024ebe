"""Three writers of one lake at the same time: the live job and two overlapping backfills, each its own driver.

The live job reads copies of 90 real sample files (the same events under new names); one backfill
loads the 55 files of one real dataset, the other selects, from all 1,239 real samples, the same 55
files by their delivery date, 2023-07-10 (the DAG test backfills all 1,239). They run at once, in
small micro-batches so their commits interleave; the tables must end with each event once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from tests.helpers.project import PROJECT_ROOT, run_cli
from tests.helpers.cloudtrail import source_records

LIVE_FOLDERS = ("invictus-ir_aws_dataset/CloudTrail", "datadog_stratus-red-team/docs/detonation-logs")


def test_live_job_and_two_overlapping_backfills_at_once_hold_each_event_once(real_cloudtrail, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    for folder in LIVE_FOLDERS:
        shutil.copytree(real_cloudtrail / folder, landing / folder.replace("/", "_"))
    live_files = sorted(landing.rglob("*.json"))
    assert len(live_files) == 90
    expected = len({record["eventID"] for path in live_files for record in source_records(path)})
    # The three at one priority, so their commits interleave (a backfill runs at SCHED_IDLE by default).
    env = {**os.environ, "CLOUDTRAIL_ETL_INPUT_ROOTS": str(real_cloudtrail.parent),
           "CLOUDTRAIL_ETL_BACKFILL_PRIORITY": "normal"}
    commands = {
        "live": ["run", "cloudtrail_etl", "--input", str(landing), "--trigger", "available-now",
                 "--max-files-per-trigger", "30"],
        "dataset": ["backfill", "cloudtrail_etl", "--source", str(real_cloudtrail / LIVE_FOLDERS[0]),
                    "--max-files-per-trigger", "20"],
        "day": ["backfill", "cloudtrail_etl", "--source", str(real_cloudtrail), "--date-from", "2023-07-10",
                "--date-to", "2023-07-10", "--max-files-per-trigger", "20"],
    }
    drivers = {name: subprocess.Popen([sys.executable, "-m", "spark_jobs", *args, "--lake", str(lake)],
                                      cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
               for name, args in commands.items()}
    summaries = {}
    for name, driver in drivers.items():
        out, err = driver.communicate(timeout=900)
        assert driver.returncode == 0, f"{name} failed (exit {driver.returncode}):\n{err[-3000:]}"
        summaries[name] = json.loads(out.strip().splitlines()[-1])
    assert summaries["live"]["input_files"] == 90
    assert summaries["dataset"]["input_files"] == summaries["day"]["input_files"] == 55
    assert min(s["batches"] for s in summaries.values()) >= 3
    # Every event was inserted by exactly one of the three writers.
    inserted = sum(s["rows"]["cloudtrail_events"] for s in summaries.values())
    assert inserted == expected
    done = run_cli("sql", "--lake", str(lake), "--engine", "duckdb", "--format", "json",
                   "SELECT (SELECT count(*) FROM cloudtrail_events) AS events, "
                   "(SELECT count(DISTINCT eventID) FROM cloudtrail_events) AS ids, "
                   "(SELECT count(*) FROM cloudtrail_quarantine) AS quarantined")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[0]) == {"events": expected, "ids": expected, "quarantined": 0}
