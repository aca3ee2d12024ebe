"""The columns of a job's quarantine table: one shape for every job that ingests files.

Whatever a job reads (CloudTrail records, lines of an application log), what it could not ingest is
kept the same way: where it was (the file and the position in it), why (a reason code and a detail),
the raw text (cut at a size, with its full length), the identity it claimed if any, and when it was
quarantined (the table is partitioned by that day). On-call reads every quarantine table alike, and
the table's unique key is (source_file, position, reason).

A job's transform marks each row of its result: ``reason`` NULL for an event, else the reason, with
``detail`` and ``raw``. Which rows go where is the registry's: the events table's route is
``reason IS NULL``, the quarantine table's ``reason IS NOT NULL`` (:class:`~spark_jobs.model.tables.TableSpec`);
the driver applies them, and the selects here give each table's columns of the rows it got. A file log type's two
selects come from its declaration (:func:`log_type_selects`, :mod:`spark_jobs.model.log_types`).
"""

from __future__ import annotations

from typing import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.model.log_types import INGEST_DATE, PARSED_SOURCE_FILE, REASON, SOURCE_FILE, LogType

# The columns of a transform's result that say why a row is quarantined (NULL reason: an event).
VERDICT = (REASON, "detail", "raw")
# The part of a quarantined record's raw text that is kept (characters).
MAX_RAW_CHARS = 64 * 1024


def event_columns(events: DataFrame) -> DataFrame:
    """The events table's columns of a transform's event rows: all but the verdict's."""
    return events.drop(*VERDICT)


def quarantine_columns(quarantined: DataFrame, *, source_file: str, position: tuple[str, str], identity: str,
                       max_raw_chars: int = MAX_RAW_CHARS) -> DataFrame:
    """The quarantine table's columns of a transform's quarantined rows.

    :param quarantined: the transform's rows its quarantine route took, with ``reason``, ``detail`` and
        ``raw`` (NULL raw: empty text).
    :param source_file: the result's column naming the input file (``source_file`` in the table).
    :param position: the result's column of the position in the file, and its name in the table.
    :param identity: the result's column of the id the item claimed (kept under its own name).
    :param max_raw_chars: the raw text kept (characters); ``raw_truncated`` and ``raw_length`` tell the rest.
    """
    raw = F.coalesce(F.col("raw"), F.lit(""))
    quarantined_at = F.current_timestamp()
    return quarantined.select(
        F.col(source_file).alias(SOURCE_FILE),
        F.col(position[0]).alias(position[1]),
        REASON,
        "detail",
        F.left(raw, F.lit(max_raw_chars)).alias("raw"),
        (F.length(raw) > max_raw_chars).alias("raw_truncated"),
        F.length(raw).alias("raw_length"),
        identity,
        quarantined_at.alias("quarantined_at"),
        F.to_date(quarantined_at).alias(INGEST_DATE),
    )


def log_type_selects(log_type: LogType) -> dict[str, Callable[..., DataFrame]]:
    """A file log type's two selects, by table name: its events table's columns (:func:`event_columns`) and its
    quarantine table's (:func:`quarantine_columns`, of the parser's ``_source_file``, ``_<position>`` and identity)."""

    def events(parsed: DataFrame, context=None) -> DataFrame:
        return event_columns(parsed)

    def quarantine(parsed: DataFrame, context=None) -> DataFrame:
        return quarantine_columns(parsed, source_file=PARSED_SOURCE_FILE,
                                  position=(log_type.parsed_position, log_type.position), identity=log_type.identity)

    return {log_type.events_table: events, log_type.quarantine_table: quarantine}
