"""The guard of the staged insert (:mod:`spark_jobs.driver.write.staged`, with ``held_files`` and ``checkpoints``):
it reaches into Delta's JVM transaction API through py4j, which Delta does not promise to keep. These tests fail,
naming what moved, when a new delta-spark changes a member the staged insert calls or what its insert-only ``MERGE``
records; docs/delta-upgrades.md says how to re-verify and where to change the code.

1. the delta-spark jar and wheel are the version the staged insert was verified on;
2. every JVM member it calls exists with the parameter types it passes (Java reflection);
3. on the same table and batch, its commit equals Delta's own insert-only ``MERGE``'s: the rows, the operation and
   the names of its metrics in the table's history, the writer's transaction version, and a repeat is skipped;
4. its checkpoint hook is found and taken out of the commit (Delta's post-commit ``CheckpointHook``).
"""

from __future__ import annotations

import datetime as dt
import json
from importlib.metadata import version

from spark_jobs.driver.write import checkpoints
from spark_jobs.driver.write.delta_writer import TXN_APP_ID_CONF, TXN_VERSION_CONF, TableTarget, _in_list, \
    first_of_each_key
from spark_jobs.driver.write.staged import VERIFIED_DELTA, staged_insert
from spark_jobs.launch.jars import JARS

DAY = dt.date(2024, 3, 2)
SCHEMA = "eventID string, date date, eventTime timestamp, source string"

# Each JVM member the staged insert calls: class -> member -> the parameter types it is called with.
CALLED = {
    "org.apache.spark.sql.delta.DeltaLog": {
        "forTable": ["org.apache.spark.sql.SparkSession", "java.lang.String"],
        "startTransaction": [],
        "checkpoint": ["org.apache.spark.sql.delta.Snapshot", "scala.Option"],
        "getSnapshotAt": ["long", "scala.Option", "scala.Option", "boolean"]},
    "org.apache.spark.sql.delta.OptimisticTransaction": {
        "txnVersion": ["java.lang.String"],
        "filterFiles": ["scala.collection.immutable.Seq", "boolean"],
        "writeFiles": ["org.apache.spark.sql.Dataset"],
        "updateSetTransaction": ["java.lang.String", "long", "scala.Option"],
        "registerSQLMetrics": ["org.apache.spark.sql.SparkSession", "scala.collection.immutable.Map"],
        "commit": ["scala.collection.immutable.Seq", "org.apache.spark.sql.delta.DeltaOperations$Operation"],
        "readVersion": [],
        "readTxn": [],
        "trackReadPredicates": ["scala.collection.immutable.Seq", "boolean", "boolean"],
        "trackFilesRead": ["scala.collection.immutable.Seq"],
        "postCommitHooks": [],
        "snapshot": []},
    "org.apache.spark.sql.delta.actions.AddFile": {"path": [], "numLogicalRecords": [], "partitionValues": []},
    "org.apache.spark.sql.delta.actions.Action": {"fromJson": ["java.lang.String"]},
    "org.apache.spark.sql.delta.util.DeltaFileOperations": {"absolutePath": ["java.lang.String", "java.lang.String"]},
    "org.apache.spark.sql.delta.DeltaConfigs": {"CHECKPOINT_INTERVAL": []},
    "org.apache.spark.sql.execution.metric.SQLMetrics": {"createMetric": ["org.apache.spark.SparkContext",
                                                                          "java.lang.String"]},
}
CONSTRUCTED = {  # class -> the parameter types of the constructor called
    "org.apache.spark.sql.delta.DeltaOperations$Merge": ["scala.Option"] * 4 + ["scala.collection.immutable.Seq"] * 3,
    "org.apache.spark.sql.delta.DeltaOperations$MergePredicate": ["scala.Option", "java.lang.String"],
}


def _class(spark, name: str):
    return spark._jvm.py4j.reflection.ReflectionUtil.classForName(name)


def test_delta_spark_is_the_version_the_staged_insert_was_verified_on():
    jar = next(j for j in JARS if j.artifact.startswith("delta-spark"))
    assert (version("delta-spark"), jar.version) == (VERIFIED_DELTA, VERIFIED_DELTA), (
        f"delta-spark is {version('delta-spark')} (wheel) / {jar.version} (jar), the staged insert was verified on "
        f"{VERIFIED_DELTA}: re-verify it as docs/delta-upgrades.md says, then set staged.VERIFIED_DELTA")


def test_every_jvm_member_the_staged_insert_calls_exists_with_its_parameter_types(spark):
    moved = []
    for name, members in CALLED.items():
        found: dict[str, list[list[str]]] = {}
        for method in _class(spark, name).getMethods():
            found.setdefault(method.getName(), []).append([p.getName() for p in method.getParameterTypes()])
        for member, parameters in members.items():
            if parameters not in found.get(member, []):
                moved.append(f"{name}.{member}({', '.join(parameters)}): now {found.get(member, 'gone')}")
    for name, parameters in CONSTRUCTED.items():
        now = [[p.getName() for p in c.getParameterTypes()] for c in _class(spark, name).getConstructors()]
        if parameters not in now:
            moved.append(f"new {name}({', '.join(parameters)}): now {now}")
    assert moved == [], "Delta's transaction API moved under the staged insert (docs/delta-upgrades.md):\n" + \
        "\n".join(moved)


def _table(spark, path, rows):
    spark.createDataFrame(rows, SCHEMA).write.format("delta").partitionBy("date").save(str(path))


def _last_commit(spark, path) -> dict:
    entry = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()
    return {"version": entry["version"], "operation": entry["operation"],
            "metrics": sorted(entry["operationMetrics"]), "inserted": entry["operationMetrics"]["numTargetRowsInserted"],
            "output": entry["operationMetrics"]["numOutputRows"]}


def _txn_version(path, app_id: str) -> int | None:
    found = None
    for log in sorted((path / "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            txn = json.loads(line).get("txn")
            if txn and txn["appId"] == app_id:
                found = txn["version"]
    return found


def test_the_staged_insert_commits_what_deltas_insert_only_merge_commits(spark, tmp_path):
    """One table held e1 and e2; the batch brings e2 again (held: left out), e3 twice (the first by ``source``
    kept) and e4: both ways insert e3 (from "a") and e4, record a MERGE of 2 inserted rows with the same metric
    names, and mark batch 7 as the writer's; the same batch again is skipped by both."""
    noon = dt.datetime(2024, 3, 2, 12, tzinfo=dt.UTC)
    held = [("e1", DAY, noon, "old"), ("e2", DAY, noon, "old")]
    batch = spark.createDataFrame([("e2", DAY, noon, "new"), ("e3", DAY, noon, "b"), ("e3", DAY, noon, "a"),
                                   ("e4", DAY, noon, "c")], SCHEMA)
    app_id = "query-1:events"
    staged_path, merged_path = tmp_path / "staged", tmp_path / "merged"
    for path in (staged_path, merged_path):
        _table(spark, path, held)
    staged = TableTarget("events", staged_path, ("date",), unique_key=("eventID", "date"), first_by=("source",))
    merged = TableTarget("events", merged_path, ("date",), unique_key=("eventID", "date"), first_by=("source",))

    done = staged_insert(spark, staged, batch, 7, app_id, [_in_list("date", [DAY])], 100, {"date": [DAY]}, None)

    def merge():
        from delta.tables import DeltaTable

        spark.conf.set(TXN_APP_ID_CONF, app_id)
        spark.conf.set(TXN_VERSION_CONF, "7")
        try:
            DeltaTable.forPath(spark, str(merged_path)).alias("t").merge(
                first_of_each_key(merged, batch).alias("s"), "t.date IN (DATE'2024-03-02') AND t.eventID = s.eventID "
                "AND t.date = s.date").whenNotMatchedInsertAll().execute()
        finally:
            spark.conf.unset(TXN_APP_ID_CONF)
            spark.conf.unset(TXN_VERSION_CONF)

    merge()
    rows = {str(path): sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect())
            for path in (staged_path, merged_path)}
    assert rows[str(staged_path)] == rows[str(merged_path)]
    assert sorted((r[0], r[3]) for r in rows[str(staged_path)]) == [("e1", "old"), ("e2", "old"), ("e3", "a"),
                                                                    ("e4", "c")]
    assert (done.inserted, done.left_out, done.version) == (2, 2, 1)
    ours, deltas = _last_commit(spark, staged_path), _last_commit(spark, merged_path)
    assert {k: ours[k] for k in ("version", "operation", "inserted", "output")} == {
        k: deltas[k] for k in ("version", "operation", "inserted", "output")} == {
        "version": 1, "operation": "MERGE", "inserted": "2", "output": "2"}
    assert set(ours["metrics"]) == set(deltas["metrics"]), (
        f"Delta's MERGE records other metrics than the staged insert: only Delta's {set(deltas['metrics']) - set(ours['metrics'])}, "
        f"only ours {set(ours['metrics']) - set(deltas['metrics'])} (staged._register_metrics)")
    assert _txn_version(staged_path, app_id) == _txn_version(merged_path, app_id) == 7

    again = staged_insert(spark, staged, batch, 7, app_id, [_in_list("date", [DAY])], 100, {"date": [DAY]}, None)
    merge()
    assert (again.inserted, again.version) == (0, None)
    assert _last_commit(spark, staged_path)["version"] == _last_commit(spark, merged_path)["version"] == 1


def test_the_checkpoint_hook_is_found_and_taken_out_of_a_transaction(spark, tmp_path):
    """A Delta whose post-commit hooks moved would quietly write checkpoints inside the commits again
    (``checkpoints.defer`` falls back to that): here it must find the hook and remove it."""
    _table(spark, tmp_path / "t", [("e1", DAY, None, "old")])
    txn = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(tmp_path / "t")) \
        .startTransaction()
    hooks = lambda: [str(h.name()) for h in spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(  # noqa: E731
        txn.postCommitHooks())]
    assert "Post commit checkpoint trigger" in hooks(), hooks()
    assert checkpoints.defer(spark._jvm, txn) is True
    assert "Post commit checkpoint trigger" not in hooks()

