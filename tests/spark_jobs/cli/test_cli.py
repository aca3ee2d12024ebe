"""The command-line contract: one-line errors naming the value, exit codes, the sql command's output."""

from __future__ import annotations

import json

import pytest

from tools.sample_data import write_sample_landing
from spark_jobs.registry import JOBS
from tests.helpers.kills import JobDriver, run_command
from tests.helpers.project import run_cli


@pytest.mark.parametrize("args, message", [
    (["run", "nope"], f"error: unknown job 'nope'; known jobs: {', '.join(sorted(JOBS))}"),
    (["run", "cloudtrail_etl", "--input", "/no/such/folder"],
     "error: input folder '/no/such/folder' does not exist; pass --input DIR (or set $CLOUDTRAIL_ETL_INPUT)"),
    (["run", "cloudtrail_etl", "--input", "tests", "--trigger", "hourly"], "error: bad trigger 'hourly'"),
    (["run", "cloudtrail_etl", "--input", "tests", "--max-files-per-trigger", "0"],
     "error: --max-files-per-trigger must be a whole number >= 1, got '0'"),
    (["run", "cloudtrail_etl", "--input", "tests", "--lookback", "soon"],
     "error: --lookback 'soon' is not a positive duration"),
    (["run", "cloudtrail_etl", "--input", "tests", "--start-at", "yesterday"],
     "error: --start-at 'yesterday' is not a time (ISO-8601"),
    (["run", "word_count", "--input", "tests", "--queue-url", "https://sqs.eu-west-1.amazonaws.com/1/q"],
     "error: --queue-url: job word_count does not discover files by a key layout"),
    (["run", "cloudtrail_etl", "--input", "Makefile"], "error: input '"),
])
def test_bad_values_fail_fast_with_one_line_naming_them(args, message):
    result = run_cli(*args, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_without_the_delta_jars_the_run_fails_before_any_work_naming_the_artifact(tmp_path):
    landing, lake, empty = tmp_path / "landing", tmp_path / "lake", tmp_path / "no-jars"
    write_sample_landing(landing, files=1, records_per_file=1, include_bad_files=False)
    empty.mkdir()
    result = run_cli("run", "cloudtrail_etl", "--input", str(landing), "--lake", str(lake),
                     env={"SPARK_JOBS_JARS_DIR": str(empty)}, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert line.startswith("error: the jar io.delta:delta-spark_4.2_2.13:4.4.0 is missing"), line
    assert "make setup" in line and "SPARK_JOBS_JARS_DIR" in line
    assert not (lake / "checkpoints").exists() and not (lake / "tables").exists()  # nothing was started


def test_a_lake_in_the_old_file_sink_layout_refuses_to_start_naming_the_convert_command(tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_sample_landing(landing, files=1, records_per_file=1, include_bad_files=False)
    (lake / "tables" / "cloudtrail_events" / "_spark_metadata").mkdir(parents=True)
    (lake / "tables" / "cloudtrail_events" / "_spark_metadata" / "0").write_text("v1\n")
    result = run_cli("run", "cloudtrail_etl", "--input", str(landing), "--lake", str(lake), timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert "old file-sink layout" in line and line.endswith("python -m spark_jobs lake convert"), line
    assert not (lake / "checkpoints").exists() and not (lake / "tables" / "cloudtrail_events" / "_delta_log").exists()


@pytest.fixture(scope="module")
def small_lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    manifest = write_sample_landing(root / "landing", files=4, records_per_file=5, seed=11)
    result = run_cli("run", "cloudtrail_etl", "--input", str(root / "landing"), "--lake", str(root / "lake"))
    assert result.returncode == 0, result.stderr[-3000:]
    return root, manifest, json.loads(result.stdout.strip().splitlines()[-1])


def test_run_prints_a_summary_line(small_lake):
    _, manifest, summary = small_lake
    assert summary["job"] == "cloudtrail_etl" and summary["trigger"] == "available-now"
    assert summary["rows"] == {"cloudtrail_events": len(manifest.good_event_ids), "cloudtrail_quarantine": 10}
    assert summary["input_files"] == len(manifest.files_written) and summary["stopped_by"] is None


def test_sql_json_prints_one_object_per_row_with_utc_times_and_nulls(small_lake):
    root, manifest, _ = small_lake
    result = run_cli("sql", "--lake", str(root / "lake"), "--format", "json",
                     "SELECT date, min(eventTime) AS first, CAST(NULL AS STRING) AS nothing "
                     "FROM cloudtrail_events GROUP BY date ORDER BY date", env={"TZ": "America/Los_Angeles"})
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows and all(set(row) == {"date", "first", "nothing"} and row["nothing"] is None for row in rows)
    assert all(row["first"].startswith(row["date"] + "T") and row["first"].endswith("Z") for row in rows)
    everything = run_cli("sql", "--lake", str(root / "lake"), "--format", "json",
                         "SELECT count(*) AS n, count(DISTINCT eventID) AS ids FROM cloudtrail_events")
    assert json.loads(everything.stdout) == {"n": len(manifest.good_event_ids), "ids": len(manifest.good_event_ids)}


def test_sql_bad_query_is_a_one_line_error(small_lake):
    root, _, _ = small_lake
    result = run_cli("sql", "--lake", str(root / "lake"), "SELECT nope FROM cloudtrail_events")
    assert result.returncode == 2
    assert [l for l in result.stderr.splitlines() if l.startswith("error:")][0].startswith("error: bad query: ")


def test_sql_on_an_empty_lake_gives_empty_tables_and_a_note(tmp_path):
    result = run_cli("sql", "--lake", str(tmp_path), "--format", "json", "SELECT count(*) AS n FROM cloudtrail_quarantine")
    assert result.returncode == 0 and json.loads(result.stdout) == {"n": 0}
    assert "note: table cloudtrail_quarantine has no data yet" in result.stderr
    assert "note: table cloudtrail_events" not in result.stderr  # only the tables the query reads


def test_processing_time_runs_until_sigterm_then_stops_after_the_batch(tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    first = write_sample_landing(landing / "a", files=2, records_per_file=10, seed=21, include_bad_files=False)
    commits = lake / "checkpoints" / "cloudtrail_etl" / "commits"
    with JobDriver(run_command("cloudtrail_etl", "--input", str(landing), "--lake", str(lake), "--trigger",
                               "processing-time:1s"), tmp_path / "driver.log") as driver:
        driver.wait_for(lambda: (commits / "0").exists(), 180, "the first commit")
        second = write_sample_landing(landing / "b", files=3, records_per_file=10, seed=22, include_bad_files=False)
        driver.wait_for(lambda: (commits / "1").exists(), 120, "the running job's commit of the new files")
        assert driver.poll() is None  # still running: processing-time does not end by itself
        assert driver.stop(120) == 0, driver.tail(3000)
    # The summary is the driver's one line of stdout (a JSON object); the log has its stderr too.
    summary = json.loads([line for line in driver.log.read_text().splitlines() if line.startswith("{")][-1])
    assert summary["stopped_by"] == "SIGTERM"
    assert summary["rows"]["cloudtrail_events"] == 50
    offsets = {p.name for p in (commits.parent / "offsets").iterdir() if p.name.isdigit()}
    assert offsets == {p.name for p in commits.iterdir() if p.name.isdigit()}  # no batch left half done
    assert len(first.good_event_ids) + len(second.good_event_ids) == 50
