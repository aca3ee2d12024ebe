"""streaming_progress after a real catch-up run: one row per micro-batch, with the numbers Spark reported.

Spark's own report of each batch is taken independently of the runner, by a ``StreamingQueryListener``
on the shared session (its ``QueryProgressEvent``s), and compared field by field with the table's rows,
read back with delta-rs, DuckDB and Spark.
"""

from __future__ import annotations

import io
import json
import time
from datetime import datetime, timezone

import pytest
from pyspark.sql.streaming import StreamingQueryListener

from spark_jobs.launch import code_zip
from spark_jobs.launch.version import current as current_version
from spark_jobs.model.lake import Lake
from spark_jobs.control.monitoring.history import read_progress
from spark_jobs.control.monitoring.progress import PROGRESS_TABLE, apply_retention, progress_table_path
from tools.sample_data import write_sample_landing
from spark_jobs.driver.sql import print_result, register_tables, run_duckdb
from tests.helpers.cloudtrail import JOB

FILES_PER_BATCH = 9


class Collector(StreamingQueryListener):
    """Spark's progress events of one query name, as Spark reported them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.progress: dict[int, object] = {}

    def onQueryStarted(self, event):  # noqa: N802 - Spark's API
        pass

    def onQueryProgress(self, event):  # noqa: N802
        if event.progress.name == self.name and "addBatch" in event.progress.durationMs:
            self.progress[event.progress.batchId] = event.progress

    def onQueryIdle(self, event):  # noqa: N802
        pass

    def onQueryTerminated(self, event):  # noqa: N802
        pass


@pytest.fixture(scope="module")
def catch_up(tmp_path_factory, spark, run_job):
    """The generated samples (12 deliveries and the damaged files) caught up in batches of 9 files."""
    root = tmp_path_factory.mktemp("progress")
    write_sample_landing(root / "landing", files=12, records_per_file=10)
    listener = Collector(JOB.name)
    spark.streams.addListener(listener)
    try:
        summary = run_job(root / "landing", root / "lake", maxFilesPerTrigger=str(FILES_PER_BATCH))
        deadline = time.monotonic() + 60
        while len(listener.progress) < summary.batches and time.monotonic() < deadline:
            time.sleep(0.2)  # listener events arrive asynchronously
    finally:
        spark.streams.removeListener(listener)
    return {"root": root, "summary": summary, "spark": listener.progress,
            "rows": read_progress(root / "lake", JOB.name, limit=None)}


def test_one_row_per_micro_batch_with_the_numbers_spark_reported(catch_up):
    rows, reported, summary = catch_up["rows"], catch_up["spark"], catch_up["summary"]

    assert summary.batches >= 3
    assert [row["batch_id"] for row in rows] == list(range(summary.batches)) == sorted(reported)
    for row in rows:
        progress = reported[row["batch_id"]]
        assert row["stream"] == row["job"] == JOB.name
        assert (row["query_id"], row["run_id"]) == (str(progress.id), str(progress.runId))
        assert row["timestamp"] == datetime.fromisoformat(progress.timestamp.replace("Z", "+00:00"))
        assert row["batch_duration_ms"] == progress.batchDuration
        assert row["duration_ms"] == dict(progress.durationMs)
        assert row["num_input_rows"] == progress.numInputRows
        assert row["input_rows_per_second"] == pytest.approx(progress.inputRowsPerSecond, rel=1e-9)
        assert row["processed_rows_per_second"] == pytest.approx(progress.processedRowsPerSecond, rel=1e-9)
        [source] = row["sources"]
        [spark_source] = progress.sources
        assert (source["description"], source["num_input_rows"]) == (spark_source.description,
                                                                      spark_source.numInputRows)
        assert json.loads(source["end_offset"]) == json.loads(spark_source.endOffset)
        assert row["sink"]["description"] == progress.sink.description
        assert row["state_operators"] == [] and row["state_rows_total"] is None  # no stateful operator
        assert row["watermark"] is None


def test_every_row_and_every_batch_commit_names_the_code_version(catch_up):
    from deltalake import DeltaTable

    version = current_version()
    rows = catch_up["rows"]

    assert version.code == code_zip.code_hash()[:16]
    assert [row["version"] for row in rows] == [version.name] * catch_up["summary"].batches
    for table in JOB.tables:
        history = DeltaTable(str(Lake(catch_up["root"] / "lake").table_path(table.name))).history()
        batches = [commit for commit in history if commit["operation"] != "CREATE TABLE"]
        assert batches, table.name
        assert {commit.get("userMetadata") for commit in batches} == {version.user_metadata()}, table.name


def test_rows_per_table_add_up_to_what_the_run_wrote(catch_up):
    rows, summary = catch_up["rows"], catch_up["summary"]

    assert sum(row["input_files"] for row in rows) == summary.input_files
    # maxFilesPerTrigger files a batch; a zero-byte file among them is listed but gives no row to count
    assert all(0 < row["input_files"] <= FILES_PER_BATCH for row in rows)
    for table in summary.rows:
        assert sum(row["rows_inserted"][table] for row in rows) == summary.rows[table]
    # The generated samples hold no duplicate events: every row carried was new.
    assert [row["rows"] for row in rows] == [row["rows_inserted"] for row in rows]
    for row in rows:
        total = sum(row["rows"].values())
        assert row["quarantine_rate"] == pytest.approx(row["rows"]["cloudtrail_quarantine"] / total)
    assert sum(row["rows"]["cloudtrail_quarantine"] for row in rows) > 0


def test_backlog_samples_count_down_to_zero(catch_up):
    backlog = [row["backlog_files"] for row in catch_up["rows"]]

    assert backlog[-1] == 0
    assert backlog == sorted(backlog, reverse=True)
    assert backlog[0] >= catch_up["summary"].input_files - 2 * FILES_PER_BATCH


def test_both_sql_engines_read_it_as_a_view(catch_up, spark):
    lake = Lake(catch_up["root"] / "lake")
    query = (f"SELECT batch_id, num_input_rows, input_files, rows['cloudtrail_events'] AS events "
             f"FROM {PROGRESS_TABLE} ORDER BY batch_id")
    outputs = {}
    duckdb_out, spark_out = io.StringIO(), io.StringIO()
    run_duckdb(query, lake, {}, "json", 100, out=duckdb_out)
    register_tables(spark, lake)  # what `sql --engine spark` does, on the shared session
    print_result(spark.sql(query), "json", 100, out=spark_out)
    for name, out in (("duckdb", duckdb_out), ("spark", spark_out)):
        outputs[name] = [json.loads(line) for line in out.getvalue().splitlines()]

    expected = [{"batch_id": r["batch_id"], "num_input_rows": r["num_input_rows"], "input_files": r["input_files"],
                 "events": r["rows"]["cloudtrail_events"]} for r in catch_up["rows"]]
    assert outputs["duckdb"] == outputs["spark"] == expected


def test_retention_deletes_whole_days_older_than_the_setting(catch_up):
    lake = catch_up["root"] / "lake"
    rows = read_progress(lake, JOB.name, limit=None)
    days_later = (max(r["timestamp"] for r in rows) - datetime(1970, 1, 1, tzinfo=timezone.utc)).days

    apply_retention(lake, retention_days=3, now=datetime.fromtimestamp((days_later + 3) * 86400, timezone.utc))
    assert read_progress(lake, JOB.name, limit=None) == rows  # three days back: kept
    apply_retention(lake, retention_days=3, now=datetime.fromtimestamp((days_later + 4) * 86400, timezone.utc))
    assert read_progress(lake, JOB.name, limit=None) == []
    assert (progress_table_path(lake) / "_delta_log").is_dir()


def test_before_any_driver_wrote_it_the_view_is_empty(tmp_path, spark, capsys):
    out = io.StringIO()
    run_duckdb(f"SELECT count(*) AS n FROM {PROGRESS_TABLE}", Lake(tmp_path), {}, "json", 10, out=out)
    assert out.getvalue() == '{"n":0}\n'
    register_tables(spark, Lake(tmp_path))
    assert spark.sql(f"SELECT count(*) AS n FROM {PROGRESS_TABLE}").first().n == 0
    assert PROGRESS_TABLE not in capsys.readouterr().err  # no note for it: the drivers create it
