"""``python -m spark_jobs lake``: optimize and vacuum while writes go on, restore, history, convert of
a file-sink lake; and the set-up that fetches the Delta jars from an empty Maven cache.

Real delta-spark on the shared SparkSession, real delta-rs; the commands that need no JVM (history,
restore's refusal) run as real ``python -m spark_jobs`` processes.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.launch.jars import PINNED, MAVEN_REPO_ENV, JARS_DIR_ENV
from spark_jobs.model.lake import Lake
from spark_jobs.control.lake.delta_log import restore_plan
from spark_jobs.cli.lake import run as run_command
from spark_jobs.driver.lake_tools import optimize, restore, vacuum
from spark_jobs.registry import get_job, table_specs
from tests.helpers.project import PROJECT_ROOT, run_cli
from tests.helpers.table_rows import append, events_frame, quarantine_frame, schemas

JOB = get_job("cloudtrail_etl")
EVENTS = JOB.table("cloudtrail_events")
QUARANTINE = JOB.table("cloudtrail_quarantine")


def ids(batch: int, size: int = 6) -> list[str]:
    return [f"ev-{batch * 100 + i}" for i in range(size)]


def read_ids(spark, path: Path, version: int | None = None) -> list[str]:
    """The table's eventIDs (every row read from its files: no answer from the log's stats)."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted(r.eventID for r in reader.load(str(path)).select("eventID").collect())


def data_files_on_disk(path: Path) -> int:
    return sum(1 for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)


def live_files(path: Path) -> int:
    from deltalake import DeltaTable

    return len(DeltaTable(str(path)).file_uris())


def test_optimize_then_vacuum_while_a_writer_commits(spark, tmp_path):
    lake = Lake(tmp_path)
    path = lake.table_path("cloudtrail_events")
    written = []
    for batch in range(4):  # versions 0..3, one file per date and batch
        append(events_frame(spark, ids(batch)), path, "date")
        written += ids(batch)
    version_1 = read_ids(spark, path, 1)
    assert version_1 == sorted(ids(0) + ids(1))
    files_before = live_files(path)

    stop, errors, versions_during = threading.Event(), [], []

    def writer():  # the running job: a commit every moment until maintenance is done
        batch = 4
        try:
            while not stop.is_set() or batch < 6:
                append(events_frame(spark, ids(batch)), path, "date")
                written.extend(ids(batch))
                batch += 1
                stop.wait(0.5)  # a micro-batch every half second
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        optimized = optimize(spark, lake, EVENTS)
        versions_during.append(optimized["version"])
        kept = vacuum(spark, lake, EVENTS)  # the registry's retention, 168 hours
    finally:
        stop.set()
        thread.join(timeout=600)
    assert errors == []

    assert optimized["files_removed"] >= files_before > optimized["files_added"] >= 1
    assert (kept["retention_hours"], kept["files_deleted"], kept["forced"]) == (168.0, 0, False)
    assert read_ids(spark, path) == sorted(written)  # every committed row, once: nothing lost or doubled
    assert read_ids(spark, path, 1) == version_1  # within the retention, an old version is still readable

    with pytest.raises(UsageError, match=r"retention of 0 hours is below Delta's safety minimum of 168 hours"):
        vacuum(spark, lake, EVENTS, retention_hours=0)

    on_disk = data_files_on_disk(path)
    deleted = vacuum(spark, lake, EVENTS, retention_hours=0, force=True)  # only here: no writer runs now
    assert deleted["forced"] is True
    assert deleted["files_deleted"] == on_disk - live_files(path) > 0
    assert data_files_on_disk(path) == live_files(path) < on_disk  # only the newest version's files are left
    assert read_ids(spark, path) == sorted(written)
    with pytest.raises(Exception, match="(?i)FileNotFound|does not exist|FAILED_READ_FILE"):
        read_ids(spark, path, 1)  # past the retention, version 1's files are gone


@pytest.fixture
def restorable(spark, tmp_path):
    """cloudtrail_quarantine in three commits: versions 0, 1, 2."""
    lake = Lake(tmp_path)
    path = lake.table_path("cloudtrail_quarantine")
    for batch in range(3):
        append(quarantine_frame(spark, [f"file-{batch}-{i}" for i in range(batch + 2)]), path, "ingest_date")
    return lake


def quarantine_rows(spark, path: Path, version: int | None = None) -> list[tuple]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted(tuple(r) for r in reader.load(str(path)).collect())


def test_restore_refuses_without_yes_and_says_what_it_would_do(restorable):
    done = run_cli("lake", "restore", "--table", "cloudtrail_quarantine", "--to-version", "1",
                   "--lake", str(restorable.root), timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    path = restorable.table_path("cloudtrail_quarantine")
    assert line.startswith(f"error: restore cloudtrail_quarantine at {path} from version 2 to the contents of "
                           "version 1 (WRITE, committed "), line
    assert "(9 rows now, 5 rows then); this commits version 3" in line
    assert line.endswith("Run again with --yes to do it")


def test_restore_brings_back_an_earlier_versions_exact_rows(spark, restorable):
    path = restorable.table_path("cloudtrail_quarantine")
    version_1 = quarantine_rows(spark, path, 1)

    result = restore(spark, restore_plan(restorable, "cloudtrail_quarantine", to_version=1))

    assert (result["restored_version"], result["version_before"], result["version"]) == (1, 2, 3)
    assert result["rows"] == 5
    assert quarantine_rows(spark, path) == version_1
    history = run_cli("lake", "history", "--table", "cloudtrail_quarantine", "--lake", str(restorable.root),
                      "--format", "json", timeout=120)
    assert history.returncode == 0, history.stderr
    entries = [json.loads(line) for line in history.stdout.splitlines()]
    assert [(e["version"], e["operation"], e["rows_added"]) for e in entries] == [
        (3, "RESTORE", None), (2, "WRITE", 4), (1, "WRITE", 3), (0, "WRITE", 2)]
    assert entries[0]["parameters"]["version"] == 1


def test_restore_to_a_version_that_does_not_exist_names_the_range(restorable):
    with pytest.raises(UsageError,
                       match=r"--as-of 7: no such version; table cloudtrail_quarantine has versions 0\.\.2"):
        restore_plan(restorable, "cloudtrail_quarantine", to_version=7)


def file_sink_lake(spark, root: Path) -> dict:
    """A lake as the previous version wrote it: each table by Spark's file sink (``_spark_metadata``),
    ``cloudtrail_events`` with two committed batches plus a file a killed batch left behind,
    ``cloudtrail_quarantine`` with nothing committed."""
    lake = Lake(root)
    events_schema = schemas(spark)["cloudtrail_events"]
    source = root / "source"
    committed = []
    for batch in range(2):
        events_frame(spark, ids(batch)).write.mode("append").parquet(str(source))
        committed += ids(batch)
        query = (spark.readStream.schema(events_schema).parquet(str(source)).writeStream.format("parquet")
                 .partitionBy("date").option("checkpointLocation", str(root / "old_checkpoints" / "events"))
                 .trigger(availableNow=True).start(str(lake.table_path("cloudtrail_events"))))
        query.awaitTermination()
    table = lake.table_path("cloudtrail_events")
    some_file = sorted((table / "date=2024-03-01").glob("part-*.parquet"))[0]
    killed = table / "date=2024-03-01" / "part-00000-00000000-dead-beef-0000-000000000000.c000.snappy.parquet"
    shutil.copy(some_file, killed)  # a re-run batch's rows, written before the kill, never committed
    empty = root / "empty_source"
    empty.mkdir()
    query = (spark.readStream.schema(schemas(spark)["cloudtrail_quarantine"]).parquet(str(empty)).writeStream
             .format("parquet").partitionBy("ingest_date")
             .option("checkpointLocation", str(root / "old_checkpoints" / "quarantine"))
             .trigger(availableNow=True).start(str(lake.table_path("cloudtrail_quarantine"))))
    query.awaitTermination()
    return {"lake": lake, "committed": sorted(committed), "killed": str(killed.relative_to(table))}


def lake_command(spark, *argv: str) -> list[dict]:
    from spark_jobs.cli.main import build_parser

    args = build_parser().parse_args(["lake", *argv])
    out = io.StringIO()
    assert run_command(args, spark=spark, out=out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_convert_a_file_sink_lake_keeps_exactly_the_committed_rows(spark, tmp_path):
    from deltalake import DeltaTable

    old = file_sink_lake(spark, tmp_path)
    lake = old["lake"]
    events_path = lake.table_path("cloudtrail_events")
    assert (events_path / "_spark_metadata").is_dir() and not (events_path / "_delta_log").exists()
    assert spark.read.parquet(str(events_path)).count() == len(old["committed"])  # Spark's file-sink reader

    events, quarantine, *others = lake_command(spark, "convert", "--lake", str(lake.root))
    unwritten = [t.name for t in table_specs()][2:]  # the tables of the other jobs (each once)
    assert [(r["table"], r["status"]) for r in others] == [(name, "absent") for name in unwritten]

    assert (events["status"], events["from_spark_metadata"], events["rows"]) == ("converted", True, 12)
    assert events["untracked_files"] == [old["killed"]]
    assert read_ids(spark, events_path) == old["committed"]
    assert sorted(DeltaTable(str(events_path)).to_pyarrow_table(columns=["eventID"]).column(0).to_pylist()) == \
        old["committed"]
    assert sorted(spark.read.format("delta").load(str(events_path)).columns) == \
        sorted(schemas(spark)["cloudtrail_events"].fieldNames())
    assert DeltaTable(str(events_path)).metadata().partition_columns == ["date"]

    assert (quarantine["status"], quarantine["rows"], quarantine["files_converted"]) == ("converted", 0, 0)
    quarantine_table = spark.read.format("delta").load(str(lake.table_path("cloudtrail_quarantine")))
    assert quarantine_table.count() == 0
    assert quarantine_table.columns == schemas(spark)["cloudtrail_quarantine"].fieldNames()

    again = lake_command(spark, "convert", "--lake", str(lake.root))
    assert [(r["table"], r["status"]) for r in again] == [("cloudtrail_events", "already_delta"),
                                                          ("cloudtrail_quarantine", "already_delta")] + \
        [(name, "absent") for name in unwritten]


def test_lake_commands_name_an_unknown_table(tmp_path):
    done = run_cli("lake", "history", "--table", "nosuch", "--lake", str(tmp_path), timeout=120)
    assert done.returncode == 2
    known = ", ".join(table.name for table in table_specs())
    assert known.startswith("cloudtrail_events, cloudtrail_quarantine, cloudtrail_activity, ")
    assert done.stderr.strip() == f"error: unknown table 'nosuch'; tables: {known}"


@pytest.mark.parametrize("command", ["optimize", "vacuum"])
def test_a_table_no_job_has_written_is_reported_absent_without_a_jvm(tmp_path, command):
    # lake_maintenance compacts every registry table, some before their job's first run.
    done = run_cli("lake", command, "--table", "word_counts", "--lake", str(tmp_path),
                   env={JARS_DIR_ENV: str(tmp_path / "no_jars")}, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == {"table": "word_counts", "command": command, "status": "absent",
                                       "path": str(tmp_path / "tables" / "word_counts")}


def test_jars_fetch_from_an_empty_maven_cache(tmp_path):
    """The set-up step of a fresh clone: Maven Central -> an empty folder, through an empty local repository."""
    if not shutil.which("mvn"):
        pytest.fail("mvn is not installed; the set-up needs it (apt-get install maven)", pytrace=False)
    env = {JARS_DIR_ENV: str(tmp_path / "jars"), MAVEN_REPO_ENV: str(tmp_path / "m2")}
    fetched = subprocess.run([sys.executable, "-m", "spark_jobs.launch.jars", "fetch"], cwd=PROJECT_ROOT,
                             env={**os.environ, **env}, capture_output=True, text=True, timeout=900)
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "jars").glob("*.jar")) == sorted(j.file_name for j in PINNED)
    checked = subprocess.run([sys.executable, "-m", "spark_jobs.launch.jars", "check"], cwd=PROJECT_ROOT,
                             env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert (checked.returncode, checked.stderr) == (0, "")


def test_vacuum_below_the_safety_minimum_is_refused_before_spark_starts(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "tables" / "cloudtrail_events"), pa.table({"eventID": ["ev-1"]}))
    done = run_cli("lake", "vacuum", "--table", "cloudtrail_events", "--retention-hours", "0",
                   "--lake", str(tmp_path), env={JARS_DIR_ENV: str(tmp_path / "no_jars")}, timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: vacuum of cloudtrail_events with a retention of 0 hours is below Delta's safety "
                           "minimum of 168 hours (the table's delta.deletedFileRetentionDuration)"), line
    assert line.endswith("or pass --force when no job writes this table and nobody reads older versions")
