"""Several writers committing to one Delta table on S3 at once (the real S3-compatible server): exact.

Delta's commit is the exclusive create of ``_delta_log/<version>.json``. On S3 the project's log store
(``spark_jobs/launch/java/S3ConditionalLogStore.java``) makes it a conditional put (``If-None-Match: *``),
the same fence delta-rs 1.x uses, so Spark writers and delta-rs writers (``ops_audit``, the progress
history) are safe together: of two commits of one version, one wins and the other retries on top.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.helpers.cloudtrail import file_name, overlapping_landings
from tests.helpers.s3_fixtures import at_once

EVENTS, QUARANTINE = "cloudtrail_events", "cloudtrail_quarantine"


def test_the_log_store_refuses_a_second_commit_of_a_version(s3_spark, s3_env, bucket):
    from py4j.protocol import Py4JJavaError

    table = f"{bucket('fence')}/t"
    s3_spark.range(3).write.format("delta").save(table)
    jvm = s3_spark._jvm
    hadoop = s3_spark.sparkContext._jsc.hadoopConfiguration()
    assert s3_spark.sparkContext.getConf().get("spark.delta.logStore.s3a.impl") == "spark_jobs.delta.S3ConditionalLogStore"
    store = jvm.spark_jobs.delta.S3ConditionalLogStore(hadoop)
    commit = jvm.org.apache.hadoop.fs.Path(f"{table}/_delta_log/00000000000000000000.json")
    with pytest.raises(Py4JJavaError) as refused:
        store.write(commit, jvm.java.util.ArrayList(['{"commitInfo":{}}']).iterator(), False, hadoop)
    assert refused.value.java_exception.getClass().getName() == "java.nio.file.FileAlreadyExistsException"
    assert s3_spark.read.format("delta").load(table).count() == 3  # the first commit stands


def test_spark_and_delta_rs_commit_to_one_table_at_once(s3_spark, s3_env, bucket):
    from deltalake import DeltaTable, write_deltalake

    from spark_jobs.model.object_store import delta_rs_options

    table = f"{bucket('mixed')}/t"
    options = delta_rs_options(table)
    schema = pa.schema([("writer", pa.string()), ("n", pa.int64())])
    write_deltalake(table, pa.Table.from_pylist([], schema=schema), storage_options=options)

    def spark_writer():
        for n in range(6):
            s3_spark.createDataFrame([("spark", n)], "writer string, n long").write.format("delta") \
                .mode("append").save(table)

    def delta_rs_writer():
        for n in range(6):
            write_deltalake(table, pa.Table.from_pylist([{"writer": "delta-rs", "n": n}], schema=schema),
                            mode="append", storage_options=options)

    at_once(spark=spark_writer, delta_rs=delta_rs_writer)
    dt = DeltaTable(table, storage_options=options)
    rows = sorted((r["writer"], r["n"]) for r in dt.to_pyarrow_table().to_pylist())
    assert rows == sorted([("spark", n) for n in range(6)] + [("delta-rs", n) for n in range(6)])
    assert dt.version() == 12 and sorted(h["version"] for h in dt.history()) == list(range(13))
    assert s3_spark.read.format("delta").load(table).count() == 12


def test_two_job_writers_at_once_over_overlapping_input_are_exact(s3, s3_env, bucket, run_job_s3, tmp_path):
    """The live job and a backfill (own checkpoint, own txnAppId) read one bucket, commit to one lake at once."""
    landing = tmp_path / "landing"
    own, extra = overlapping_landings(landing, files=4, records_per_file=10)
    trail, lake = bucket("trail"), f"{bucket('lake')}/lake"
    s3.upload(landing, trail.removeprefix("s3a://"))
    # The backfill reads everything (the job's own objects too: the same keys, the same bad files).
    results = at_once(live=lambda: run_job_s3(f"{trail}/own", lake, maxFilesPerTrigger="6"),
                      backfill=lambda: run_job_s3(trail, lake, writer="backfill", maxFilesPerTrigger="6"))

    from deltalake import DeltaTable

    from spark_jobs.model.object_store import delta_rs_options

    events = DeltaTable(f"{lake}/tables/{EVENTS}", storage_options=delta_rs_options(lake))
    ids = events.to_pyarrow_table(columns=["eventID"]).column("eventID").to_pylist()
    expected = set(own.good_event_ids) | set(extra.good_event_ids)
    assert len(ids) == len(expected) == len(own.good_event_ids) + 20 and set(ids) == expected
    assert sum(r.rows[EVENTS] for r in results.values()) == len(expected)  # each row inserted by one writer
    quarantine = DeltaTable(f"{lake}/tables/{QUARANTINE}", storage_options=delta_rs_options(lake))
    quarantined = sorted(((file_name(r["source_file"]), r["record_index"], r["reason"])
                          for r in quarantine.to_pyarrow_table().to_pylist()), key=str)
    assert quarantined == sorted(((b.path.name, b.record_index, b.reason) for b in own.bad), key=str)
