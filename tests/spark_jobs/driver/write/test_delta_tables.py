"""The lake is Delta: one row per eventID, exactly once per writer, several writers at once, any reader."""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from spark_jobs.model.lake import Lake
from tools.sample_data import write_sample_landing
from tests.helpers.cloudtrail import JOB, file_name, overlapping_landings

EVENTS, QUARANTINE = "cloudtrail_events", "cloudtrail_quarantine"
COLUMNS = ["eventID", "date", "eventTime", "eventName", "_source_file", "_record_index"]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, run_job):
    """Generated samples (with bad files) ingested in two micro-batches."""
    root = tmp_path_factory.mktemp("delta")
    manifest = write_sample_landing(root / "landing", files=6, records_per_file=15, seed=5)
    summary = run_job(root / "landing", root / "lake", maxFilesPerTrigger="8")
    return {"root": root, "lake": Lake(root / "lake"), "manifest": manifest, "summary": summary}


def _rows(frame) -> list[tuple]:
    """Spark's rows of COLUMNS, times as UTC text (Spark formats them in the session's time zone, UTC)."""
    text = F.date_format("eventTime", "yyyy-MM-dd HH:mm:ss.SSSSSS").alias("eventTime")
    return sorted(tuple(r) for r in frame.select(*[text if c == "eventTime" else c for c in COLUMNS]).collect())


def _utc_text(rows) -> list[tuple]:
    """Rows from delta-rs or DuckDB (time-zone-aware times) with times as UTC text, sorted."""
    import datetime

    def norm(value):
        if isinstance(value, datetime.datetime):
            return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        return value

    return sorted(tuple(norm(v) for v in row) for row in rows)


def test_every_table_is_delta_with_features_delta_rs_reads(ingested):
    import deltalake

    for table in (EVENTS, QUARANTINE):
        dt = deltalake.DeltaTable(str(ingested["lake"].table_path(table)))
        protocol = dt.protocol()
        assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
        assert not protocol.reader_features and not protocol.writer_features
        assert dt.metadata().configuration.get("delta.enableDeletionVectors") == "false"
        stats_columns = JOB.table(table).stats_columns
        assert dt.metadata().configuration.get("delta.dataSkippingStatsColumns") == (",".join(stats_columns) or None)
        if stats_columns:  # each file's statistics cover exactly those columns
            actions = dt.get_add_actions(flatten=True)
            names = actions.column_names if hasattr(actions, "column_names") else list(actions.schema.names)
            assert actions.num_rows > 0
            assert {n.removeprefix("min.") for n in names if n.startswith("min.")} == set(stats_columns)
        assert tuple(dt.metadata().partition_columns) == JOB.table(table).partition_by
        history = dt.history()
        assert history[-1]["operation"] == "CREATE TABLE"  # created before the first batch
        assert {h["operation"] for h in history[:-1]} == {"MERGE"}


def test_same_rows_through_spark_delta_rs_duckdb_and_a_stream(ingested, spark, tables, tmp_path):
    import deltalake
    import duckdb

    path = str(ingested["lake"].table_path(EVENTS))
    through_spark = _rows(tables(ingested["lake"].root)[EVENTS])
    assert len(through_spark) == len(ingested["manifest"].good_event_ids) == 6 * 15 + 55

    dt = deltalake.DeltaTable(path)
    arrow = dt.to_pyarrow_table(columns=COLUMNS)
    assert _utc_text(zip(*[arrow.column(c).to_pylist() for c in COLUMNS])) == through_spark

    dataset = dt.to_pyarrow_dataset()  # noqa: F841 - DuckDB finds it by its Python name
    via_duckdb = duckdb.sql(f"SELECT {', '.join(COLUMNS)} FROM dataset").fetchall()
    assert _utc_text(via_duckdb) == through_spark

    stream = (spark.readStream.format("delta").load(path).writeStream.format("memory")
              .queryName("delta_stream_read").option("checkpointLocation", str(tmp_path / "read-checkpoint"))
              .trigger(availableNow=True).start())
    stream.awaitTermination(300)
    try:
        assert _rows(spark.table("delta_stream_read")) == through_spark
    finally:
        spark.catalog.dropTempView("delta_stream_read")

    quarantine = deltalake.DeltaTable(str(ingested["lake"].table_path(QUARANTINE))).to_pyarrow_table()
    assert sorted(zip(map(file_name, quarantine.column("source_file").to_pylist()),
                      quarantine.column("record_index").to_pylist(), quarantine.column("reason").to_pylist()),
                  key=str) == sorted(((b.path.name, b.record_index, b.reason) for b in ingested["manifest"].bad), key=str)


def test_files_delivered_again_under_new_names_add_nothing(ingested, run_job, tables):
    root, manifest = ingested["root"], ingested["manifest"]
    before = tables(root / "lake")[EVENTS].count()
    bad = {b.path.name for b in manifest.bad}
    healthy = [p for p in manifest.files_written if p.name not in bad][:3]
    again = root / "landing" / "again"
    again.mkdir()
    for i, path in enumerate(healthy):
        shutil.copyfile(path, again / f"redelivered-{i}-{path.name}")
    summary = run_job(root / "landing", root / "lake")
    assert summary.input_files == 3 and summary.rows == {EVENTS: 0, QUARANTINE: 0}
    events = tables(root / "lake")[EVENTS]
    assert events.count() == before
    assert events.agg(F.count("*") - F.count_distinct("eventID")).first()[0] == 0
    assert events.where(F.col("_source_file").contains("redelivered-")).count() == 0  # the first delivery stays


def _writer(spark, lake: Lake, app_id: str):
    from spark_jobs.driver.job_modules import output_schemas, table_targets
    from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, create_tables

    targets = table_targets(JOB, lake)
    create_tables(spark, targets, output_schemas(spark, JOB))
    return ExactlyOnceWriter(spark, targets, app_id)


def _parsed_events(spark, landing: Path):
    from spark_jobs.driver.job_modules import transform_batch

    return transform_batch(spark, JOB, landing)[EVENTS]


def test_a_replayed_merge_is_skipped_even_with_other_rows_and_duplicates_keep_the_first_delivery(spark, tmp_path):
    """The MERGE carries txnAppId/txnVersion (SQL confs): a batch id this writer committed is skipped."""
    import deltalake

    lake = Lake(tmp_path / "lake")
    first = write_sample_landing(tmp_path / "a", files=2, records_per_file=10, seed=31, include_bad_files=False)
    second = write_sample_landing(tmp_path / "b", files=1, records_per_file=10, seed=32, include_bad_files=False)
    a, b = _parsed_events(spark, tmp_path / "a"), _parsed_events(spark, tmp_path / "b")
    dates = lambda frame: [r.date for r in frame.select("date").distinct().collect()]  # noqa: E731
    writer = _writer(spark, lake, "test-writer")
    path = str(lake.table_path(EVENTS))

    assert writer.write(0, EVENTS, a, {"date": dates(a)}) == 20
    version = deltalake.DeltaTable(path).version()
    assert writer.write(0, EVENTS, b, {"date": dates(b)}) == 0  # replay of batch 0: skipped, new rows or not
    assert deltalake.DeltaTable(path).version() == version
    assert deltalake.DeltaTable(path).transaction_version("test-writer:cloudtrail_events") == 0

    # Batch 1: b, plus a second delivery of a's events from a file that sorts before theirs, plus a
    # later one of b's: one row per eventID; for b the first delivery of the batch, a's rows stay.
    earlier = b.withColumn("_source_file", F.lit("file:/0-earlier.json")).withColumn("eventName", F.lit("earlier"))
    later = b.withColumn("_source_file", F.lit("file:/z-later.json")).withColumn("eventName", F.lit("later"))
    again = a.withColumn("_source_file", F.lit("file:/0-again.json"))
    batch = b.unionByName(later).unionByName(earlier).unionByName(again)
    assert writer.write(1, EVENTS, batch, {"date": dates(batch)}) == 10
    rows = spark.read.format("delta").load(path).collect()
    assert Counter(r.eventID for r in rows) == Counter(first.good_event_ids + second.good_event_ids)
    assert {r.eventName for r in rows if r.eventID in set(second.good_event_ids)} == {"earlier"}
    assert not [r for r in rows if r._source_file == "file:/0-again.json"]  # the committed delivery stays


def test_later_deliveries_are_dropped_the_same_way_few_or_many(spark, tmp_path):
    """Few duplicates: collected and dropped by a broadcast anti join; more than ``most``: the whole batch is ranked."""
    from spark_jobs.driver.write.delta_writer import TableTarget, first_of_each_key

    write_sample_landing(tmp_path / "b", files=1, records_per_file=10, seed=33, include_bad_files=False)
    b = _parsed_events(spark, tmp_path / "b")
    target = TableTarget(EVENTS, tmp_path / "t", ("date",), ("eventID", "date"), ("_source_file", "_record_index"))
    later = b.withColumn("_source_file", F.lit("file:/z-later.json")).withColumn("eventName", F.lit("later"))
    earlier = b.withColumn("_source_file", F.lit("file:/0-earlier.json")).withColumn("eventName", F.lit("earlier"))
    batch = b.unionByName(later).unionByName(earlier).cache()

    assert first_of_each_key(target, b) is b  # no duplicates: the frame as it is, no join
    few = first_of_each_key(target, batch, most=20)  # 20 later deliveries: collected
    many = first_of_each_key(target, batch, most=19)  # one more than allowed: the whole batch ranked
    for kept in (few, many):
        rows = kept.select("eventID", "eventName").collect()
        assert sorted(r.eventID for r in rows) == sorted(r.eventID for r in b.select("eventID").collect())
        assert {r.eventName for r in rows} == {"earlier"}
    assert "Window" not in few._jdf.queryExecution().optimizedPlan().toString()
    assert "Window" in many._jdf.queryExecution().optimizedPlan().toString()


def test_two_writers_at_once_over_overlapping_input_are_exact(tmp_path, run_job, tables):
    """The live job and a second writer (own checkpoint, own txnAppId) commit to the same tables at once."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    own, extra = overlapping_landings(landing, files=6, records_per_file=12)
    results, errors = {}, []

    def run(name, input_path, writer):
        try:
            results[name] = run_job(input_path, lake, writer=writer, maxFilesPerTrigger="6")
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    # The backfill reads everything (the job's own files too: the same paths, the same bad files).
    threads = [threading.Thread(target=run, args=("live", landing / "own", None)),
               threading.Thread(target=run, args=("backfill", landing, "backfill"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not errors, errors
    assert (lake / "checkpoints" / "cloudtrail_etl").is_dir() and (lake / "checkpoints" / "cloudtrail_etl@backfill").is_dir()

    frames = tables(lake)
    ids = [r.eventID for r in frames[EVENTS].select("eventID").collect()]
    expected = set(own.good_event_ids) | set(extra.good_event_ids)
    assert len(ids) == len(expected) == len(own.good_event_ids) + 36 and set(ids) == expected
    assert sum(r.rows[EVENTS] for r in results.values()) == len(expected)  # each row inserted by one writer
    quarantined = sorted(((file_name(r.source_file), r.record_index, r.reason)
                          for r in frames[QUARANTINE].collect()), key=str)
    assert quarantined == sorted(((b.path.name, b.record_index, b.reason) for b in own.bad), key=str)


def test_a_writer_starting_while_another_creates_the_table_waits_for_its_first_commit(spark, tmp_path, monkeypatch):
    from pyspark.sql.types import StringType, StructField, StructType

    from spark_jobs.driver.write import delta_writer as table_writers
    from spark_jobs.model.errors import UsageError
    from spark_jobs.driver.write.delta_writer import TableTarget, create_tables

    schema = StructType([StructField("id", StringType()), StructField("date", StringType())])
    target = TableTarget("t", tmp_path / "t", ("date",), ("id",))
    # Another writer has begun: its table folder and _delta_log exist, version 0 does not yet.
    (target.path / "_delta_log").mkdir(parents=True)
    monkeypatch.setattr(table_writers, "FIRST_COMMIT_WAIT_SECONDS", 1.0)
    with pytest.raises(UsageError, match=r"table t at .* has a _delta_log without its first commit after 1 s"):
        table_writers._wait_for_first_commit(target, timeout=1.0)

    # A long-lived table whose log Delta cleaned up behind a checkpoint has no version 0 left: no wait.
    (target.path / "_delta_log" / "00000000000000000010.checkpoint.parquet").write_bytes(b"")
    assert table_writers._wait_for_first_commit(target, timeout=0.0)

    shutil.rmtree(target.path)
    other = threading.Thread(target=create_tables, args=(spark, [target], {"t": schema}))
    (target.path / "_delta_log").mkdir(parents=True)
    threading.Timer(1.5, lambda: (shutil.rmtree(target.path), other.start())).start()
    create_tables(spark, [target], {"t": schema})  # waits for the other writer's version 0
    assert (target.path / "_delta_log" / ("0" * 20 + ".json")).exists()
    other.join(60)
    assert spark.read.format("delta").load(str(target.path)).columns == ["id", "date"]
