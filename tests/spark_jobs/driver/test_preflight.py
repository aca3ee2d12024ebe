"""A new version's pre-flight against a live checkpoint and its tables, with real Spark and real code changes.

A lake is caught up by the current code (one in-process catch-up run); a stand-in for the running driver then holds
the checkpoint's lease (pid and generation recorded). Each new version is a release of this package with a real
change, started as the supervisor starts it for a rollout: ``python -m spark_jobs run ... --standby --preflight``
with the release first on ``PYTHONPATH``. After each, the lease is still the running driver's and not one file of
the checkpoint or the tables changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_jobs.control.checkpoint.lease import Lease, read_lease
from spark_jobs.control.rollout.preflight_state import PREFLIGHT_REFUSED_EXIT_STATUS, read_preflight
from spark_jobs.control.supervision.standby_state import read_standby
from spark_jobs.launch.releases import driver_env
from spark_jobs.model.lake import Lake
from tests.helpers.cloudtrail import JOB
from tests.helpers.processes import wait_for
from tools.releases import COLUMN_TYPE_CHANGE, PARSER_FIX, release_with
from tools.sample_data import write_sample_landing

START_SECONDS = 300  # a JVM's start and warm-up on a busy 2-core machine
WORD_COUNT = "word_count"


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path -> sha256 of its bytes)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def live(tmp_path_factory, run_job):
    """A lake caught up by this code, and a running driver's stand-in holding its lease for the module."""
    root = tmp_path_factory.mktemp("preflight")
    write_sample_landing(root / "landing", files=6, records_per_file=10)
    run_job(root / "landing", root / "lake")
    control = str(Lake(root / "lake").control_path(JOB.name))
    lease = Lease.acquire(control, JOB.name, ttl_seconds=3600, details={"stand_in": "the running driver"})
    yield {"root": root, "control": control, "lease": lease}
    lease.release()


def preflight(live: dict, release, job: str = JOB.name, landing: Path | None = None) -> subprocess.Popen:
    """The release's pre-flight standby, started as the supervisor starts it (its output in ``<name>.log``)."""
    root = live["root"]
    command = [sys.executable, "-m", "spark_jobs", "run", job, "--trigger", "processing-time:10s", "--standby",
               "--preflight", "--lake", str(root / "lake"), "--input", str(landing or root / "landing")]
    with (root / f"{release.name}.log").open("ab") as out:
        return subprocess.Popen(command, cwd=root, env=driver_env(release), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def untouched(live: dict, before: dict) -> None:
    lease = read_lease(live["control"])
    assert (lease.generation, lease.pid, lease.released) == (live["lease"].info.generation, os.getpid(), False)
    assert {lease.pid for lease in map(read_lease, live["root"].glob("lake/control/*")) if lease} == {os.getpid()}
    assert fingerprint(live["root"] / "lake" / "checkpoints") == before["checkpoints"]
    assert fingerprint(live["root"] / "lake" / "tables") == before["tables"]


def snapshot(live: dict) -> dict:
    lake = live["root"] / "lake"
    return {"checkpoints": fingerprint(lake / "checkpoints"), "tables": fingerprint(lake / "tables")}


def test_a_column_type_change_is_refused_with_the_reason_and_nothing_stops(live, tmp_path):
    before = snapshot(live)
    v3 = release_with(tmp_path, "v3", COLUMN_TYPE_CHANGE)

    driver = preflight(live, v3)
    code = driver.wait(START_SECONDS)
    said = (live["root"] / "v3.log").read_text()

    assert code == PREFLIGHT_REFUSED_EXIT_STATUS, said[-3000:]
    error = [line for line in said.splitlines() if line.startswith("error: ")]
    assert error == [
        "error: version v3 of job cloudtrail_etl is refused in pre-flight; the running driver was not stopped: "
        "table cloudtrail_events does not take what this version writes: column readOnly changes type from boolean "
        "to string; its batches would fail at their first write (or write columns readers do not know) Way out: "
        "keep the running version (nothing was stopped); or revert the change in a new version; or deploy it as a "
        "destructive rollout: a new checkpoint and a reprocess (the four-eyes on-call action)"]
    verdict = read_preflight(live["control"])
    assert (verdict["version"], verdict["code"], verdict["passed"]) == ("v3", v3.code, False)
    assert [f["code"] for f in verdict["findings"]] == ["output_schema_changed"]
    assert verdict["checks"] == ["sources", "output schema", "stored options"]
    untouched(live, before)


def test_a_compatible_version_passes_warms_up_and_waits_for_the_lease(live, tmp_path):
    before = snapshot(live)
    v2 = release_with(tmp_path, "v2", PARSER_FIX)

    driver = preflight(live, v2)
    try:
        standby = wait_for(lambda: (read_standby(live["control"]) or {}).get("pid") == driver.pid
                           and read_standby(live["control"]), START_SECONDS, "the v2 standby to be warm",
                           context=lambda: (live["root"] / "v2.log").read_text()[-3000:])
        verdict = read_preflight(live["control"])
        assert (standby["version"], verdict["version"], verdict["code"], verdict["passed"]) == (
            "v2", "v2", v2.code, True)
        assert verdict["findings"] == [] and verdict["checks"] == ["sources", "output schema", "stored options"]
        time.sleep(1)  # it polls the lease meanwhile: the running driver's, it does not take it
        untouched(live, before)
    finally:
        driver.send_signal(signal.SIGTERM)
        code = driver.wait(60)
    assert code == 128 + signal.SIGTERM and read_standby(live["control"]) is None  # a standby holds nothing: at once
    untouched(live, before)


@pytest.fixture(scope="module")
def words(live, spark):
    """word_count (a stateful aggregation, RocksDB state) caught up on two text files by this code."""
    from spark_jobs.driver.runner import run_streaming
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.model.triggers import parse_trigger
    from spark_jobs.registry import get_job

    landing = live["root"] / "words"
    landing.mkdir()
    (landing / "a.txt").write_text("the quick brown fox\njumps over the lazy dog\n")
    (landing / "b.txt").write_text("the dog barks\n")
    job = get_job(WORD_COUNT)
    run_streaming(job, RunOptions(landing, Lake(live["root"] / "lake"), parse_trigger("available-now"),
                                  dict(job.file_source_options)), spark=spark)
    control = str(Lake(live["root"] / "lake").control_path(WORD_COUNT))
    lease = Lease.acquire(control, WORD_COUNT, ttl_seconds=3600, details={"stand_in": "the running driver"})
    yield landing
    lease.release()


def test_a_changed_state_schema_is_refused_with_the_doctors_explanation(live, words, tmp_path):
    before = snapshot(live)
    v3 = release_with(tmp_path, "w3", {"jobs/word_count.py": [
        # a second aggregate beside the count (the table keeps word and count): the state's value changes
        ('.groupBy("word").count()', '.groupBy("word").agg(F.count("*").alias("count"), F.avg(F.length("word")))')]})

    driver = preflight(live, v3, WORD_COUNT, words)
    try:
        code = driver.wait(START_SECONDS)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    said = (live["root"] / "w3.log").read_text()

    assert code == PREFLIGHT_REFUSED_EXIT_STATUS, said[-3000:]
    verdict = read_preflight(str(Lake(live["root"] / "lake").control_path(WORD_COUNT)))
    assert (verdict["version"], verdict["passed"]) == ("w3", False)
    assert verdict["checks"] == ["sources", "output schema", "stored options", "state"]
    [finding] = verdict["findings"]
    assert finding["code"] == "state_incompatible"
    assert finding["explanation"].startswith(
        "replaying batch 0 on a copy of the checkpoint failed: The columns a stateful operator keeps in its state (its "
        "key or its value) changed since the checkpoint was written, so the stored state cannot be read by the new "
        "query. Two ways out: ")
    assert "terminated with exception: [STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE]" in finding["explanation"]
    assert [line for line in said.splitlines() if line.startswith("error: ")][0].startswith(
        "error: version w3 of job word_count is refused in pre-flight; the running driver was not stopped: "
        "replaying batch 0 on a copy of the checkpoint failed:")
    untouched(live, before)


def test_output_changes_name_each_new_retyped_and_dropped_column():
    from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

    from spark_jobs.driver.preflight import output_changes

    table = StructType([StructField("id", StringType()), StructField("readOnly", BooleanType()),
                        StructField("gone", LongType())])
    written = StructType([StructField("ID", StringType(), False), StructField("readOnly", StringType()),
                          StructField("added", LongType())])

    assert output_changes("t", table, table) == []
    assert output_changes("t", written, table) == ["column readOnly changes type from boolean to string",
                                                   "new column added bigint", "column gone is no longer written"]


def test_conf_changes_name_only_declared_settings_the_checkpoint_keeps_otherwise():
    from spark_jobs.driver.preflight import conf_changes

    stored = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.stateStore.providerClass": "a.RocksDB"}

    assert conf_changes({"spark.sql.shuffle.partitions": "2", "spark.other": "x"}, stored) == []
    assert conf_changes({"spark.sql.shuffle.partitions": "8"}, stored) == [
        "spark.sql.shuffle.partitions = 8 (the checkpoint keeps 2)"]
