"""``python -m spark_jobs sql`` over Delta tables: the same rows through Spark (delta-spark) and DuckDB
(delta-rs, no JVM), time travel with ``--as-of``, and the one-line errors.

The lake is built once per module with the shared SparkSession: ``cloudtrail_events`` in two commits
(versions 0 and 1, a second apart) and ``cloudtrail_quarantine`` in one.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from spark_jobs.model.lake import Lake
from spark_jobs.driver.sql import parse_as_of_args, print_result, register_tables, run_duckdb
from tests.helpers.project import PROJECT_ROOT, run_cli
from tests.helpers.table_rows import append, events_frame, quarantine_frame

FIRST = [f"ev-{i}" for i in range(0, 5)]
SECOND = [f"ev-{i}" for i in range(5, 9)]
QUARANTINED = [f"file-{i}" for i in range(3)]
EVENTS_QUERY = "SELECT * FROM cloudtrail_events ORDER BY eventID"
QUARANTINE_QUERY = "SELECT * FROM cloudtrail_quarantine ORDER BY source_file"


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """A lake of two Delta tables; ``between`` is a time after events v0 and before v1."""
    root = tmp_path_factory.mktemp("sql_lake")
    lake = Lake(root)
    append(events_frame(spark, FIRST), lake.table_path("cloudtrail_events"), "date")
    append(quarantine_frame(spark, QUARANTINED), lake.table_path("cloudtrail_quarantine"), "ingest_date")
    time.sleep(1.2)
    between = datetime.now(timezone.utc)
    time.sleep(1.2)
    append(events_frame(spark, SECOND), lake.table_path("cloudtrail_events"), "date")
    return {"lake": lake, "root": root, "between": between}


def spark_rows(spark, lake: Lake, query: str, as_of: list[str] | None = None, output_format: str = "json"):
    out = io.StringIO()
    register_tables(spark, lake, parse_as_of_args(as_of))
    print_result(spark.sql(query), output_format, 1000, out)
    return out.getvalue()


def duckdb_rows(lake: Lake, query: str, as_of: list[str] | None = None, output_format: str = "json"):
    out = io.StringIO()
    run_duckdb(query, lake, parse_as_of_args(as_of), output_format, 1000, out)
    return out.getvalue()


def parsed(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("query", [EVENTS_QUERY, QUARANTINE_QUERY], ids=["events", "quarantine"])
def test_spark_and_duckdb_print_the_same_json(spark, lake, query):
    through_spark = spark_rows(spark, lake["lake"], query)
    through_duckdb = duckdb_rows(lake["lake"], query)

    assert parsed(through_duckdb) == parsed(through_spark)
    assert through_duckdb == through_spark  # byte for byte: key order, NULLs, UTC times with milliseconds
    rows = parsed(through_spark)
    key = "eventID" if "events" in query else "source_file"
    assert [r[key] for r in rows] == (sorted(FIRST + SECOND) if key == "eventID" else QUARANTINED)
    assert any(value is None for value in rows[0].values())  # NULL columns are printed, not dropped


def test_spark_and_duckdb_print_the_same_table(spark, lake):
    query = "SELECT eventID, date, eventTime, readOnly, _record_index FROM cloudtrail_events ORDER BY eventID"
    assert duckdb_rows(lake["lake"], query, output_format="table") == \
        spark_rows(spark, lake["lake"], query, output_format="table")


def test_json_times_are_utc_with_milliseconds(lake):
    [row] = parsed(duckdb_rows(lake["lake"], "SELECT eventTime, date FROM cloudtrail_events WHERE eventID = 'ev-1'"))
    assert row == {"eventTime": "2024-03-01T08:16:01.123Z", "date": "2024-03-02"}


@pytest.mark.parametrize("engine", ["spark", "duckdb"])
def test_as_of_a_version_gives_that_versions_rows(spark, lake, engine):
    query = "SELECT eventID FROM cloudtrail_events ORDER BY eventID"
    read = (lambda as_of: spark_rows(spark, lake["lake"], query, as_of)) if engine == "spark" else \
        (lambda as_of: duckdb_rows(lake["lake"], query, as_of))

    assert [r["eventID"] for r in parsed(read(["0"]))] == FIRST
    assert [r["eventID"] for r in parsed(read(["cloudtrail_events=1"]))] == sorted(FIRST + SECOND)
    assert [r["eventID"] for r in parsed(read(None))] == sorted(FIRST + SECOND)


@pytest.mark.parametrize("engine", ["spark", "duckdb"])
def test_as_of_a_time_gives_the_version_committed_before_it(spark, lake, engine):
    between = lake["between"].strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    query = "SELECT eventID FROM cloudtrail_events ORDER BY eventID"
    text = spark_rows(spark, lake["lake"], query, [between]) if engine == "spark" else \
        duckdb_rows(lake["lake"], query, [between])
    assert [r["eventID"] for r in parsed(text)] == FIRST


def test_delta_rs_resolves_a_time_to_the_same_version(lake):
    from deltalake import DeltaTable

    table = DeltaTable(str(lake["lake"].table_path("cloudtrail_events")))
    table.load_as_version(lake["between"])
    assert table.version() == 0


def test_duckdb_command_answers_without_pyspark(lake):
    code = ("import sys, time; from spark_jobs.cli.main import main; start = time.monotonic(); "
            f"rc = main(['sql', '--engine', 'duckdb', '--lake', {str(lake['root'])!r}, '--format', 'json', "
            "'SELECT count(*) AS n, count(DISTINCT eventID) AS ids FROM cloudtrail_events']); "
            "print('SECONDS', round(time.monotonic() - start, 3)); "
            "print('PYSPARK', [m for m in sys.modules if m.startswith('pyspark')]); sys.exit(rc)")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    total = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == json.dumps({"n": 9, "ids": 9}, separators=(",", ":"))
    assert lines[-1] == "PYSPARK []"
    print(f"duckdb engine: {lines[1]} s in the command, {total:.2f} s for the whole process")


@pytest.mark.parametrize("engine", ["spark", "duckdb"])
@pytest.mark.parametrize("as_of, message", [
    ("99", "error: --as-of 99: no such version; table cloudtrail_events has versions 0..1, committed "),
    ("2000-01-01", "error: --as-of 2000-01-01 is before table cloudtrail_events was created; table "
                   "cloudtrail_events has versions 0..1, committed "),
    ("cloudtrail_quarantine=3", "error: --as-of 3: no such version; table cloudtrail_quarantine has versions "
                                "0..0, committed "),
    ("banana", "error: --as-of 'banana' is neither a version (a whole number like 3) nor a time (ISO-8601 like "
               "2026-11-23T08:00:00Z)"),
    ("nosuch=3", "error: --as-of 'nosuch=3' names unknown table 'nosuch'; tables: cloudtrail_events, "
                 "cloudtrail_quarantine"),
], ids=["version", "time", "one-table", "garbage", "unknown-table"])
def test_bad_as_of_is_one_line_naming_the_value_and_the_range(lake, engine, as_of, message):
    done = run_cli("sql", "--engine", engine, "--lake", str(lake["root"]), "--as-of", as_of, "SELECT 1", timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(message), line
    assert done.stdout == ""


def test_without_the_jars_the_spark_engine_is_one_line_naming_the_artifact(tmp_path):
    empty = tmp_path / "no_jars"
    empty.mkdir()
    done = run_cli("sql", "--lake", str(tmp_path / "lake"), "SELECT 1", env={"SPARK_JOBS_JARS_DIR": str(empty)},
                   timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: the jar io.delta:delta-spark_4.2_2.13:4.4.0 is missing "
                           f"({empty / 'delta-spark_4.2_2.13-4.4.0.jar'} does not exist): run `make setup`"), line


def test_a_table_with_no_data_yet_is_a_note_in_both_engines(spark, tmp_path):
    lake = Lake(tmp_path)
    append(events_frame(spark, FIRST[:1]), lake.table_path("cloudtrail_events"), "date")
    done = run_cli("sql", "--engine", "duckdb", "--lake", str(tmp_path), "--format", "json",
                   "SELECT count(*) AS n FROM cloudtrail_events", timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, '{"n":1}\n', "")  # no note of the tables it does not read
    done = run_cli("sql", "--engine", "duckdb", "--lake", str(tmp_path), "--format", "json",
                   "SELECT count(*) AS n FROM Cloudtrail_Quarantine", timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip().splitlines() == [  # once, for the table it names, before DuckDB's own error
        f"note: table cloudtrail_quarantine has no data yet at {lake.table_path('cloudtrail_quarantine')} (run: python "
        "-m spark_jobs run cloudtrail_etl)",
        "error: bad query: Catalog Error: Table with name Cloudtrail_Quarantine does not exist!"]
    assert Path(lake.table_path("cloudtrail_quarantine")).exists() is False
