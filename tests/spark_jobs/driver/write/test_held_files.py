"""The staged insert's reads off the Delta log: the files and batch Delta itself reads, and a commit as strict."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from spark_jobs.control.lake.commit_race import lost_commit_race
from spark_jobs.driver.write.delta_writer import TableTarget, TimeRange
from spark_jobs.driver.write.held_files import read_bound
from spark_jobs.driver.write.staged import _Scala, _merge_operation, _register_metrics

APP = "query-1:events"
DAY1, DAY2 = dt.date(2024, 3, 1), dt.date(2024, 3, 2)
NOON = dt.datetime(2024, 3, 2, 12, 0, tzinfo=dt.UTC)


def _append(spark, path: Path, rows: list[tuple[str, dt.date, dt.datetime]], batch: int | None = None,
            app: str = APP) -> None:
    """One commit of ``rows`` (one file per date), with the writer's marker when ``batch`` is given."""
    frame = spark.createDataFrame(rows, "eventID string, date date, eventTime timestamp")
    writer = frame.coalesce(1).write.format("delta").mode("append").partitionBy("date")
    if batch is not None:
        writer = writer.option("txnAppId", app).option("txnVersion", batch)
    writer.save(str(path))


@pytest.fixture
def table(spark, tmp_path) -> TableTarget:
    """Three files: day 1 at 10:00 (batch 0), day 2 at 10:00 (batch 1), day 2 at noon (another writer's)."""
    path = tmp_path / "events"
    _append(spark, path, [("a", DAY1, NOON - dt.timedelta(days=1, hours=2))], batch=0)
    _append(spark, path, [("b", DAY2, NOON - dt.timedelta(hours=2))], batch=1)
    _append(spark, path, [("c", DAY2, NOON)], batch=0, app="backfill-7:events")
    return TableTarget("events", path, ("date",), unique_key=("eventID", "date"))


def _bound(spark, target: TableTarget, dates: list[dt.date], times: TimeRange | None):
    """A transaction on the table, the bound's predicates, and what :func:`read_bound` read into it."""
    from spark_jobs.driver.write.delta_writer import _in_list

    scala = _Scala(spark)
    txn = scala.delta("DeltaLog").forTable(spark._jsparkSession, str(target.path)).startTransaction()
    frame = spark.read.format("delta").load(str(target.path))
    conditions = [_in_list("date", dates)] + (times.conditions() if times else [])
    predicates = [frame.where(c)._jdf.queryExecution().analyzed().condition() for c in conditions]
    return scala, txn, predicates, read_bound(scala, txn, target, APP, predicates, {"date": dates}, times)


def test_the_bound_read_off_the_log_is_what_delta_itself_reads(spark, table):
    """The files in the bound and the writer's last batch, as the transaction's own ``filterFiles`` and
    ``txnVersion`` give them (a time range that leaves out a file of the date, then one that keeps both)."""
    ranges = [(TimeRange("eventTime", NOON - dt.timedelta(minutes=20), NOON), {"c"}),
              (TimeRange("eventTime", NOON - dt.timedelta(hours=3), NOON), {"b", "c"}), (None, {"b", "c"})]
    for times, expected in ranges:
        scala, txn, predicates, read = _bound(spark, table, [DAY2], times)
        delta_own = sorted(f.path() for f in scala.to_list(txn.filterFiles(scala.seq(predicates), False)))
        assert sorted(read.held) == delta_own
        held_keys = {r.eventID for r in spark.read.parquet(*[str(table.path / p) for p in read.held]).collect()}
        assert held_keys == expected
        assert read.done == txn.txnVersion(APP) == 1


@pytest.mark.parametrize("concurrent, conflict", [
    ("same_app", "ConcurrentTransactionException"),  # a paused old driver's commit of the same writer
    ("append_in_bound", "DELTA_CONCURRENT_APPEND"),
    ("delete_held", "DELTA_CONCURRENT_DELETE_READ"),
    ("append_elsewhere", None),
])
def test_a_commit_after_the_bound_read_conflicts_as_after_deltas_own_reads(spark, table, concurrent, conflict):
    """A commit between the read and this transaction's commit fails it exactly where Delta's reads would: the same
    app id, a file added in the bound, a file read removed; a file added outside the bound does not."""
    from delta.tables import DeltaTable

    scala, txn, predicates, read = _bound(spark, table, [DAY2], TimeRange("eventTime", NOON, NOON))
    assert read.held and read.done == 1
    if concurrent == "same_app":
        _append(spark, table.path, [("d", DAY1, NOON - dt.timedelta(days=1))], batch=2)
    elif concurrent == "append_in_bound":
        _append(spark, table.path, [("e", DAY2, NOON)], batch=0, app="backfill-8:events")
    elif concurrent == "delete_held":
        DeltaTable.forPath(spark, str(table.path)).delete("eventID = 'c'")
    else:
        _append(spark, table.path, [("f", DAY1, NOON - dt.timedelta(days=1))], batch=0, app="backfill-9:events")
    txn.updateSetTransaction(APP, 2, scala.some(0))
    _register_metrics(scala, txn, 0, 0, 0)

    def commit():
        return txn.commit(scala.seq([]), _merge_operation(scala, predicates))

    if conflict is None:
        assert commit() == 4
    else:
        with pytest.raises(Exception, match=conflict) as raised:
            commit()
        assert lost_commit_race(raised.value)  # the writers redo it from a fresh snapshot


def test_a_partition_value_delta_percent_encodes_leaves_the_reads_to_delta(spark, tmp_path):
    """A file whose path the log spells percent-encoded: no answer (the transaction reads through its snapshot)."""
    path = tmp_path / "sources"
    frame = spark.createDataFrame([("a", "s3:x y", NOON)], "eventID string, source string, eventTime timestamp")
    frame.write.format("delta").partitionBy("source").save(str(path))
    target = TableTarget("sources", path, ("source",), unique_key=("eventID", "source"))
    scala = _Scala(spark)
    txn = scala.delta("DeltaLog").forTable(spark._jsparkSession, str(path)).startTransaction()
    assert read_bound(scala, txn, target, APP, [], {"source": ["s3:x y"]}, None) is None


def test_a_small_batchs_rows_read_in_the_driver_are_what_spark_reads(spark, table):
    """The staged rows read back with pyarrow (a local file, strings and integers) hold the values Spark's read of
    the same files gives, partition values typed; a timestamp column or an object store leaves the read to Spark."""
    import deltalake
    import pyarrow as pa

    from spark_jobs.driver.write.staged import _read
    from spark_jobs.driver.write.staged_rows import read_locally

    adds = pa.table(deltalake.DeltaTable(str(table.path)).get_add_actions(flatten=False)).to_pylist()
    paths = [f"file:{table.path / add['path']}" for add in adds]
    values = [{"date": add["partition"]["date"].isoformat()} for add in adds]
    frame = spark.read.format("delta").load(str(table.path))
    types = dict(frame.dtypes)
    local = read_locally(paths, values, ["eventID", "date"], types, ("date",), "file")
    by_spark = _read(spark, table, frame, paths, ["eventID", "date"]).collect()
    assert sorted((r["eventID"], r["date"]) for r in local) == sorted((r.eventID, r.date) for r in by_spark) == [
        ("a", DAY1), ("b", DAY2), ("c", DAY2)]
    assert {r["file"] for r in local} == set(paths)
    assert read_locally(paths, values, ["eventID", "eventTime"], types, ("date",), "file") is None
    assert read_locally(paths, values, ["date"], types, ("date",), "file") is None  # no stored column: no row
    assert read_locally(["s3a://bucket/events/x.parquet"], values[:1], ["eventID"], types, ("date",), "file") is None


def test_the_keys_held_files_hold_read_in_the_driver_are_what_spark_finds(spark, table, monkeypatch):
    """The held files' keys read with pyarrow (local files, their partition values from the log), a few rows at a
    time or whole, are what Spark's broadcast join of the same files finds: a key in another date's file is not
    held; without a file's partition values, or off a local disk, Spark reads them."""
    import deltalake
    import pyarrow as pa

    from spark_jobs.driver.write import staged_rows
    from spark_jobs.driver.write.held_keys import KeyShape, file_name
    from spark_jobs.driver.write.staged import _HeldFiles, _scanned_keys

    monkeypatch.setattr(staged_rows, "_KEY_BATCH_ROWS", 1)
    adds = pa.table(deltalake.DeltaTable(str(table.path)).get_add_actions(flatten=False)).to_pylist()
    paths = [f"file:{table.path / add['path']}" for add in adds]
    known = _HeldFiles({file_name(p): 1 for p in paths},
                       {file_name(p): {"date": add["partition"]["date"].isoformat()} for p, add in zip(paths, adds)})
    frame = spark.read.format("delta").load(str(table.path))
    schema = frame.select("eventID", "date").schema
    keys = [("a", DAY1), ("b", DAY1), ("b", DAY2), ("c", DAY2), ("z", DAY2)]
    unknown = _HeldFiles(known.records, {})
    assert _scanned_keys(spark, table, frame, paths, keys, schema, known) == \
        _scanned_keys(spark, table, frame, paths, keys, schema, unknown) == {("a", DAY1), ("b", DAY2), ("c", DAY2)}
    shape = KeyShape.of(table.unique_key, table.partition_by, table.null_safe)
    types = dict(frame.dtypes)
    whole = staged_rows.keys_read_locally(paths, [known.partitions[file_name(p)] for p in paths], shape, types)
    assert sorted((partition, keys.to_pylist()) for partition, keys in whole) == [
        ((DAY1,), ["a"]), ((DAY2,), ["b"]), ((DAY2,), ["c"])]
    values = [known.partitions[file_name(p)] for p in paths]
    assert staged_rows.keys_found_locally(paths, values, shape, types, {(DAY1,): ["a", "b"], (DAY2,): ["c", "z"]}) == {
        ((DAY1,), "a"), ((DAY2,), "c")}
    assert staged_rows.keys_read_locally(paths, [None] * len(paths), shape, types) is None
    # A large batch's suspects: its rows whose key a held file holds or another of its rows repeats (here the held
    # file is staged twice: its key both repeats and is held); no other row is read.
    held_b = [p for p, add in zip(paths, adds) if add["partition"]["date"] == DAY2][:1]
    held_values = [known.partitions[file_name(held_b[0])]]
    rows, found = staged_rows.suspects_read_locally(paths + held_b, values + held_values, ["eventID", "date"], types,
                                                    ("date",), "file", shape, held_b, held_values)
    key = staged_rows.read_locally(held_b, held_values, ["eventID", "date"], types, ("date",), "file")[0]
    assert found == {((DAY2,), key["eventID"])}
    assert sorted((r["eventID"], r["date"], r["file"]) for r in rows) == [(key["eventID"], DAY2, held_b[0])] * 2
    assert staged_rows.suspects_read_locally(["s3a://bucket/events/x.parquet"], values[:1], ["eventID", "date"], types,
                                             ("date",), "file", shape, [], []) is None
    assert staged_rows.keys_found_locally(["s3a://bucket/events/x.parquet"], [{"date": "2024-03-01"}], shape, types,
                                          {(DAY1,): ["a"]}) is None
