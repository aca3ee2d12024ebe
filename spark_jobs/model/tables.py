"""What a job declares about each table it writes: :class:`TableSpec` (no pyspark).

The registry (:mod:`spark_jobs.registry`) holds one per table; the driver turns it into a write target.
"""

from __future__ import annotations

from dataclasses import dataclass

WRITE_MODES = ("insert", "upsert", "complete")


@dataclass(frozen=True)
class TableSpec:
    """An output table of a job.

    :param name: the table's name; queryable by this name with ``python -m spark_jobs sql``.
    :param partition_by: partition columns, in folder order.
    :param description: one line for people, shown by ``python -m spark_jobs list``.
    :param vacuum_retention_hours: ``lake vacuum`` (and the ``lake_maintenance`` DAG) deletes files
        no version younger than this needs; time travel reaches back this far. Delta refuses less
        than the table's ``delta.deletedFileRetentionDuration`` (168 hours unless set) without
        ``--force``.
    :param zorder_by: columns ``lake optimize`` Z-orders the files by (empty: compaction only); they
        must be among ``stats_columns`` when that is set.
    :param stats_columns: the columns Delta keeps per-file min/max/null counts of for data skipping
        (``delta.dataSkippingStatsColumns``, set when the table is created): the ones queries filter
        on. Empty: Delta's default, the first 32 columns, whose statistics cost ~20% of a large write.
    :param quarantine: the table holds what could not be ingested; its share of a batch's rows is the
        job's quarantine rate (monitoring plots it and alerts on it).
    :param write_mode: how each micro-batch reaches the table, in one Delta commit marked with the
        writer's ``txnAppId``/``txnVersion``: ``insert`` (rows whose unique key the table does not hold
        yet; every row when the job declares no key), ``upsert`` (a MERGE that updates the rows whose
        key it holds and inserts the others: windows a later batch corrects) or ``complete`` (the
        batch is the whole table: an overwrite).
    """

    name: str
    partition_by: tuple[str, ...] = ()
    description: str = ""
    vacuum_retention_hours: int = 168
    zorder_by: tuple[str, ...] = ()
    stats_columns: tuple[str, ...] = ()
    quarantine: bool = False
    write_mode: str = "insert"

    def __post_init__(self) -> None:
        if self.write_mode not in WRITE_MODES:
            raise ValueError(f"table {self.name}: write_mode {self.write_mode!r} is not one of {', '.join(WRITE_MODES)}")
