"""What a job declares about each table it writes: :class:`TableSpec` (no pyspark).

The registry (:mod:`spark_jobs.registry`) holds one per table; the driver turns it into a write target
(:mod:`spark_jobs.driver.write`). Besides where the table lives and how it is maintained, a declaration
says how a micro-batch reaches it: its write mode, the unique key (which rows are one row), which
delivery of a key wins (``first_by``), the key columns that may be NULL, the delivery-date bound the
pipelined pass uses, the column naming each row's input file (reprocess), the route (which rows of
the job's transform go to it) and, where the job declares one, its schema. :meth:`TableSpec.check`
refuses a declaration that contradicts itself (:class:`~spark_jobs.model.errors.RegistryError`), when
the registry loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.model.errors import RegistryError

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
    :param unique_key: columns that identify a row: a row whose key the table (or an earlier row of the
        same batch) already holds is not inserted (``upsert``: it is updated). Empty: every row is appended.
    :param first_by: among one batch's rows with the same key, the one with the lowest values of these
        columns is kept (a deterministic choice, so a re-run keeps the same row). Needs a key.
    :param null_safe: key columns that may be NULL (compared with ``<=>``, NULL equal to NULL).
    :param delivery_date_bound: the table's partition column lies within a few days before each input
        file's delivery date (:class:`DeliveryDateBound`): a file batch is then written in one pipelined
        pass (:mod:`spark_jobs.driver.write.pipelined`). Only on an ``insert`` table, for a partition
        column that is part of the key; it applies to batches of files (a batch without file paths,
        Kafka's, is written the cached way).
    :param delivery_time_bound: a column every delivery of a key carries unchanged (the event's time) lies
        within minutes of each input file's delivery time (:class:`DeliveryTimeBound`): the pipelined pass
        then also bounds the table's rows it matches by that time, so Delta skips the files outside it
        (its cost stays flat as a day's partition grows). Needs ``delivery_date_bound``.
    :param source_file: the table's column naming the input file each row came from: a reprocess
        replaces the rows of the files it replays (:mod:`spark_jobs.driver.reprocess`).
    :param route: which rows of the job's transform go to this table: a SQL boolean condition over the
        transform's result (``reason IS NULL``); ``None``: every row. Every table of a stateless job with
        several tables has one (a row that no route takes is written nowhere); a stateful job's selects
        pick their rows themselves.
    :param schema: the table's columns as DDL (``"word STRING, count BIGINT"``; STRING, BOOLEAN, BIGINT,
        DOUBLE, DATE, TIMESTAMP), for a table whose rows the job conforms to it; ``None``: the schema of
        what the job's select returns.
    """

    name: str
    partition_by: tuple[str, ...] = ()
    description: str = ""
    vacuum_retention_hours: int = 168
    zorder_by: tuple[str, ...] = ()
    stats_columns: tuple[str, ...] = ()
    quarantine: bool = False
    write_mode: str = "insert"
    unique_key: tuple[str, ...] = ()
    first_by: tuple[str, ...] = ()
    null_safe: tuple[str, ...] = ()
    delivery_date_bound: DeliveryDateBound | None = None
    source_file: str | None = None
    route: str | None = None
    schema: str | None = None
    delivery_time_bound: DeliveryTimeBound | None = None

    def __post_init__(self) -> None:
        if self.write_mode not in WRITE_MODES:
            raise ValueError(f"table {self.name}: write_mode {self.write_mode!r} is not one of {', '.join(WRITE_MODES)}")

    @property
    def columns(self) -> tuple[str, ...] | None:
        """The declared schema's column names, or ``None`` when the table declares no schema."""
        if self.schema is None:
            return None
        return tuple(part.split()[0] for part in self.schema.split(",") if part.strip())

    def check(self, job: str) -> None:
        """Refuse a declaration that contradicts itself (called for each table when a job is declared).

        :raises RegistryError: naming ``job``, the table, the field, the bad value and the fix.
        """
        def refuse(field_: str, value, problem: str) -> RegistryError:
            return RegistryError(f"job {job}, table {self.name}: {field_} {value!r} {problem}")

        key = self.unique_key
        if self.first_by and not key:
            raise refuse("first_by", self.first_by, "needs a unique_key (it picks one delivery per key); "
                         "declare unique_key or drop first_by")
        if self.null_safe and not key:
            raise refuse("null_safe", self.null_safe, "needs a unique_key (it names key columns that may be NULL); "
                         "declare unique_key or drop null_safe")
        outside = [c for c in self.null_safe if c not in key]
        if outside:
            raise refuse("null_safe", self.null_safe, f"names {', '.join(outside)}, not in unique_key {key!r}; "
                         "list only key columns")
        if self.write_mode == "upsert" and not key:
            raise refuse("write_mode", self.write_mode, "needs a unique_key (the rows a MERGE updates); "
                         "declare unique_key")
        bound = self.delivery_date_bound
        if bound is not None:
            if self.write_mode != "insert":
                raise refuse("delivery_date_bound", bound, f"needs write_mode 'insert', not {self.write_mode!r}; "
                             "drop the bound")
            if bound.column not in self.partition_by:
                raise refuse("delivery_date_bound", bound, f"bounds {bound.column!r}, not a partition column "
                             f"{self.partition_by!r}; bound a partition column that is part of unique_key")
            if bound.column not in key:
                raise refuse("delivery_date_bound", bound, f"bounds {bound.column!r}, not part of unique_key "
                             f"{key!r}; add it to the key or bound another column")
            if bound.days_before < 0:
                raise refuse("delivery_date_bound", bound, "has days_before < 0; give 0 or more days")
        timed = self.delivery_time_bound
        if timed is not None:
            if bound is None:
                raise refuse("delivery_time_bound", timed, "needs a delivery_date_bound (it narrows the pipelined "
                             "pass's); declare one or drop the time bound")
            if timed.minutes_before < 0 or timed.minutes_after < 0:
                raise refuse("delivery_time_bound", timed, "has minutes < 0; give 0 or more minutes")
            if self.stats_columns and timed.column not in self.stats_columns:
                raise refuse("delivery_time_bound", timed, f"bounds {timed.column!r}, not among stats_columns; "
                             "Delta skips files only by columns it keeps statistics of")
        columns = self.columns
        if columns is not None:
            for field_ in ("partition_by", "unique_key", "first_by", "null_safe", "stats_columns", "zorder_by"):
                missing = [c for c in getattr(self, field_) if c not in columns]
                if missing:
                    raise refuse(field_, getattr(self, field_), f"names {', '.join(missing)}, not a column of the "
                                 "declared schema; add it to schema or drop it here")
            if self.source_file is not None and self.source_file not in columns:
                raise refuse("source_file", self.source_file, "is not a column of the declared schema; add it to "
                             "schema or drop it here")
        if self.stats_columns and self.zorder_by:
            missing = [c for c in self.zorder_by if c not in self.stats_columns]
            if missing:
                raise refuse("zorder_by", self.zorder_by, f"names {', '.join(missing)}, not among stats_columns; "
                             "Z-order only by columns Delta keeps statistics of")


@dataclass(frozen=True)
class DeliveryDateBound:
    """A table's partition column lies within ``days_before`` days before each input file's delivery date
    (the date in the file's name or folders): CloudTrail delivers an event within about 15 minutes, so
    its UTC date is its file's date or the day before (``DeliveryDateBound("date", 1)``).

    :param column: the partition column (part of the unique key) the bound is on.
    :param days_before: how many days before the delivery date a row's value may be.
    """

    column: str
    days_before: int


@dataclass(frozen=True)
class DeliveryTimeBound:
    """A column that every delivery of a key carries unchanged (CloudTrail's ``eventTime``: a redelivered
    event is the same record) lies from ``minutes_before`` minutes before each input file's delivery time
    (the ``YYYYMMDDTHHMMZ`` in its object name) to ``minutes_after`` minutes after it. A row outside is not
    an error: the pipelined pass leaves it to the cached way, bounded by dates only.

    :param column: the column (a TIMESTAMP of the table, among its ``stats_columns``).
    :param minutes_before: how long before its file's delivery time a row's value may be.
    :param minutes_after: how long after (the name's time is cut to the minute; clocks differ).
    """

    column: str
    minutes_before: int
    minutes_after: int
