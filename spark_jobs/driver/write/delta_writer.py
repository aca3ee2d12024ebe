"""Write one micro-batch to several Delta tables, each exactly once, safely beside other writers.

Every table is a Delta table written by delta-spark. A micro-batch reaches each table in one Delta
commit that carries the writer's idempotent-write marker: ``txnAppId`` = ``"<query id>:<table>"``
(the query id is stable for the life of a checkpoint) and ``txnVersion`` = the batch id. Delta
records the marker in the same atomic commit as the data, and skips a write whose version it
already holds for that app id; so a batch re-run after a crash adds nothing, and several writers
(the live job, a backfill, a reprocess: each its own checkpoint, hence its own app id) never skip
each other's batches.

Tables with a unique key (``cloudtrail_events``: ``eventID``) are written with an insert-only
``MERGE`` whose condition also names the batch's partition values, so Delta reads only those
partitions of the table (and only their key columns) and a concurrent writer conflicts only when it
touched the same partitions. For ``MERGE`` the marker is set through the SQL confs
``spark.databricks.delta.write.txnAppId`` / ``spark.databricks.delta.write.txnVersion`` (Delta's
DML commands read them; the ``txnAppId`` write option is only for ``DataFrameWriter``). A commit
that loses a race to another writer (``ConcurrentAppendException`` and friends) is retried with a
bounded exponential backoff; the retry re-reads the table, so a row the other writer committed
first is not inserted again.
"""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from spark_jobs.control.lake.commit_race import lost_commit_race
from spark_jobs.model.errors import UsageError
from spark_jobs.model.tables import DeliveryDateBound, DeliveryTimeBound
from spark_jobs.model.object_store import delta_rs_options
from spark_jobs.driver.session import session_conf

if TYPE_CHECKING:
    import datetime

    from spark_jobs.driver.write.staged import StagedInsert

log = logging.getLogger("spark_jobs")

# Table features every reader here supports: delta-rs (``deltalake`` 1.6) and DuckDB over its Arrow
# dataset read protocol (1, 2) tables. Deletion vectors would be readable by delta-rs but not by every
# engine, and insert-only writes never need them; column mapping is not used.
TABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "false",
}

STATS_COLUMNS_PROPERTY = "delta.dataSkippingStatsColumns"

# The suffix of the app ids of a writer's second series of commits to a table (see ExactlyOnceWriter).
REST_SERIES = ":rest"
T = TypeVar("T")

TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
# Delta repartitions a MERGE's output by the table's partition columns before writing (a shuffle of
# whole rows) unless this is false.
MERGE_REPARTITION_CONF = "spark.databricks.delta.merge.repartitionBeforeWrite.enabled"

# A batch's later deliveries of a key, up to this many, are collected to the driver and dropped with a
# broadcast anti join (a shuffle of the key columns only); more, and the whole batch is shuffled.
MOST_DUPLICATES_COLLECTED = 10_000


@dataclass(frozen=True)
class TableTarget:
    """Where and how one table is written.

    :param name: the table's name.
    :param path: its folder.
    :param partition_by: partition columns.
    :param unique_key: columns that identify a row; a row whose key the table (or an earlier row of
        the same batch) already holds is not inserted. Empty: every row is appended.
    :param first_by: among rows of one batch with the same key, the one with the lowest values of
        these columns is kept (a deterministic choice, so a re-run keeps the same row).
    :param null_safe: key columns that may be NULL (compared with ``<=>``, NULL equal to NULL); the
        others are compared with ``=``, which lets the merge's join reuse the partitioning of a batch ranked whole.
    :param stats_columns: the columns Delta keeps file statistics of (empty: Delta's default).
    :param write_mode: ``insert`` (insert-only by ``unique_key``, or append without one), ``upsert``
        (MERGE by ``unique_key``: update the rows it holds, insert the others) or ``complete`` (overwrite).
    :param route: which rows of a stateless job's transform go to the table (a SQL condition; ``None``: all).
    :param delivery_date_bound: the partition column the input files' delivery dates bound (the pipelined
        pass, :mod:`spark_jobs.driver.write.pipelined`), or ``None``.
    :param delivery_time_bound: the column (the same in every delivery of a key) the files' delivery times
        bound (the pipelined pass bounds the rows its MERGE matches by it), or ``None``.

    (The registry's :class:`~spark_jobs.model.tables.TableSpec` declares all of it; see its checks.)
    """

    name: str
    path: Path
    partition_by: tuple[str, ...]
    unique_key: tuple[str, ...] = ()
    first_by: tuple[str, ...] = ()
    null_safe: tuple[str, ...] = ()
    stats_columns: tuple[str, ...] = ()
    write_mode: str = "insert"
    route: str | None = None
    delivery_date_bound: DeliveryDateBound | None = None
    delivery_time_bound: DeliveryTimeBound | None = None

    @property
    def prune_by(self) -> tuple[str, ...]:
        """Partition columns that are part of the key: the batch's values of these bound the merge."""
        return tuple(c for c in self.partition_by if c in self.unique_key)


@dataclass(frozen=True)
class TimeRange:
    """An inclusive range of a timestamp column, ``start <= column <= end`` (aware datetimes).

    :param column: the column (a :class:`~spark_jobs.model.tables.DeliveryTimeBound`'s).
    :param start: the earliest value.
    :param end: the latest value.
    """

    column: str
    start: "datetime.datetime"
    end: "datetime.datetime"

    def conditions(self, alias: str = "") -> list[str]:
        """The range as SQL conditions on ``alias``'s column (the table's own, without one), with literal bounds
        (what Delta skips files by)."""
        column = f"{alias}.`{self.column}`" if alias else f"`{self.column}`"
        return [f"{column} >= {sql_literal(self.start)}", f"{column} <= {sql_literal(self.end)}"]


def create_tables(spark: SparkSession, targets: list[TableTarget],
                  schemas: dict[str, StructType] | Callable[[], dict[str, StructType]]) -> None:
    """Create every target that does not exist yet as an empty Delta table (before the first batch).

    :param schemas: each missing target's schema, by table name (an existing target needs none); or a function
        giving them, called only when a target is missing (deriving them analyses a job's transform: ~2 s in a
        new JVM, for every run of a job whose tables exist).

    Safe when several writers start at once: Delta's first commit (version 0) is created exclusively,
    so one writer creates the table and the others find it. (A table folder in the previous version's
    file-sink layout is refused before, by the runner: :func:`spark_jobs.driver.lake_tools.refuse_old_layout`.)
    """
    from delta.tables import DeltaTable

    for target in targets:
        if (target.path / "_delta_log").is_dir():
            _wait_for_first_commit(target)  # another writer may be creating it right now
            continue
        if callable(schemas):
            schemas = schemas()
        builder = (DeltaTable.createIfNotExists(spark).location(str(target.path))
                   .addColumns(_nullable(schemas[target.name])).partitionedBy(*target.partition_by))
        properties = dict(TABLE_PROPERTIES)
        if target.stats_columns:
            properties[STATS_COLUMNS_PROPERTY] = ",".join(target.stats_columns)
        for key, value in properties.items():
            builder = builder.property(key, value)
        try:
            builder.execute()
            log.info("created Delta table %s at %s", target.name, target.path)
        except Exception:
            # Another writer created it first (version 0 exists) or is creating it (its folder is not
            # empty yet has no version 0: Delta refuses to create there); wait for its first commit.
            if not (target.path / "_delta_log").is_dir() or not _wait_for_first_commit(target, raise_=False):
                raise
            log.info("Delta table %s was created by another writer", target.name)


FIRST_COMMIT_WAIT_SECONDS = 60.0


def _wait_for_first_commit(target: TableTarget, raise_: bool = True,
                           timeout: float = FIRST_COMMIT_WAIT_SECONDS) -> bool:
    """Wait until ``target``'s Delta log holds a commit (a writer that started at the same time creates
    version 0; an old table may have no version 0 left, once Delta cleaned up its log behind a checkpoint).

    :returns: whether it does.
    :raises UsageError: (``raise_``) if it does not after ``timeout`` seconds, naming the folder.
    """
    deadline = time.monotonic() + timeout
    while not _has_commit(target.path / "_delta_log"):
        if time.monotonic() >= deadline:
            if raise_:
                raise UsageError(f"table {target.name} at {target.path} has a _delta_log without its first "
                                 f"commit after {timeout:.0f} s: a creation was interrupted; if no other writer "
                                 "is starting, delete the empty table folder and start again")
            return False
        time.sleep(0.2)
    return True


def _has_commit(log_dir: Path) -> bool:
    """Whether a Delta log folder holds a commit (``<version>.json``) or a checkpoint."""
    try:
        if isinstance(log_dir, Path):
            with os.scandir(log_dir) as entries:
                names = [e.name for e in entries]
        else:  # a lake on an object store (a UPath)
            names = [p.name for p in log_dir.iterdir()]
    except FileNotFoundError:  # a creation that was rolled back under us: another writer may start again
        return False
    return any(name == "_last_checkpoint" or (name[:20].isdigit() and name.endswith((".json", ".parquet")))
               for name in names)


def _nullable(schema: StructType) -> StructType:
    """``schema`` with every top-level column nullable (Delta would enforce NOT NULL as an invariant)."""
    from pyspark.sql.types import StructField

    return StructType([StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])


@dataclass
class RetryPolicy:
    """How often and how long to retry a write that lost a commit race to another writer.

    :param attempts: tries in all (the first included).
    :param first_delay: seconds before the first retry; doubled each time, with jitter.
    :param max_delay: at most this many seconds between tries.
    """

    attempts: int = 8
    first_delay: float = 0.5
    max_delay: float = 15.0
    sleep: object = field(default=time.sleep, repr=False)

    def delay(self, retry: int) -> float:
        base = min(self.max_delay, self.first_delay * (2 ** retry))
        return base * (0.5 + random.random() / 2)


def commit_retrying(attempt: Callable[[], T], retry: RetryPolicy, what: str,
                    on_retry: Callable[[], None] | None = None) -> T:
    """Run ``attempt`` (a read of the table and one Delta commit) until it commits, redoing it from the start
    after a commit that lost a race to another writer (:func:`~spark_jobs.control.lake.commit_race.lost_commit_race`),
    with :class:`RetryPolicy`'s backoff.

    Every exactly-once write (:meth:`ExactlyOnceWriter.write`) and a reprocess's rebuild of partitions
    (:func:`spark_jobs.driver.reprocess.rebuild`) commit through this one loop, and so does ``lake optimize``
    (:func:`spark_jobs.driver.lake_tools.optimize`).

    :param what: names the commit in the log line of each retry (``batch 7, table cloudtrail_events``).
    :param on_retry: called before each retry (a counter).
    :raises: the attempt's error when it is not a conflict, or after the last try.
    """

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None:
            on_retry()
        exc = state.outcome.exception()
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        log.warning("%s: commit conflict with another writer (try %d of %d), retrying in %.1f s: %s", what,
                    state.attempt_number, retry.attempts, state.upcoming_sleep, first)

    return Retrying(retry=retry_if_exception(lost_commit_race), stop=stop_after_attempt(retry.attempts),
                    wait=lambda state: retry.delay(state.attempt_number - 1), sleep=retry.sleep,
                    before_sleep=before_sleep, reraise=True)(attempt)


class ExactlyOnceWriter:
    """Writes each micro-batch to every target table at most once per batch id, across restarts.

    :param spark: the session to write with (``foreachBatch``'s own session).
    :param targets: the tables.
    :param app_id: a stable id of this writer: the checkpoint's query id. Each table's ``txnAppId``
        is ``"<app_id>:<table>"``; a second series of commits, ``"<app_id>:<table>:rest"``, holds the rest
        of a batch whose first commit to the table was the pipelined pass's
        (:mod:`spark_jobs.driver.write.pipelined`), so that Delta does not take it for the batch it holds.
    :param retry: what to do when another writer commits first.
    """

    def __init__(self, spark: SparkSession, targets: list[TableTarget], app_id: str,
                 retry: RetryPolicy | None = None):
        self._spark = spark
        self._targets = {t.name: t for t in targets}
        self._app_id = app_id
        self.retry = retry or RetryPolicy()
        self.retries = 0  # conflicts retried so far, for the run's summary and tests

    def txn_app_id(self, table: str, rest: bool = False) -> str:
        """The Delta app id of this writer's commits to ``table``: ``<app id>:<table>``, or, for the second
        series (``rest``), ``<app id>:<table>:rest`` (see :data:`REST_SERIES`)."""
        return f"{self._app_id}:{table}{REST_SERIES if rest else ''}"

    def holds(self, batch_id: int, table: str, rest: bool = False) -> bool:
        """Whether ``table`` already holds ``batch_id`` from this writer's series (its Delta log says so)."""
        done = self._txn_version(self._targets[table], rest)
        return done is not None and done >= batch_id

    def write(self, batch_id: int, table: str, frame: DataFrame, prune_values: dict[str, list] | None = None,
              rows: int = 0, *, ranked: bool = False, repartition: bool = True, rest: bool = False,
              time_range: TimeRange | None = None) -> int:
        """Commit ``frame`` to ``table`` as micro-batch ``batch_id``, unless this writer already did.

        A table with a unique key gets only the rows whose key it does not hold yet (the first of a
        batch's duplicates by ``first_by``); ``prune_values`` (partition column -> the batch's values)
        limits what the merge reads. A table without a key gets every row appended (``rows`` of them).
        An ``upsert`` table also gets the rows whose key it holds updated; a ``complete`` table is
        overwritten by ``frame``. Conflicts with other writers are retried (each retry logged).

        :param ranked: ``frame`` holds one row per key already (the later deliveries were dropped).
        :param repartition: let Delta repartition a MERGE's output by the partition columns (fewer,
            larger files; a shuffle of whole rows). ``False`` when ``frame`` was shuffled by key already.
        :param rest: commit under the second series (:data:`REST_SERIES`, see :meth:`txn_app_id`).
        :param time_range: every row of ``frame`` lies in it, and so does every row of the table with the
            same key (its column is the same in every delivery of a key): the MERGE reads only the table's
            files whose statistics of that column reach into it.

        :returns: rows inserted (updated too, for an upsert; 0 when this writer had already committed
            this batch to the table).
        """
        target = self._targets[table]

        def attempt() -> int:
            if target.write_mode == "complete":
                return self._append(batch_id, target, frame, rows, mode="overwrite", rest=rest)
            if target.unique_key:
                return self._merge(batch_id, target, frame, prune_values or {}, ranked, repartition, rest,
                                   time_range)
            return self._append(batch_id, target, frame, rows, rest=rest)

        return commit_retrying(attempt, self.retry, f"batch {batch_id}, table {table}", on_retry=self._count_retry)

    def insert_staged(self, batch_id: int, table: str, frame: DataFrame, prune_values: dict[str, list],
                      time_range: TimeRange | None = None) -> StagedInsert:
        """Commit ``frame`` to the insert table ``table`` as micro-batch ``batch_id`` like :meth:`write`'s MERGE
        (only the rows whose key the table lacks, the first of a batch's deliveries by ``first_by``), but
        written first and checked by key after, so that the batch's rows are never shuffled
        (:mod:`spark_jobs.driver.write.staged`). Conflicts with other writers are retried.

        :param prune_values: partition column -> the batch's values (every row's, and every row's of the table
            with one of its keys).
        :param time_range: as :meth:`write`'s.
        :returns: what it did (``inserted`` 0 when this writer had already committed this batch to the table).
        """
        from spark_jobs.driver.write.staged import staged_insert

        target = self._targets[table]
        values = {column: prune_values[column] for column in target.prune_by if prune_values.get(column) is not None}
        bound = [_in_list(column, column_values) for column, column_values in values.items()]
        bound += time_range.conditions() if time_range is not None else []

        def attempt() -> StagedInsert:
            return staged_insert(frame.sparkSession, target, frame, batch_id, self.txn_app_id(table), bound,
                                 MOST_DUPLICATES_COLLECTED, prune_values=values, time_range=time_range)

        return commit_retrying(attempt, self.retry, f"batch {batch_id}, table {table}", on_retry=self._count_retry)

    def _count_retry(self) -> None:
        self.retries += 1

    def _append(self, batch_id: int, target: TableTarget, frame: DataFrame, rows: int, mode: str = "append",
                rest: bool = False) -> int:
        if self.holds(batch_id, target.name, rest):
            return 0
        (frame.write.format("delta").mode(mode)
         .option("txnAppId", self.txn_app_id(target.name, rest)).option("txnVersion", batch_id)
         .save(str(target.path)))
        return rows

    def _merge(self, batch_id: int, target: TableTarget, frame: DataFrame, prune_values: dict[str, list],
               ranked: bool = False, repartition: bool = True, rest: bool = False,
               time_range: TimeRange | None = None) -> int:
        from delta.tables import DeltaTable

        source = first_of_each_key(target, frame) if target.first_by and not ranked else frame
        condition = [f"t.`{c}` <=> s.`{c}`" if c in target.null_safe else f"t.`{c}` = s.`{c}`"
                     for c in target.unique_key]
        for column in target.prune_by:
            values = prune_values.get(column)
            if values is not None:
                condition.insert(0, _in_list(column, values, "t"))
        if time_range is not None:
            condition[:0] = time_range.conditions("t")
        session = frame.sparkSession
        conf = session.conf
        conf.set(TXN_APP_ID_CONF, self.txn_app_id(target.name, rest))
        conf.set(TXN_VERSION_CONF, str(batch_id))
        try:
            merge = (DeltaTable.forPath(session, str(target.path)).alias("t")
                     .merge(source.alias("s"), " AND ".join(condition)))
            if target.write_mode == "upsert":
                merge = merge.whenMatchedUpdateAll()
            with session_conf(session, {} if repartition else {MERGE_REPARTITION_CONF: "false"}):
                result = merge.whenNotMatchedInsertAll().execute()
        finally:
            conf.unset(TXN_APP_ID_CONF)
            conf.unset(TXN_VERSION_CONF)
        rows = result.collect() if result is not None else []
        # Delta returns no row when it skipped the merge: this writer already committed this batch.
        return int(rows[0]["num_inserted_rows"]) + int(rows[0]["num_updated_rows"]) if rows else 0

    def _txn_version(self, target: TableTarget, rest: bool = False) -> int | None:
        """The last batch id this writer committed to ``target`` in a series (from the Delta log), or ``None``."""
        import deltalake

        table = deltalake.DeltaTable(str(target.path), storage_options=delta_rs_options(target.path))
        version = table.transaction_version(self.txn_app_id(target.name, rest))
        return None if version is None else int(version)


def _in_list(column: str, values: list, alias: str = "") -> str:
    """``column IN (<values as literals>)`` (``false`` for no value), on ``alias``'s column if given."""
    literals = ", ".join(sql_literal(v) for v in sorted(values))
    name = f"{alias}.`{column}`" if alias else f"`{column}`"
    return f"{name} IN ({literals})" if values else "false"


def first_of_each_key(target: TableTarget, frame: DataFrame, most: int | None = None) -> DataFrame:
    """``frame`` without the later deliveries of a key: of a batch's rows with one key, the one first by ``first_by``.

    The duplicates are found from the key and ``first_by`` columns alone (a shuffle of those columns,
    not of whole rows) and collected, since a batch rarely holds many: none, and ``frame`` is returned
    as it is; up to ``most`` (:data:`MOST_DUPLICATES_COLLECTED`), and they are dropped with a
    broadcast anti join. More than that, and the whole batch is ranked by key in one shuffle (which the
    merge's join then reuses). ``frame`` is read more than once: it should be cached.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    most = MOST_DUPLICATES_COLLECTED if most is None else most
    first = Window.partitionBy(*target.unique_key).orderBy(*target.first_by)
    identity = list(dict.fromkeys(target.unique_key + target.first_by))
    ranked = frame.select(*identity).withColumn("_rank", F.row_number().over(first))
    later = ranked.where("_rank > 1").drop("_rank").limit(most + 1).collect()
    if not later:
        return frame
    if len(later) > most:
        log.info("table %s: more than %d later deliveries in one batch, ranking the whole batch", target.name, most)
        return rank_whole_batch(target, frame)
    drop = frame.sparkSession.createDataFrame(later, frame.select(*identity).schema)
    return frame.join(F.broadcast(drop), [frame[c].eqNullSafe(drop[c]) for c in identity], "left_anti")


def rank_whole_batch(target: TableTarget, frame: DataFrame) -> DataFrame:
    """``frame`` without the later deliveries of a key, found by ranking every row by key in one shuffle
    of whole rows (no earlier read of ``frame`` needed)."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    first = Window.partitionBy(*target.unique_key).orderBy(*target.first_by)
    return frame.withColumn("_rank", F.row_number().over(first)).where("_rank = 1").drop("_rank")


def sql_literal(value) -> str:
    """A SQL literal of a partition value (dates, strings, numbers)."""
    import datetime

    if isinstance(value, datetime.datetime):  # an aware datetime: its instant, whatever the session's zone
        return f"TIMESTAMP'{value.astimezone(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"
    if isinstance(value, datetime.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
