"""cowrie_ocsf killed with SIGKILL in the middle of a micro-batch, between two of its tables' commits, then restarted:
its tables are exactly those of an uninterrupted run (no OCSF row lost, none twice, the quarantine the same)."""

from __future__ import annotations

import shutil
import time

import pytest

from spark_jobs.model.lake import Lake
from tests.helpers import ocsf
from tests.helpers.cowrie import run as run_cowrie
from tests.helpers.kills import JobDriver, run_command
from tests.helpers.processes import batch_ids
from tests.helpers.project import REAL_DATA

pytestmark = pytest.mark.real_data
REAL_COWRIE = REAL_DATA / "applogs" / "kareiva_cowrie-logs"
JOB = "cowrie_ocsf"
TABLES = ("ocsf_authentication", "ocsf_network_activity", "ocsf_ssh_activity", "ocsf_process_activity",
          "cowrie_ocsf_quarantine")


def _rows(spark, lake) -> dict:
    drop = ("quarantined_at", "ingest_date")
    return {t: sorted(repr(r) for r in ocsf.read(spark, lake, t).drop(*drop).collect()) for t in TABLES}


def _commits(table) -> int:
    return len(list((table / "_delta_log").glob("*.json")))


def test_kill_9_between_two_tables_commits_then_restart_gives_the_uninterrupted_runs_tables(tmp_path, spark):
    if not REAL_COWRIE.is_dir():
        pytest.skip(f"the real Cowrie log is not at {REAL_COWRIE} (it sits beside the project in ../shared)")
    landing, lake, reference = tmp_path / "landing", tmp_path / "lake", tmp_path / "reference"
    shutil.copytree(REAL_COWRIE, landing)
    ocsf.plant("cowrie", landing)
    assert run_cowrie(landing, lake, maxFilesPerTrigger="1").rows["cowrie_events"] == 4148 + 4  # 3 commits
    shutil.copytree(Lake(lake).table_path("cowrie_events"), Lake(reference).table_path("cowrie_events"))
    assert sum(ocsf.run(JOB, reference).rows.values()) == 4148 + 4  # uninterrupted, in one batch

    checkpoint, first = lake / "checkpoints" / JOB, Lake(lake).table_path(TABLES[0])
    command = run_command(JOB, "--lake", str(lake), "--max-files-per-trigger", "1")
    with JobDriver(command, tmp_path / "kill.log") as driver:
        deadline = time.monotonic() + 600
        while not (checkpoint / "offsets").is_dir() and time.monotonic() < deadline:
            time.sleep(0.05)
        before = _commits(first)  # the table's creation (every table exists before the query starts)
        while time.monotonic() < deadline:
            assert driver.poll() is None, f"the job ended before it could be killed; its log ends:\n{driver.tail()}"
            in_flight = batch_ids(checkpoint / "offsets") - batch_ids(checkpoint / "commits")
            if in_flight and _commits(first) > before:  # the batch wrote its first table, not its last, nor its commit
                driver.kill9()
                killed = max(in_flight)
                break
            time.sleep(0.01)
        else:
            raise AssertionError(f"no batch was caught between its tables' commits; the log ends:\n{driver.tail()}")
    assert killed not in batch_ids(checkpoint / "commits")
    assert ocsf.read(spark, lake, TABLES[0]).count() > 0  # the killed batch's first table holds its rows
    assert _commits(Lake(lake).table_path(TABLES[-1])) == before  # its quarantine not yet

    final = ocsf.run(JOB, lake, maxFilesPerTrigger="1")  # the restart, in this process's SparkSession
    assert final.batches >= 2
    assert batch_ids(checkpoint / "offsets") == batch_ids(checkpoint / "commits")
    got, expected = _rows(spark, lake), _rows(spark, reference)
    assert {t: len(rows) for t, rows in got.items()} == {
        "ocsf_authentication": 629 + 1, "ocsf_network_activity": 494, "ocsf_ssh_activity": 2755,
        "ocsf_process_activity": 102, "cowrie_ocsf_quarantine": 171}
    assert got == expected
