"""Inspection and repair of real checkpoints written by real runs of cloudtrail_etl.

One module fixture runs the job twice on a generated landing folder (new files landed in between)
and keeps the lake as a template; each damage test copies it, damages the copy the way a crash or
a person would, and checks what ``inspect`` names, what ``repair`` does, and that a run after an
allowed repair leaves the tables exact (event ids compared with the manifest).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import fsspec
import pytest

from spark_jobs.control.checkpoint.explain import explain_start_failure
from spark_jobs.control.checkpoint.inspect import inspect_checkpoint
from spark_jobs.control.checkpoint.lease import Lease
from spark_jobs.control.checkpoint.repair import repair_checkpoint
from spark_jobs.model.policies import HealthThresholds
from spark_jobs.registry import get_job
from tools.sample_data import write_sample_landing
from tests.helpers.project import PROJECT_ROOT

JOB = get_job("cloudtrail_etl")


def checkpoint_of(lake: Path) -> Path:
    return lake / "checkpoints" / JOB.name


def codes(report) -> dict[str, str]:
    return {problem.code: problem.severity for problem in report.problems}


def event_ids(spark, lake: Path) -> Counter:
    """Each eventID of cloudtrail_events with its number of rows (Delta via delta-rs, a file sink via Spark)."""
    table = lake / "tables" / "cloudtrail_events"
    if (table / "_delta_log").is_dir():
        from deltalake import DeltaTable

        return Counter(DeltaTable(str(table)).to_pyarrow_table(columns=["eventID"]).column("eventID").to_pylist())
    return Counter(row.eventID for row in spark.read.parquet(str(table)).select("eventID").collect())


def tables_format(lake: Path) -> str:
    return "delta" if (lake / "tables" / "cloudtrail_events" / "_delta_log").is_dir() else "file_sink"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spark_jobs", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def template(tmp_path_factory, run_job):
    """Two real runs of one batch each: the landing, the lake after them, the manifest's ids, inspections."""
    root = tmp_path_factory.mktemp("checkpoint_template")
    land, lake = root / "land", root / "lake"
    first = write_sample_landing(land / "first", files=4, records_per_file=5, seed=11, include_bad_files=False)
    run_job(land, lake)
    after_first = inspect_checkpoint(JOB, str(lake), str(land))
    # three more deliveries and a zero-byte file (Spark's source logs it; it holds no rows), plus files
    # Spark never reads: a hidden one, a temp name and a marker
    second = write_sample_landing(land / "second", files=3, records_per_file=5, seed=12, include_bad_files=False)
    (land / "second" / "empty.json").write_bytes(b"")
    (land / "second" / ".hidden.json.gz").write_bytes(b"x")
    (land / "second" / "partial.json.gz.tmp").write_bytes(b"x")
    (land / "second" / "_SUCCESS").write_bytes(b"")
    before_second = inspect_checkpoint(JOB, str(lake), str(land))
    run_job(land, lake)
    after_second = inspect_checkpoint(JOB, str(lake), str(land))
    ids = Counter(first.good_event_ids + second.good_event_ids)
    return {"land": land, "lake": lake, "ids": ids, "first": first, "second": second,
            "after_first": after_first, "before_second": before_second, "after_second": after_second}


@pytest.fixture
def lake(template, tmp_path) -> Path:
    """A copy of the template lake (its checkpoint still points at the template's landing folder)."""
    copy = tmp_path / "lake"
    shutil.copytree(template["lake"], copy)
    return copy


def inspect(lake: Path, template):
    return inspect_checkpoint(JOB, str(lake), str(template["land"]))


def rerun_and_check_exact(run_job, spark, lake: Path, template) -> None:
    run_job(template["land"], lake)
    assert event_ids(spark, lake) == template["ids"]
    after = inspect(lake, template)
    assert (after.status, after.backlog_files, after.batch_in_flight) == ("idle", 0, None)
    assert [p.code for p in after.problems if p.severity != "info"] == []


# ---- healthy checkpoints -------------------------------------------------------------------------


def test_inspection_of_a_real_run(template, spark):
    report = template["after_second"]
    read = len(template["first"].files_written) + len(template["second"].files_written) + 1  # + the empty file
    assert (report.status, report.latest_offset_batch, report.latest_commit_batch, report.batch_in_flight) == (
        "idle", 1, 1, None)
    assert (report.backlog_files, report.in_flight_files, report.ingested_files) == (0, 0, read)
    assert report.problems == []
    assert report.driver is None  # the run released its lease
    assert report.sources == 1
    assert report.state == {"operators": []}
    assert report.watermark["batch_watermark_ms"] == 0
    assert report.query_id == json.loads((checkpoint_of(template["lake"]) / "metadata").read_text())["id"]
    # a Delta table gets no commit for a batch without rows for it: no input file here is bad
    quarantined = None if tables_format(template["lake"]) == "delta" else 1
    assert {name: t["batch"] for name, t in report.tables.items()} == {"cloudtrail_events": 1,
                                                                        "cloudtrail_quarantine": quarantined}
    assert datetime.fromisoformat(report.last_commit_time) <= datetime.now(timezone.utc)
    assert event_ids(spark, template["lake"]) == template["ids"]


def test_backlog_counts_exactly_the_files_spark_will_read(template):
    first = template["after_first"]
    assert (first.latest_commit_batch, first.backlog_files, first.ingested_files) == (
        0, 0, len(template["first"].files_written))
    # three new deliveries and the empty file; the hidden file, the temp name and _SUCCESS are never read
    before = template["before_second"]
    assert (before.status, before.backlog_files, before.ingested_files) == ("idle", 4, 4)
    assert template["after_second"].backlog_files == 0


def test_cli_inspect_json_and_text(template):
    done = run_cli("checkpoint", "inspect", JOB.name, "--lake", str(template["lake"]), "--input",
                   str(template["land"]), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for key in ("checkpoint", "status", "latest_offset_batch", "latest_commit_batch", "batch_in_flight",
                "last_commit_time", "backlog_files", "watermark", "driver", "supervisor", "problems"):
        assert key in report
    assert (report["status"], report["backlog_files"], report["driver"], report["problems"]) == ("idle", 0, None, [])
    text = run_cli("checkpoint", "inspect", JOB.name, "--lake", str(template["lake"]), "--input", str(template["land"]))
    assert text.returncode == 0
    assert "status      idle" in text.stdout and "problems    none" in text.stdout


def test_cli_bad_arguments_exit_2(template, tmp_path):
    assert run_cli("checkpoint", "inspect", "no_such_job").returncode == 2
    missing = run_cli("checkpoint", "inspect", JOB.name, "--input", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "--input" in missing.stderr


def test_inspection_over_an_fsspec_memory_filesystem(template):
    fs = fsspec.filesystem("memory")
    root = f"/ckpt-{uuid.uuid4().hex}"
    fs.put(str(template["lake"] / "checkpoints"), f"{root}/lake/checkpoints", recursive=True)
    try:
        remote = inspect_checkpoint(JOB, f"memory://{root}/lake", str(template["land"]))
        local = template["after_second"]
        keys = ("status", "query_id", "latest_offset_batch", "latest_commit_batch", "batch_in_flight",
                "backlog_files", "ingested_files", "sources", "watermark")
        assert {k: getattr(remote, k) for k in keys} == {k: getattr(local, k) for k in keys}
        assert remote.checkpoint == f"memory://{root}/lake/checkpoints/{JOB.name}"
        assert remote.last_commit_time is not None
        # the tables were not copied: the memory lake has none
        assert {t["format"] for name, t in remote.tables.items()} == {"missing"}
    finally:
        fs.rm(root, recursive=True)


def test_repair_over_an_fsspec_memory_filesystem(template):
    fs = fsspec.filesystem("memory")
    root = f"/ckpt-{uuid.uuid4().hex}"
    checkpoint = f"{root}/lake/checkpoints/{JOB.name}"
    fs.put(str(checkpoint_of(template["lake"])), checkpoint, recursive=True)
    fs.pipe_file(f"{checkpoint}/offsets/.5.{uuid.uuid4()}.tmp", b"partial")
    try:
        report = inspect_checkpoint(JOB, f"memory://{root}/lake", str(template["land"]))
        assert codes(report) == {"temp_files": "warning"}
        result = repair_checkpoint(JOB, f"memory://{root}/lake", apply=True, input_path=str(template["land"]))
        assert (result.exit_code, result.status_after, [a.code for a in result.actions]) == (0, "idle", ["temp_files"])
        assert result.backup.startswith(f"memory://{root}/lake/control/{JOB.name}/backups/")
        assert fs.exists(result.backup.removeprefix("memory://") + "/metadata")
        assert [n for n in fs.ls(f"{checkpoint}/offsets", detail=False) if n.endswith(".tmp")] == []
    finally:
        fs.rm(root, recursive=True)


def test_a_lake_without_a_checkpoint_is_not_started(tmp_path, template):
    report = inspect_checkpoint(JOB, str(tmp_path / "empty_lake"), str(template["land"]))
    assert (report.status, report.latest_offset_batch, report.latest_commit_batch, report.problems) == (
        "not_started", None, None, [])
    assert report.backlog_files == len(template["first"].files_written) + len(template["second"].files_written) + 1
    assert {t["format"] for t in report.tables.values()} == {"missing"}


# ---- the driver's lease --------------------------------------------------------------------------


def _hold_lease(control: Path, ttl: float) -> subprocess.Popen:
    code = ("import sys, time; from spark_jobs.control.checkpoint.lease import Lease; "
            "Lease.acquire(sys.argv[1], 'cloudtrail_etl', ttl_seconds=float(sys.argv[2])); print('held', flush=True); "
            "time.sleep(600)")
    child = subprocess.Popen([sys.executable, "-c", code, str(control), str(ttl)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "held\n"
    return child


def test_paused_driver_is_stalled_and_a_killed_one_dead(lake, template):
    control = lake / "control" / JOB.name
    child = _hold_lease(control, ttl=1.0)
    try:
        live = inspect(lake, template)
        assert live.status == "healthy"
        assert (live.driver["pid"], live.driver["alive"], live.driver["expired"]) == (child.pid, True, False)
        assert {"pid", "host", "started_at", "heartbeat_at"} <= set(live.driver)
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(1.5)
        paused = inspect(lake, template)
        assert paused.status == "stalled"
        assert codes(paused) == {"driver_stalled": "error"}
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        gone = inspect(lake, template)
        assert gone.status == "dead"
        assert codes(gone) == {"driver_dead": "warning"}
    finally:
        child.kill()
        child.wait()


def test_live_driver_statuses_in_flight_lagging_and_no_progress(lake, template):
    checkpoint = checkpoint_of(lake)
    lease = Lease.acquire(str(lake / "control" / JOB.name), JOB.name, ttl_seconds=60)
    try:
        assert inspect(lake, template).status == "healthy"
        newest = template["after_second"].latest_offset_batch
        commit = checkpoint / "commits" / str(newest)
        committed = commit.read_bytes()
        commit.unlink()
        in_flight = inspect(lake, template)
        assert (in_flight.status, in_flight.batch_in_flight) == ("in_flight", newest)
        commit.write_bytes(committed)
        # two files no batch has read, against limits of 1 pending file and 1 s without a commit
        write_sample_landing(lake / "more", files=2, records_per_file=1, seed=5, include_bad_files=False)
        lagging = inspect_checkpoint(replace(JOB, health=HealthThresholds(max_pending_files=1)), str(lake),
                                     str(lake / "more"))
        assert (lagging.status, lagging.backlog_files, codes(lagging)["lagging"]) == ("lagging", 2, "warning")
        time.sleep(1.1)
        stuck = inspect_checkpoint(replace(JOB, health=HealthThresholds(max_batch_age_seconds=1)), str(lake),
                                   str(lake / "more"))
        assert (stuck.status, codes(stuck)["no_progress"]) == ("stalled", "error")
    finally:
        lease.release()


def test_repair_is_refused_while_a_live_driver_holds_the_lease(lake, template):
    (checkpoint_of(lake) / "offsets" / f".7.{uuid.uuid4()}.tmp").write_text("v1")
    lease = Lease.acquire(str(lake / "control" / JOB.name), JOB.name, ttl_seconds=60)
    try:
        before = snapshot(checkpoint_of(lake))
        result = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
        assert result.exit_code == 3 and "live driver" in result.blocked_by
        assert snapshot(checkpoint_of(lake)) == before
    finally:
        lease.release()


# ---- damage: inspect names it, repair fixes or refuses it, the tables end exact ------------------


def test_left_over_temp_files_are_deleted(lake, template):
    checkpoint = checkpoint_of(lake)
    planted = [f"offsets/.4.{uuid.uuid4()}.tmp", f"commits/..4.{uuid.uuid4()}.tmp.crc",
               f"discovery/manifests/.99.json.{uuid.uuid4()}.tmp", f".metadata.{uuid.uuid4()}.tmp"]
    for name in planted:
        (checkpoint / name).write_text("partial")
    report = inspect(lake, template)
    assert codes(report) == {"temp_files": "warning"}
    assert report.status == "idle"
    dry = repair_checkpoint(JOB, str(lake), input_path=str(template["land"]))
    assert [(a.code, sorted(a.files)) for a in dry.actions] == [("temp_files", sorted(planted))]
    assert all((checkpoint / name).exists() for name in planted)  # a dry run changes nothing
    done = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
    assert (done.applied, done.exit_code, done.status_after) == (True, 0, "idle")
    assert not any((checkpoint / name).exists() for name in planted)
    backup = Path(done.backup)
    assert backup.parent.parent == lake / "control" / JOB.name / "backups"
    assert all((backup / name).exists() for name in planted)
    assert inspect(lake, template).problems == []


def test_empty_last_offsets_file_is_deleted_and_the_job_resumes_exact(lake, template, run_job, spark):
    checkpoint = checkpoint_of(lake)
    newest = template["after_second"].latest_offset_batch
    (checkpoint / "offsets" / str(newest + 1)).write_bytes(b"")  # a crash while planning the next batch
    report = inspect(lake, template)
    assert report.status == "corrupt"
    assert codes(report) == {"offsets_torn": "error"}
    assert report.batch_in_flight == newest + 1
    # Spark itself cannot start from it; its error is explained in plain words
    with pytest.raises(Exception) as failed:
        run_job(template["land"], lake)
    # the runner puts Spark's error in plain words (explain_start_failure)
    assert "cannot resume from checkpoint" in str(failed.value) and "checkpoint repair" in str(failed.value)
    result = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
    assert [(a.code, a.files) for a in result.actions] == [("offsets_torn", [f"offsets/{newest + 1}"])]
    assert (result.exit_code, result.status_after) == (0, "idle")
    rerun_and_check_exact(run_job, spark, lake, template)


def test_truncated_last_offsets_file_is_deleted_and_the_job_resumes_exact(lake, template, run_job, spark):
    checkpoint = checkpoint_of(lake)
    newest = template["after_second"].latest_offset_batch
    whole = (checkpoint / "offsets" / str(newest)).read_bytes()
    (checkpoint / "offsets" / str(newest + 1)).write_bytes(whole[: len(whole) // 2])
    report = inspect(lake, template)
    assert codes(report) == {"offsets_torn": "error"}
    assert "not complete JSON" in report.problem("offsets_torn").explanation
    result = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
    assert [a.code for a in result.actions] == ["offsets_torn"]
    rerun_and_check_exact(run_job, spark, lake, template)


def test_torn_offsets_of_a_batch_the_tables_hold_is_refused(lake, template):
    checkpoint = checkpoint_of(lake)
    newest = template["after_second"].latest_offset_batch
    for name in (str(newest), f".{newest}.crc"):
        (checkpoint / "commits" / name).unlink()
    whole = (checkpoint / "offsets" / str(newest)).read_bytes()
    (checkpoint / "offsets" / str(newest)).write_bytes(whole[:40])  # its checksum no longer matches either
    report = inspect(lake, template)
    assert codes(report) == {"offsets_torn": "error", "table_ahead_of_checkpoint": "info"}
    assert report.problem("offsets_torn").repair == "refuse"
    before = snapshot(checkpoint)
    result = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
    assert result.exit_code == 1
    assert [r["code"] for r in result.refused] == ["offsets_torn"]
    assert "a table holds batch" in result.refused[0]["way_out"]
    assert snapshot(checkpoint) == before


def test_missing_commit_of_the_last_batch_needs_no_repair(lake, template, run_job, spark):
    checkpoint = checkpoint_of(lake)
    newest = template["after_second"].latest_offset_batch
    for name in (str(newest), f".{newest}.crc"):
        (checkpoint / "commits" / name).unlink()
    report = inspect(lake, template)
    assert report.status == "idle"
    assert codes(report) == {"table_ahead_of_checkpoint": "info", "uncommitted_batch": "info"}
    assert (report.batch_in_flight, report.latest_commit_batch) == (newest, newest - 1)
    result = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
    assert (result.actions, result.refused, result.exit_code) == ([], [], 0)
    assert sorted(item["code"] for item in result.nothing_needed) == ["table_ahead_of_checkpoint", "uncommitted_batch"]
    rerun_and_check_exact(run_job, spark, lake, template)


def test_offsets_two_batches_ahead(lake, template, run_job, spark):
    checkpoint = checkpoint_of(lake)
    newest = template["after_second"].latest_offset_batch
    for batch in (newest, newest - 1):
        for name in (str(batch), f".{batch}.crc"):
            (checkpoint / "commits" / name).unlink()
    # the tables hold both batches whose commits were lost: Spark's skip of batch newest-1 is harmless
    safe = inspect(lake, template)
    assert codes(safe)["offsets_ahead"] == "info"
    # a batch planned after them, never written anywhere (offsets now three ahead of the commits)
    shutil.copy(checkpoint / "offsets" / str(newest), checkpoint / "offsets" / str(newest + 1))
    report = inspect(lake, template)
    assert report.status == "corrupt"
    assert codes(report)["offsets_ahead"] == "error"
    dry = repair_checkpoint(JOB, str(lake), input_path=str(template["land"]))
    assert [(a.code, a.files) for a in dry.actions] == [("offsets_ahead", [f"offsets/{newest + 1}"])]
    result = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
    assert (result.exit_code, result.status_after) == (0, "idle")
    assert not (checkpoint / "offsets" / str(newest + 1)).exists()
    rerun_and_check_exact(run_job, spark, lake, template)


def test_deleted_metadata_is_restored_from_the_tables_or_refused(lake, template, run_job, spark):
    checkpoint = checkpoint_of(lake)
    original = (checkpoint / "metadata").read_text()
    (checkpoint / "metadata").unlink()
    (checkpoint / ".metadata.crc").unlink()
    report = inspect(lake, template)
    assert report.status == "corrupt"
    assert codes(report) == {"metadata_missing": "error"}
    result = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
    if tables_format(lake) == "delta":
        assert [(a.code, a.files) for a in result.actions] == [("metadata_missing", ["metadata"])]
        assert json.loads((checkpoint / "metadata").read_text()) == json.loads(original)
        assert (result.exit_code, result.status_after) == (0, "idle")
        rerun_and_check_exact(run_job, spark, lake, template)
    else:  # a file sink records no query id: nothing proves it
        assert result.exit_code == 1
        assert [r["code"] for r in result.refused] == ["metadata_missing"]
        assert not (checkpoint / "metadata").exists()


def test_tables_ahead_of_the_checkpoint_offsets_is_refused(lake, template):
    checkpoint = checkpoint_of(lake)
    newest = template["after_second"].latest_offset_batch
    for folder in ("offsets", "commits"):  # as if an older copy of the checkpoint had been put back
        for name in (str(newest), f".{newest}.crc"):
            (checkpoint / folder / name).unlink()
    report = inspect(lake, template)
    assert report.status == "corrupt"
    assert codes(report) == {"table_ahead_of_offsets": "error"}
    before = snapshot(checkpoint)
    result = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
    assert (result.exit_code, [r["code"] for r in result.refused]) == (1, ["table_ahead_of_offsets"])
    assert "new checkpoint" in result.refused[0]["way_out"]
    assert snapshot(checkpoint) == before
    done = run_cli("checkpoint", "repair", JOB.name, "--lake", str(lake), "--input", str(template["land"]), "--apply")
    assert done.returncode == 1
    assert "REFUSED [table_ahead_of_offsets]" in done.stdout


def test_incompatible_change_of_the_sources_is_named_and_explained(lake, template, run_job):
    checkpoint = checkpoint_of(lake)
    newest = template["after_second"].latest_offset_batch
    offsets = checkpoint / "offsets" / str(newest)
    offsets.write_text(offsets.read_text() + '\n{"logOffset":0}')  # written by a query with two sources
    (checkpoint / "offsets" / f".{newest}.crc").unlink()
    report = inspect(lake, template)
    assert report.status == "corrupt"
    assert codes(report) == {"source_count_changed": "error"}
    assert report.sources == 2
    with pytest.raises(Exception) as failed:
        run_job(template["land"], lake)
    explained = str(failed.value)
    assert "cannot resume from checkpoint" in explained or "cannot start from checkpoint" in explained
    assert "different number of sources" in explained and "revert" in explained and "reprocess" in explained
    result = repair_checkpoint(JOB, str(lake), apply=True, input_path=str(template["land"]))
    assert (result.exit_code, [r["code"] for r in result.refused]) == (1, ["source_count_changed"])


@pytest.mark.parametrize("message, words", [
    ("[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA] Streaming stateful operator name does not match",
     "stateful operator"),
    ("[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE] Provided value schema does not match existing state value schema.",
     "state"),
    ("Provided schema doesn't match to the schema for existing state! Please note that Spark allow difference",
     "state"),
    ("[CONCURRENT_STREAM_LOG_UPDATE] Concurrent update to the log. Multiple streaming jobs detected for 4.",
     "two drivers"),
    ("[MALFORMED_LOG_FILE] Log file was malformed: failed to read correct log version from .", "checkpoint repair"),
    ("java.lang.IllegalStateException: Incomplete log file in the offset commit log", "checkpoint repair"),
    ("java.lang.IllegalStateException: Failed to read log file file:/lake/checkpoints/j/offsets/2. Incomplete log "
     "file", "checkpoint repair"),
    ("There are [2] sources in the checkpoint offsets and now there are [1] sources requested by the query.",
     "sources"),
    ("[STREAMING_CHECKPOINT_MISSING_METADATA_FILE] Checkpoint location /x is in an inconsistent state", "metadata"),
])
def test_explain_start_failure_names_the_cause_and_the_ways_out(message, words):
    explained = explain_start_failure(message)
    assert explained is not None and words in explained


def test_explain_start_failure_leaves_other_errors_alone():
    assert explain_start_failure("java.lang.OutOfMemoryError: Java heap space") is None
