"""What a staged insert reads of its table, taken from the Delta log without Spark's state reconstruction.

A staged insert (:mod:`spark_jobs.driver.write.staged`) asks its Delta transaction two things before it writes: the
last batch this writer committed (``txnVersion``), and the table's files whose statistics reach into the batch's
bound (``filterFiles``). Both go through the transaction's snapshot state, which delta-spark 4.4 computes with
Spark jobs (a replay of the checkpoint and the commits after it) for every new version of the table, even when
the version's ``.crc`` file holds the app ids (``SnapshotState.setTransactionsIfKnown`` ignores it): measured on
the 10M-event table, 0.6-1.0 s of a live micro-batch of 2-3 s, for a table that gained one file.

:func:`read_bound` answers both from delta-rs instead (``deltalake``: the same log at the transaction's
own read version, replayed in Rust in milliseconds) and records in the transaction what ``txnVersion`` and
``filterFiles`` record: the app id read (a concurrent commit of the same app id fails this one: the fence against
a paused old driver), the bound's predicates (a concurrent commit that adds a file they select fails it) and the
files read (a concurrent commit that removes one fails it). So the commit's conflict checks are Delta's own and
exactly as strict; only where the answers come from changes. The files it returns are a superset of what
``filterFiles`` would skip to (partition values and the time column's min/max only, widened by a second; a file
without statistics is kept), so no key the table holds in the bound is missed.

``None`` (the caller asks the transaction as before) when delta-rs cannot read the table, when the table lacks a
bound column's partition values or statistics, or when a file's path holds a character Delta percent-encodes in
its log (the files read are matched to a concurrent commit's removals by path, as the log spells it).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from dataclasses import dataclass

from spark_jobs.model.object_store import delta_rs_options

# ``"TableTarget"`` and ``"TimeRange"`` below are :mod:`spark_jobs.driver.write.delta_writer`'s, which calls this
# module through :mod:`spark_jobs.driver.write.staged` (not imported here, so that they do not import each other).
log = logging.getLogger("spark_jobs")

# Delta's statistics of a timestamp are truncated to milliseconds; a second either side keeps every file whose
# values reach into the range.
STATS_SLACK = dt.timedelta(seconds=1)
# A path Delta writes as it is (no character it would percent-encode).
_PLAIN_PATH = re.compile(r"[A-Za-z0-9=/._-]*")


@dataclass(frozen=True)
class BoundRead:
    """What :func:`read_bound` found at the transaction's read version.

    :param done: the last batch id committed under the app id (``None``: none).
    :param held: the table's files (log paths, relative) whose rows may hold a key of the batch.
    :param records: each held file's rows, as the log's statistics give them (``None``: not recorded).
    :param partitions: each held file's partition values (column -> text, as the log writes them).
    """

    done: int | None
    held: list[str]
    records: dict[str, int | None]
    partitions: dict[str, dict]


def read_bound(scala, txn, target: "TableTarget", app_id: str, predicates: list,
               prune_values: dict[str, list], time_range: "TimeRange | None") -> BoundRead | None:
    """The transaction's last batch under ``app_id`` and the files of ``target`` in the bound, from delta-rs at
    ``txn``'s read version, with the reads recorded in ``txn`` (see the module docstring).

    :param scala: the staged insert's py4j helpers (``seq``, ``delta``).
    :param predicates: the bound's conditions as Catalyst expressions (what ``filterFiles`` would be given).
    :param prune_values: partition column -> the values the bound allows.
    :param time_range: the range of a column with statistics the bound allows, or ``None``.
    :returns: ``None`` when it cannot tell (the caller asks the transaction itself).
    """
    version = int(txn.readVersion())
    found = _files_in_bound(target, version, prune_values, time_range)
    if found is None:
        return None
    table, adds = found
    done = table.transaction_version(app_id)
    txn.readTxn().addOne(app_id)  # what txnVersion records
    txn.trackReadPredicates(scala.seq(predicates), False, True)  # what filterFiles records
    records = {add["path"]: add.pop("_records") for add in adds}  # not a field of Delta's add action
    action = scala.delta("actions.Action")
    txn.trackFilesRead(scala.seq([action.fromJson(json.dumps({"add": add})) for add in adds]))
    return BoundRead(None if done is None else int(done), [add["path"] for add in adds], records,
                     {add["path"]: add["partitionValues"] for add in adds})


def _files_in_bound(target: "TableTarget", version: int, prune_values: dict[str, list],
                    time_range: "TimeRange | None"):
    """delta-rs's table at ``version`` and its files in the bound as Delta ``add`` actions (path, partition
    values, size, time), or ``None`` (see :func:`read_bound`)."""
    import deltalake
    import pyarrow as pa

    try:
        table = deltalake.DeltaTable(str(target.path), version=version,
                                     storage_options=delta_rs_options(target.path))
        files = pa.table(table.get_add_actions(flatten=True))
    except Exception as exc:  # noqa: BLE001 - the transaction's own reads are the way back
        log.info("table %s: delta-rs cannot read version %d (%s): reading through Delta's snapshot", target.name,
                 version, exc)
        return None
    partition_columns = list(target.partition_by)
    needed = [f"partition.{c}" for c in partition_columns]
    if time_range is not None:
        needed += [f"min.{time_range.column}", f"max.{time_range.column}"]
    if any(name not in files.column_names for name in needed):
        return None
    try:
        adds = _adds_in_bound(files, target, prune_values, time_range, needed)
    except (pa.ArrowException, TypeError, ValueError) as exc:  # a bound value of a type delta-rs holds otherwise
        log.info("table %s: the bound cannot be applied to delta-rs's files (%s): reading through Delta's snapshot",
                 target.name, exc)
        return None
    return (table, adds) if adds is not None else None


def _adds_in_bound(files, target: "TableTarget", prune_values: dict[str, list], time_range: "TimeRange | None",
                   needed: list[str]) -> list[dict] | None:
    """The ``add`` actions of delta-rs's ``files`` (its flattened add actions) in the bound (``None``: a path the
    log spells percent-encoded)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from spark_jobs.transforms.arrow_without_pandas import settle

    partition_columns = list(target.partition_by)
    settle()  # the filters below build arrays of Python values: pyarrow's pandas check, without pandas
    keep = pa.array([True] * files.num_rows, type=pa.bool_())
    for column, values in prune_values.items():
        values = [v for v in values if v is not None]
        present = files.column(f"partition.{column}")
        keep = pc.and_(keep, pc.fill_null(pc.is_in(present, value_set=pa.array(values, type=present.type)), False))
    if time_range is not None:
        low = files.column(f"min.{time_range.column}")
        high = files.column(f"max.{time_range.column}")
        start = pa.scalar(time_range.start - STATS_SLACK, type=low.type)
        end = pa.scalar(time_range.end + STATS_SLACK, type=high.type)
        reaches = pc.and_(pc.less_equal(low, end), pc.greater_equal(high, start))
        keep = pc.and_(keep, pc.fill_null(reaches, True))  # no statistics: kept
    held = files.filter(keep).select(["path", "size_bytes", "modification_time", "num_records",
                                      *needed[:len(partition_columns)]])
    adds = []
    for row in held.to_pylist():
        if not _PLAIN_PATH.fullmatch(row["path"]):
            return None
        adds.append({"path": row["path"], "size": row["size_bytes"], "modificationTime": row["modification_time"],
                     "dataChange": True, "_records": row["num_records"],
                     "partitionValues": {c: _partition_text(row[f"partition.{c}"]) for c in partition_columns}})
    return adds


def _partition_text(value) -> str | None:
    """A partition value as Delta's log writes it (dates ISO, numbers and strings as they are; NULL as null)."""
    if value is None:
        return None
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return str(value)
