"""The insert-only write by key of a large batch: its rows written first, their keys checked after, one Delta commit.

Delta's insert-only ``MERGE`` inserts every source row whose key the table lacks, the source's own
duplicates included, so its source must hold one row per key first: a ranking of the whole batch by
key, which shuffles every ~1 KB row though almost no key repeats (``python -m spark_jobs bench --only
write_shapes``: +8.8 s per million rows over a plain append). This module does the same insert-only
write with Delta's own transaction API instead (``OptimisticTransaction``, which ``MERGE`` itself uses),
in this order:

1. the transaction starts on the table's newest snapshot; a batch this writer committed already
   (its ``txnAppId``/``txnVersion``) is skipped, as Delta skips a MERGE;
2. the table's files whose statistics reach into the write's bound (the batch's dates, its delivery
   times: the same predicates as the MERGE's condition) are looked up through the transaction, which
   records that read: a concurrent commit that adds a file the bound selects makes this commit fail
   with Delta's usual conflict, and the writer's retry loop does it all again;
3. the batch's rows are written into the table's folder (``writeFiles``: one pipelined Spark job, Delta's
   file statistics included), not yet committed: no reader sees them;
4. only the key and ``first_by`` columns of those new files are read back (a columnar scan of a few
   columns) to find the rows to leave out: a batch's later deliveries of a key and the keys the table holds
   in the files of step 2; nearly always none. Files on a local disk are read in the driver with pyarrow
   (:mod:`~spark_jobs.driver.write.staged_rows`: up to a few million rows, the rest of the key and ``first_by``
   columns only for the rows whose key repeats or is held); else Spark reads them (ranked by key: a shuffle of
   those columns only);
5. the new files that hold such rows are written again without them (a file-sized rewrite, nothing
   reparsed; more than :data:`~spark_jobs.driver.write.delta_writer.MOST_DUPLICATES_COLLECTED` such rows,
   and the new rows are ranked whole, as ``MERGE``'s source would have been);
6. one commit: the new files, the writer's ``txnAppId``/``txnVersion``, and the operation recorded as
   the insert-only ``MERGE`` it is (its predicate and ``numTargetRowsInserted`` in the table's history,
   as a ``MERGE`` writes them).

The result is the MERGE's (one row per key at every version of the table, exactly once per batch id)
at the cost of an append and a scan of a few columns. Files of an attempt that did not commit (a conflict,
a crash) are never in the log: Delta's readers do not see them and ``VACUUM`` removes them; this module
deletes them itself when an attempt fails. Used by the pipelined pass
(:mod:`spark_jobs.driver.write.pipelined`) for its one bounded table; the smaller writes keep the MERGE.

Why our own: neither Delta nor Spark offers an insert-only write of a source with duplicates that does
not shuffle the source; Delta's ``OptimisticTransaction`` (``startTransaction``, ``filterFiles``,
``writeFiles``, ``updateSetTransaction``, ``commit``) is the API its own commands are built on, reached
here through py4j, pinned to :data:`VERIFIED_DELTA`: ``tests/spark_jobs/driver/write/test_staged_delta_api.py``
fails, naming what moved, when a new Delta changes a member called here or what its MERGE records
(docs/delta-upgrades.md says how to re-verify).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from spark_jobs.driver.write import checkpoints
from spark_jobs.driver.write.held_files import read_bound
from spark_jobs.driver.write.held_keys import HeldKeys, KeyShape, file_name, keys_of_table
from spark_jobs.driver.write.staged_rows import (MOST_ROWS_CHECKED_LOCALLY, keys_found_locally, keys_read_locally,
                                                 read_locally, suspects_read_locally)

# ``"TableTarget"`` and ``"TimeRange"`` below are :mod:`spark_jobs.driver.write.delta_writer`'s, which calls this
# module (not imported here, so that the two do not import each other).
log = logging.getLogger("spark_jobs")

#: The delta-spark version whose transaction API and MERGE this module was verified against.
VERIFIED_DELTA = "4.4.0"

_FILE = "_staged_file"
_RANK = "_rank"


@dataclass(frozen=True)
class StagedInsert:
    """What one staged insert did.

    :param inserted: rows committed (0 when this writer had committed the batch already).
    :param staged: rows the batch's files held before the rows left out (its carried rows).
    :param left_out: later deliveries in the batch and keys the table held, left out.
    :param version: the table version committed (``None``: skipped, committed before).
    """

    inserted: int
    staged: int = 0
    left_out: int = 0
    version: int | None = None


@dataclass(frozen=True)
class _HeldFiles:
    """What the Delta log says of the table's files in a batch's bound, by file name.

    :param records: each file's rows (``None``: not recorded).
    :param partitions: each file's partition values (column -> text; ``None``: not known).
    """

    records: dict[str, int | None]
    partitions: dict[str, dict | None]


class _Scala:
    """The few Scala values the transaction API takes, made through py4j.

    py4j asks the JVM about every dotted part of ``jvm.a.b.C`` and about a static method before calling it: one
    round trip each. A batch made ~1,500 of them, most to find the same few classes again (for each file in
    the bound, each table's file and each metric), so :meth:`member` finds each static method once.
    """

    def __init__(self, spark: SparkSession):
        self.jvm = spark._jvm
        self.spark = spark
        self._members: dict[str, object] = {}

    def member(self, name: str):
        """The JVM class or static member ``name`` (``scala.Option.apply``), looked up once per instance."""
        found = self._members.get(name)
        if found is None:
            found = self.jvm
            for part in name.split("."):
                found = getattr(found, part)
            self._members[name] = found
        return found

    def seq(self, items: list):
        return self.member("PythonUtils.toSeq")(items)

    def some(self, value):
        return self.member("scala.Option.apply")(value)

    def to_list(self, seq) -> list:
        return list(self.member("scala.jdk.javaapi.CollectionConverters.asJava")(seq))

    def as_dict(self, scala_map) -> dict:
        """A Scala ``Map`` as a Python dict."""
        return dict(self.member("scala.jdk.javaapi.CollectionConverters.asJava")(scala_map))

    def delta(self, name: str):
        return self.member(f"org.apache.spark.sql.delta.{name}")


def staged_insert(spark: SparkSession, target: "TableTarget", frame: DataFrame, batch_id: int, app_id: str,
                  bound: list[str], most_left_out: int, prune_values: dict[str, list] | None = None,
                  time_range: "TimeRange | None" = None) -> StagedInsert:
    """Insert ``frame``'s rows whose key ``target`` lacks (the first of each key by ``first_by``), in one commit
    under ``app_id``/``batch_id`` (see the module docstring).

    :param bound: SQL conditions on the table's columns that every row of ``frame``, and every row of the
        table with one of its keys, satisfies (the batch's dates, its time range).
    :param most_left_out: more rows to leave out than this, and the new rows are ranked whole.
    :param prune_values: ``bound``'s partition values (column -> values) and ``time_range`` its time range, from
        which the batch already committed and the table's files in the bound are read off the Delta log
        (:mod:`spark_jobs.driver.write.held_files`) instead of the snapshot's state; without them, or when that
        cannot tell, the transaction computes them.
    :raises: Delta's conflict when another writer committed into the bound first (retry it all).
    """
    scala = _Scala(spark)
    delta_log = scala.delta("DeltaLog").forTable(spark._jsparkSession, str(target.path))
    txn = delta_log.startTransaction()
    deferred = checkpoints.defer(scala.jvm, txn)
    table = spark.read.format("delta").load(str(target.path))
    predicates = [table.where(condition)._jdf.queryExecution().analyzed().condition() for condition in bound]
    read = read_bound(scala, txn, target, app_id, predicates, prune_values, time_range) \
        if prune_values is not None else None
    if read is not None:
        if read.done is not None and read.done >= batch_id:
            return StagedInsert(0)
        held, records, partitions = read.held, read.records, read.partitions
    else:
        if txn.txnVersion(app_id) >= batch_id:
            return StagedInsert(0)
        files = scala.to_list(txn.filterFiles(scala.seq(predicates), False))
        held = [f.path() for f in files]
        records = {f.path(): int(f.numLogicalRecords().get()) if f.numLogicalRecords().isDefined() else None
                   for f in files}
        partitions = {f.path(): scala.as_dict(f.partitionValues()) for f in files}
    columns = table.columns
    # Already the table's columns in its order (the job's select conforms them): no select, whose new plan Spark
    # would analyse again (40-80 ms of a live batch).
    rows_out = frame if frame.columns == columns else frame.select(*columns)
    staged = scala.to_list(txn.writeFiles(rows_out._jdf))
    written: list[str] = []
    try:
        written = [_absolute(scala, target, add.path()) for add in staged]
        # No row (all outside the bound): the commit still marks the batch as this writer's, as a MERGE's does.
        held_paths = [_absolute(scala, target, p) for p in held]
        rows = sum(_records(add) for add in staged)
        known = _HeldFiles({file_name(p): records.get(p) for p in held},
                           {file_name(p): partitions.get(p) for p in held})
        checked = _rows_to_leave_out(spark, scala, target, table, staged, written, held_paths, most_left_out, rows,
                                     known) if staged else _Checked(None)
        drop = checked.left_out
        actions = staged
        if drop is not None:
            actions = _rewritten(spark, scala, txn, target, table, staged, written, drop, held_paths)
        inserted = sum(_records(add) for add in actions)
        left_out = rows - inserted
        txn.updateSetTransaction(app_id, batch_id, scala.some(int(time.time() * 1000)))
        _register_metrics(scala, txn, rows, inserted, len(actions))
        version = txn.commit(scala.seq(actions), _merge_operation(scala, predicates))
    except Exception:
        _delete(scala, written)
        raise
    if deferred:
        checkpoints.after_commit(scala.jvm, delta_log, txn, int(version), str(target.path))
    if drop is None and checked.rows:  # committed as written: the next batches need not read their keys
        _keep_keys(target, checked.rows)
    if left_out:
        log.info("table %s: %d of the batch's %d rows left out (later deliveries, keys the table holds)",
                 target.name, left_out, rows)
    return StagedInsert(inserted, rows, left_out, version)


@dataclass(frozen=True)
class _LeftOut:
    """The staged rows to leave out: ``rows`` (file, key and first_by values), or ``whole`` (too many: rank all)."""

    rows: list
    whole: bool = False


@dataclass(frozen=True)
class _Checked:
    """What the check of the staged rows found: the rows to leave out (``None``: none), and the staged rows when
    they were collected (a small batch: their keys are kept once committed, :mod:`~.held_keys`)."""

    left_out: _LeftOut | None
    rows: list | None = None


def _rows_to_leave_out(spark: SparkSession, scala: _Scala, target: "TableTarget", table: DataFrame, staged: list,
                       written: list[str], held: list[str], most: int, rows: int,
                       known: "_HeldFiles") -> _Checked:
    """The staged rows that are a later delivery of a key in the batch, or whose key the table holds (``staged``:
    the new files' add actions, at ``written``; ``rows``: their rows; up to ``most`` of them are looked at in this
    process, more by Spark; ``known``: what the log says of the held files)."""
    identity = list(dict.fromkeys(target.unique_key + target.first_by))
    # Each new file's partition values, for the checks made in this process (a larger batch goes to Spark).
    values = [scala.as_dict(add.partitionValues()) for add in staged] \
        if rows <= max(most, MOST_ROWS_CHECKED_LOCALLY) else []
    if rows <= most:
        collected = read_locally(written, values, identity, dict(table.dtypes), target.partition_by, _FILE)
        if collected is not None:
            return _few_rows_to_leave_out(spark, target, table, collected, held, known)
    elif rows <= MOST_ROWS_CHECKED_LOCALLY:
        suspects = _suspects_read_locally(target, table, written, values, identity, held, known)
        if suspects is not None:
            drop = _later_and_held(target, *suspects)
            if len(drop) > most:
                return _Checked(_LeftOut([], whole=True))
            return _Checked(_LeftOut(drop) if drop else None)
    new = _read(spark, target, table, written, identity).withColumn(_FILE, F.input_file_name())
    if rows <= most:
        return _few_rows_to_leave_out(spark, target, table, new, held, known)
    candidates = _ranked(target, new, keep_first=False)
    if held:
        candidates = candidates.unionByName(_held_keys(spark, target, table, new, held, "left_semi"))
    found = candidates.distinct().limit(most + 1).collect()
    if not found:
        return _Checked(None)
    if len(found) > most:
        return _Checked(_LeftOut([], whole=True))
    return _Checked(_LeftOut(found))


def _few_rows_to_leave_out(spark: SparkSession, target: "TableTarget", table: DataFrame, new: DataFrame | list,
                           held: list[str], known: "_HeldFiles") -> _Checked:
    """:func:`_rows_to_leave_out` for a batch small enough to collect: its rows' key and ``first_by`` values are
    collected and ranked here (a live batch: a thousand rows), and the keys the table's files at ``held`` hold are
    looked up (:func:`_keys_held`). One or two Spark jobs without a shuffle, where ranking and joining in Spark
    take five or more (a window, a join and a distinct, each a shuffle, and a limit's incremental collects).
    ``new``: the staged rows, or their read (collected here) when they were not read in this process
    (:mod:`~.staged_rows`)."""
    staged = new if isinstance(new, list) else new.collect()
    keys = list(dict.fromkeys(tuple(row[c] for c in target.unique_key) for row in staged))
    found = set()
    if held and keys:
        schema = table.select(*target.unique_key).schema
        found = _keys_held(spark, target, table, held, keys, schema, known)
    drop = _later_and_held(target, staged, found)
    return _Checked(_LeftOut(drop) if drop else None, staged)


def _later_and_held(target: "TableTarget", staged: list, held: set[tuple]) -> list:
    """Of ``staged`` (rows with the key and ``first_by`` columns), the later deliveries of a key and every row whose
    key is in ``held`` (unique key tuples)."""
    by_key: dict[tuple, list] = {}
    for row in staged:
        by_key.setdefault(tuple(row[c] for c in target.unique_key), []).append(row)
    drop = []
    for deliveries in by_key.values():
        if len(deliveries) > 1:  # the first by ``first_by`` (NULLs first, as Spark orders) stays
            deliveries.sort(key=lambda row: [(row[c] is not None, row[c]) for c in target.first_by])
            drop.extend(deliveries[1:])
    dropped = {id(row) for row in drop}
    for key in held:
        drop.extend(row for row in by_key.get(key, []) if id(row) not in dropped)
    return drop


def _suspects_read_locally(target: "TableTarget", table: DataFrame, written: list[str], values: list[dict],
                           identity: list[str], held: list[str], known: "_HeldFiles") -> tuple[list, set[tuple]] | None:
    """A large batch's staged rows (``identity``: their key and ``first_by`` columns; ``values``: their files'
    partition values) whose key repeats in the batch or is held, and the keys held (unique key tuples), read in the
    driver (:func:`~.staged_rows.suspects_read_locally`); ``None`` when Spark must read them."""
    shape = KeyShape.of(target.unique_key, target.partition_by, target.null_safe)
    if shape is None:
        return None
    read = suspects_read_locally(written, values, identity, dict(table.dtypes), target.partition_by, _FILE, shape,
                                 held, [known.partitions.get(file_name(p)) for p in held])
    if read is None:
        return None
    rows, pairs = read
    return rows, _pairs_to_keys(target, shape, pairs)


def _keys_held(spark: SparkSession, target: "TableTarget", table: DataFrame, held: list[str], keys: list[tuple],
               schema, known: "_HeldFiles") -> set[tuple]:
    """Which of ``keys`` (tuples of the unique key's values) the table's files at ``held`` hold: from the keys kept
    in this process (:mod:`spark_jobs.driver.write.held_keys`), a file read whole the second batch that needs it
    when its rows (``known.records``, by file name) fit in what is left of the limit, the rest scanned for these
    keys alone (read in the driver when local, :mod:`~.staged_rows`; else a broadcast semi join)."""
    shape = KeyShape.of(target.unique_key, target.partition_by, target.null_safe)
    if shape is None:
        return _scanned_keys(spark, target, table, held, keys, schema, known)
    kept = keys_of_table(str(target.path))
    paths = {file_name(path): path for path in held}
    kept.keep_only(set(paths))
    already = kept.known(list(paths))
    missing = [name for name in paths if name not in already]
    again = kept.seen(missing)
    room, whole = kept.most - kept.count, []
    for name in sorted(again):  # read whole only what fits: a day of compacted files is not read into memory
        size = known.records.get(name)
        if size is not None and size <= room:
            whole.append(name)
            room -= size
    scan = [paths[name] for name in missing if name not in whole]
    if whole:
        scan += _read_and_keep(spark, target, table, [paths[name] for name in whole], shape, kept, known)
    batch = _by_partition(target, shape, keys)
    found = _pairs_to_keys(target, shape, kept.held(sorted(kept.known(list(paths))), batch, shape))
    if scan:
        found |= _scanned_keys(spark, target, table, scan, keys, schema, known)
    return found


def _by_partition(target: "TableTarget", shape: KeyShape, keys: list[tuple]) -> dict[tuple, list]:
    """``keys`` (unique key tuples) as their partition values (``shape.within``) -> their values of ``shape.column``."""
    batch: dict[tuple, list] = {}
    at = [target.unique_key.index(c) for c in shape.within]
    for key in keys:
        batch.setdefault(tuple(key[i] for i in at), []).append(key[target.unique_key.index(shape.column)])
    return batch


def _pairs_to_keys(target: "TableTarget", shape: KeyShape, pairs: set[tuple]) -> set[tuple]:
    """``(partition values, key value)`` pairs as unique key tuples."""
    found = set()
    for partition, value in pairs:
        values = dict(zip(shape.within, partition), **{shape.column: value})
        found.add(tuple(values[c] for c in target.unique_key))
    return found


def _scanned_keys(spark: SparkSession, target: "TableTarget", table: DataFrame, paths: list[str], keys: list[tuple],
                  schema, known: "_HeldFiles") -> set[tuple]:
    """Which of ``keys`` the table's files at ``paths`` hold: read in the driver when they are local
    (:func:`~.staged_rows.keys_found_locally`), else a scan of their key columns joined with ``keys`` broadcast
    (``schema``: the key columns' types)."""
    shape = KeyShape.of(target.unique_key, target.partition_by, target.null_safe)
    if shape is not None:
        pairs = keys_found_locally(paths, [known.partitions.get(file_name(p)) for p in paths], shape,
                                   dict(table.dtypes), _by_partition(target, shape, keys))
        if pairs is not None:
            return _pairs_to_keys(target, shape, pairs)
    wanted = spark.createDataFrame(keys, schema)
    old = _read(spark, target, table, paths, list(target.unique_key))
    found = old.join(F.broadcast(wanted), _same_key(target, old, wanted), "left_semi").collect()
    return {tuple(row[c] for c in target.unique_key) for row in found}


def _read_and_keep(spark: SparkSession, target: "TableTarget", table: DataFrame, paths: list[str], shape: KeyShape,
                   kept: HeldKeys, known: "_HeldFiles") -> list[str]:
    """Read the key column of the table's files at ``paths`` into ``kept`` (in the driver when they are local,
    :func:`~.staged_rows.keys_read_locally`; else one Spark job, collected as Arrow); returns the paths it could
    not keep (over its limit), to scan."""
    import pyarrow.compute as pc

    from spark_jobs.transforms.arrow_without_pandas import settle

    local = keys_read_locally(paths, [known.partitions.get(file_name(p)) for p in paths], shape, dict(table.dtypes))
    if local is not None:
        return [path for path, (partition, keys) in zip(paths, local)
                if not kept.add(file_name(path), partition, keys)]
    settle()
    arrow = (_read(spark, target, table, paths, [shape.column, *shape.within])
             .withColumn(_FILE, F.input_file_name()).toArrow())
    files = arrow.column(_FILE)
    by_name = {file_name(path): path for path in paths}
    unkept, read = [], set()
    for uri in pc.unique(files).to_pylist():
        name = file_name(uri)
        if name not in by_name:  # a name Spark spells otherwise: scan them all, as before
            return paths
        rows = arrow.filter(pc.equal(files, uri))
        partition = tuple(rows.column(c)[0].as_py() for c in shape.within)
        read.add(name)
        if not kept.add(name, partition, rows.column(shape.column).combine_chunks()):
            unkept.append(by_name[name])
    for name in by_name.keys() - read:  # a file without rows holds no key
        kept.add(name, (), arrow.column(shape.column).slice(0, 0).combine_chunks())
    return unkept


def _keep_keys(target: "TableTarget", rows: list) -> None:
    """Keep the keys of a committed batch's own files (``rows``: its staged rows, each with its file)."""
    import pyarrow as pa

    from spark_jobs.transforms.arrow_without_pandas import settle

    shape = KeyShape.of(target.unique_key, target.partition_by, target.null_safe)
    if shape is None:
        return
    settle()
    kept = keys_of_table(str(target.path))
    by_file: dict[str, list] = {}
    for row in rows:
        by_file.setdefault(file_name(row[_FILE]), []).append(row)
    for name, file_rows in by_file.items():
        kept.add(name, tuple(file_rows[0][c] for c in shape.within), pa.array([r[shape.column] for r in file_rows]))


def _ranked(target: "TableTarget", rows: DataFrame, keep_first: bool) -> DataFrame:
    """``rows``' first deliveries of each key by ``first_by`` (``keep_first``), or the later ones."""
    first = Window.partitionBy(*target.unique_key).orderBy(*target.first_by)
    rank = F.row_number().over(first)
    return rows.withColumn(_RANK, rank).where(F.col(_RANK) == 1 if keep_first else F.col(_RANK) > 1).drop(_RANK)


def _held_keys(spark: SparkSession, target: "TableTarget", table: DataFrame, rows: DataFrame, held: list[str],
               how: str) -> DataFrame:
    """``rows`` joined (``left_semi``: those whose key, ``left_anti``: those whose key is not) with the keys of the
    table's files at ``held``."""
    old = _read(spark, target, table, held, list(target.unique_key))
    return rows.join(old, _same_key(target, rows, old), how)


def _same_key(target: "TableTarget", left: DataFrame, right: DataFrame):
    """The join condition of two frames' rows with the same unique key (``<=>`` for the null-safe key columns)."""
    condition = [left[c].eqNullSafe(right[c]) if c in target.null_safe else left[c] == right[c]
                 for c in target.unique_key]
    return reduce(lambda a, b: a & b, condition)


def _read(spark: SparkSession, target: "TableTarget", table: DataFrame, paths: list[str],
          columns: list[str]) -> DataFrame:
    """``columns`` of the table's Parquet files at ``paths`` (partition columns from their folders, typed as the
    table types them)."""
    types = dict(table.dtypes)
    # The table's schema given: Spark infers none from the files' footers (a Spark job per read).
    frame = spark.read.option("basePath", str(target.path)).schema(table.schema).parquet(*paths)
    return frame.select(*[F.col(c).cast(types[c]).alias(c) if c in target.partition_by else F.col(c)
                          for c in columns])


def _rewritten(spark: SparkSession, scala: _Scala, txn, target: "TableTarget", table: DataFrame, staged: list,
               written: list[str], drop: _LeftOut, held: list[str]) -> list:
    """The staged files' actions after writing again, without the rows to leave out, the files that hold any
    (all of them, ranked whole and without the keys of the table's files at ``held``, when there are too many
    rows to collect)."""
    identity = list(dict.fromkeys(target.unique_key + target.first_by))
    if drop.whole:
        affected = set(written)
        kept = _ranked(target, _read(spark, target, table, written, table.columns), keep_first=True)
        if held:
            kept = _held_keys(spark, target, table, kept, held, "left_anti")
    else:
        affected = {row[_FILE] for row in drop.rows}
        paths = [path for path in written if _same_file(path, affected)]
        affected = set(paths)
        rows = _read(spark, target, table, paths, table.columns)
        left = spark.createDataFrame([tuple(row[c] for c in identity) for row in drop.rows],
                                     rows.select(*identity).schema)
        kept = rows.join(F.broadcast(left), [rows[c].eqNullSafe(left[c]) for c in identity], "left_anti")
    again = scala.to_list(txn.writeFiles(kept.select(*table.columns)._jdf))
    keep = [add for add, path in zip(staged, written) if path not in affected]
    _delete(scala, sorted(affected))
    return keep + again


def _same_file(path: str, names: set[str]) -> bool:
    """Whether ``path`` is one of ``names`` (``input_file_name`` gives a URI, which may differ in scheme)."""
    return any(name == path or name.endswith(path.split(":", 1)[-1]) for name in names)


def _absolute(scala: _Scala, target: "TableTarget", relative: str) -> str:
    """An AddFile's path (relative, URL-encoded) as an absolute path."""
    return scala.member("org.apache.spark.sql.delta.util.DeltaFileOperations.absolutePath")(str(target.path),
                                                                                          relative).toString()


def _records(add) -> int:
    """The rows of a new file (Delta's statistics of it)."""
    records = add.numLogicalRecords()
    if records.isEmpty():
        raise RuntimeError(f"Delta wrote {add.path()} without statistics (numRecords): the staged insert needs them; "
                           "is spark.databricks.delta.stats.collect false?")
    return int(records.get())


def _register_metrics(scala: _Scala, txn, source_rows: int, inserted: int, files: int) -> None:
    """The operation metrics Delta records for an insert-only MERGE (its history's ``operationMetrics``)."""
    create = scala.member("org.apache.spark.sql.execution.metric.SQLMetrics.createMetric")
    values = {"numSourceRows": source_rows, "operationNumSourceRows": source_rows, "numTargetRowsInserted": inserted,
              "numOutputRows": inserted, "numTargetFilesAdded": files}
    for zero in ("numTargetRowsUpdated", "numTargetRowsMatchedUpdated", "numTargetRowsNotMatchedBySourceUpdated",
                 "numTargetRowsDeleted", "numTargetRowsMatchedDeleted", "numTargetRowsNotMatchedBySourceDeleted",
                 "numTargetRowsCopied", "numTargetFilesRemoved", "numTargetChangeFilesAdded", "numTargetBytesAdded",
                 "numTargetBytesRemoved", "numTargetDeletionVectorsAdded", "numTargetDeletionVectorsRemoved",
                 "numTargetDeletionVectorsUpdated", "executionTimeMs", "scanTimeMs", "rewriteTimeMs",
                 "materializeSourceTimeMs"):
        values[zero] = 0
    registered = scala.member("java.util.HashMap")()
    context = scala.spark._jsc.sc()
    for name, value in values.items():
        metric = create(context, name)
        metric.set(value)
        registered.put(name, metric)
    txn.registerSQLMetrics(scala.spark._jsparkSession, scala.member("PythonUtils.toScalaMap")(registered))


def _merge_operation(scala: _Scala, predicates: list):
    """Delta's record of an insert-only MERGE bounded by ``predicates`` (its history's ``operationParameters``)."""
    both = scala.member("org.apache.spark.sql.catalyst.expressions.And")
    condition = reduce(both, predicates) if predicates else None
    insert = scala.delta("DeltaOperations$MergePredicate")(scala.some(None), "insert")
    none = scala.some(None)
    return scala.delta("DeltaOperations$Merge")(scala.some(condition), none, none, none, scala.seq([]),
                                                scala.seq([insert]), scala.seq([]))


def _delete(scala: _Scala, paths: list[str]) -> None:
    """Delete files this writer wrote and will not commit (best effort: ``VACUUM`` removes what is left)."""
    for path in paths:
        try:
            hadoop_path = scala.jvm.org.apache.hadoop.fs.Path(path)
            hadoop_path.getFileSystem(scala.spark._jsc.hadoopConfiguration()).delete(hadoop_path, False)
        except Exception as exc:  # noqa: BLE001 - an uncommitted file is invisible; VACUUM removes it
            log.warning("could not delete the uncommitted file %s: %s", path, exc)
