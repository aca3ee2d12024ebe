"""A file log type: the events-plus-quarantine pair every log that lands as files goes into (no pyspark).

A log type's parser (``spark_jobs/transforms/<log type>/``, the job module's ``transform``) turns Spark's
``binaryFile`` rows into one row per record: ``reason`` NULL for an event, else a quarantine reason with its
``detail`` and ``raw`` text; the row names its input file ``_source_file`` and its place in the file
``_<position>``. Everything else is the same for every such log, so it is derived from a :class:`LogType` and
declared here once (:func:`~spark_jobs.model.jobs.file_log_type` makes the registry entry):

- ``<log type>_events``: the rows with no reason (:data:`EVENTS_ROUTE`), partitioned by the event's UTC
  :data:`EVENT_DATE`; one row per ``(key, date)``, the first delivery in file order kept (``_source_file``,
  then ``_<position>``); its ``_source_file`` names each row's file (reprocess replaces a file's rows);
- ``<log type>_quarantine``: the others (:data:`QUARANTINE_ROUTE`), partitioned by :data:`INGEST_DATE`; one row
  per ``(source_file, <position>, reason)``;
- their selects (:func:`spark_jobs.transforms.quarantine.log_type_selects`): the events table takes every column
  of the parser's rows but the verdict; the quarantine the one shape of every quarantine;
- the source: ``landing/<log type>`` read whole file by whole file, sub-folders included, files found by the
  log's key layout and name glob, oldest first, :data:`FILES_PER_TRIGGER` files a micro-batch unless declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_jobs.model.layout import KeyLayout
from spark_jobs.model.streams import FileSource
from spark_jobs.model.tables import TableSpec

# The parser's verdict column: NULL for an event, else why the record is quarantined.
REASON = "reason"
EVENTS_ROUTE = f"{REASON} IS NULL"
QUARANTINE_ROUTE = f"{REASON} IS NOT NULL"
# The events table's partition: the UTC date of the event's time (part of its key: a MERGE reads only a batch's dates).
EVENT_DATE = "date"
# The quarantine table's partition: the day a record was quarantined.
INGEST_DATE = "ingest_date"
# The input file of a row: in the parser's rows and the events table, and in the quarantine table.
PARSED_SOURCE_FILE = "_source_file"
SOURCE_FILE = "source_file"
# Files per micro-batch of a log type that declares no other number.
FILES_PER_TRIGGER = 100


@dataclass(frozen=True)
class LogType:
    """What the platform derives a file log type's tables and selects from (see the module docstring).

    :param name: the log type (``cowrie``): its tables ``<name>_events`` and ``<name>_quarantine``, its landing
        folder ``landing/<name>``, its parser's package ``spark_jobs.transforms.<name>`` and its first DAG tag.
    :param key: the parser's column that identifies an event (with the event's date, the events table's key).
    :param position: where a record sits in its file, as the quarantine table names it (``line_number``,
        ``record_index``); the parser's column is ``_<position>``.
    :param identity: the parser's column of what a quarantined record claimed to be (its id or kind), kept in the
        quarantine table under its own name.
    :param position_may_be_null: a file-level problem has no position (CloudTrail's ``record_index``): the
        quarantine's key then compares NULL equal to NULL.
    """

    name: str
    key: str
    position: str
    identity: str
    position_may_be_null: bool = False

    @property
    def events_table(self) -> str:
        return f"{self.name}_events"

    @property
    def quarantine_table(self) -> str:
        return f"{self.name}_quarantine"

    @property
    def parsed_position(self) -> str:
        """The parser's column of a record's place in its file."""
        return f"_{self.position}"

    @property
    def default_input(self) -> str:
        return f"landing/{self.name}"

    def tables(self, events: str, quarantine: str, **events_fields: Any) -> tuple[TableSpec, TableSpec]:
        """The events table and the quarantine table.

        :param events: the events table's description.
        :param quarantine: the quarantine table's description.
        :param events_fields: more :class:`~spark_jobs.model.tables.TableSpec` fields of the events table
            (``stats_columns``, ``zorder_by``, ``delivery_date_bound``, ...).
        """
        quarantine_key = (SOURCE_FILE, self.position, REASON)
        return (
            TableSpec(name=self.events_table, partition_by=(EVENT_DATE,), description=events,
                      unique_key=(self.key, EVENT_DATE), first_by=(PARSED_SOURCE_FILE, self.parsed_position),
                      source_file=PARSED_SOURCE_FILE, route=EVENTS_ROUTE, **events_fields),
            TableSpec(name=self.quarantine_table, partition_by=(INGEST_DATE,), description=quarantine, quarantine=True,
                      unique_key=quarantine_key, null_safe=quarantine_key if self.position_may_be_null else (),
                      source_file=SOURCE_FILE, route=QUARANTINE_ROUTE),
        )

    @staticmethod
    def source(layout: KeyLayout) -> FileSource:
        """Whole files (Spark's ``binaryFile`` rows), found by ``layout``."""
        return FileSource("binaryFile", layout=layout)

    @staticmethod
    def source_options(glob: str, files_per_trigger: int = FILES_PER_TRIGGER) -> dict[str, str]:
        """The file source's options: sub-folders included, names matching ``glob`` (a Hadoop glob), oldest first,
        ``files_per_trigger`` files a micro-batch."""
        return {"recursiveFileLookup": "true", "pathGlobFilter": glob, "maxFilesPerTrigger": str(files_per_trigger),
                "latestFirst": "false"}
