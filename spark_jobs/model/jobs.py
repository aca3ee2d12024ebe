"""One streaming job's declaration: :class:`JobSpec`, and :func:`file_log_type`, a file log type's (no pyspark).

A job's name is also its module under :mod:`spark_jobs.jobs`, its Spark app name, the prefix of its
DAG ids, its checkpoint folder and the name of its Assets (see :mod:`spark_jobs.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from spark_jobs.model.catchup import CatchupTrigger
from spark_jobs.model.errors import RegistryError
from spark_jobs.model.layout import KeyLayout
from spark_jobs.model.log_types import FILES_PER_TRIGGER, PARSED_SOURCE_FILE, LogType
from spark_jobs.model.policies import AlertThresholds, HealthThresholds, ProgressHistory, RestartPolicy
from spark_jobs.model.streams import DimensionSpec, EventTimeSpec, FileSource, SourceSpec
from spark_jobs.model.tables import DeliveryDateBound, DeliveryTimeBound, TableSpec

@dataclass(frozen=True)
class JobSpec:
    """One streaming job.

    :param name: the job's name (see the module docstring for everything it names).
    :param description: one line for people.
    :param default_input: the landing folder read when ``--input`` is not given, relative to the
        project root unless absolute; ``$<NAME>_INPUT`` (upper case) overrides it.
    :param tables: the tables the job writes; the first is its main table.
    :param default_trigger: ``available-now`` or ``processing-time:<duration>``.
    :param file_source_options: options of Spark's file source (``maxFilesPerTrigger``,
        ``latestFirst``, ``pathGlobFilter``, ...); command-line flags override them.
    :param schedule: the catch-up DAG's schedule.
    :param health: limits for the health sensors.
    :param tags: DAG tags.
    :param continuous_trigger: the trigger of the job's supervised, always-on run (its
        ``<job>_continuous`` DAG and ``python -m spark_jobs supervise``); ``None``: no continuous run.
    :param restart: how the supervisor restarts a continuous run's driver.
    :param input_roots: the folders a backfill may read under (relative to the project root unless
        absolute); ``$<NAME>_INPUT_ROOTS`` (``os.pathsep``-separated) overrides them.
    :param alerts: when the job's health opens an incident (see :class:`AlertThresholds`).
    :param progress: the job's progress history in ``streaming_progress`` (see :class:`ProgressHistory`).
    :param backfill_priority: the CPU priority of a backfill's driver, so the live job keeps its freshness
        during a large backfill: ``idle`` (Linux ``SCHED_IDLE``), ``nice:N`` or ``normal``
        (:mod:`spark_jobs.control.catchup.priority`); ``$<NAME>_BACKFILL_PRIORITY`` or ``backfill --priority``
        override it.
    :param source: what the job reads (:mod:`spark_jobs.model.streams`): files (``FileSource``, the default:
        Spark's ``binaryFile`` source), another job's Delta table as a stream (``DeltaTableSource``) or
        Kafka topics (``KafkaSource``). ``file_source_options`` are that source's options (for a Delta
        table: ``maxFilesPerTrigger``, ``skipChangeCommits``, ...; for Kafka: ``startingOffsets``,
        ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ...).
    :param stateful: the job's ``transform`` keeps state across micro-batches (windows, watermarks,
        ``transformWithStateInPandas``): it runs on the stream itself, and each micro-batch of its
        result is written (see :mod:`spark_jobs.driver.write.stateful`). A stateless job's transform
        runs inside each micro-batch.
    :param event_time: the event-time column, watermark delay and windows of a stateful job.
    :param dimensions: reference files joined to each micro-batch (read again for every batch).
    :param settings: the job's own knobs (thresholds, durations), documented in its module;
        ``$<JOB>_SETTINGS`` (a JSON object) overrides them.
    :param spark_conf: SQL settings the job's query starts with (e.g. the RocksDB state store); set
        only while its query starts, so other queries of the same session keep theirs.
    :param source_file_column: the column of a stateless job's transform result that names the input file
        (or message) each row came from: the pipelined pass writes the rest of a batch from only the files
        that have rows it left (:mod:`spark_jobs.driver.write.pipelined`); ``None``: from every file.
    :param catchup: what starts the catch-up DAG's runs: the ``schedule`` alone, or input landing with the
        ``schedule`` as a safety net (:class:`~spark_jobs.model.catchup.CatchupTrigger`).
    :param log_type: for a file log type (:func:`file_log_type`), what its events and quarantine tables are made
        of: the driver derives their selects from it, and the job module holds only ``transform``
        (:class:`~spark_jobs.model.log_types.LogType`); ``None`` for any other job.
    """

    name: str
    description: str
    default_input: str
    tables: tuple[TableSpec, ...]
    default_trigger: str = "available-now"
    file_source_options: Mapping[str, str] = field(default_factory=dict)
    schedule: str = "@hourly"
    health: HealthThresholds = HealthThresholds()
    tags: tuple[str, ...] = ()
    continuous_trigger: str | None = None
    restart: RestartPolicy = RestartPolicy()
    input_roots: tuple[str, ...] = ("landing", "history")
    alerts: AlertThresholds = AlertThresholds()
    progress: ProgressHistory = ProgressHistory()
    backfill_priority: str = "idle"
    source: SourceSpec = FileSource()
    stateful: bool = False
    event_time: EventTimeSpec | None = None
    dimensions: tuple[DimensionSpec, ...] = ()
    settings: Mapping[str, str] = field(default_factory=dict)
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    source_file_column: str | None = None
    catchup: CatchupTrigger = CatchupTrigger()
    log_type: LogType | None = None

    def __post_init__(self) -> None:
        """Refuse a declaration that contradicts itself, when the registry loads.

        :raises RegistryError: naming the job, the table, the field, the bad value and the fix.
        """
        self.catchup.check(self.name, self.source)
        if self.log_type is not None:
            pair = [self.log_type.events_table, self.log_type.quarantine_table]
            if [t.name for t in self.tables] != pair:
                raise RegistryError(f"job {self.name}: log_type {self.log_type.name!r} writes the tables {pair}, not "
                                    f"{[t.name for t in self.tables]}; declare the job with file_log_type()")
        seen: set[str] = set()
        for table in self.tables:
            if table.name in seen:
                raise RegistryError(f"job {self.name}, table {table.name}: name {table.name!r} is declared twice; "
                                    "give each table of a job its own name")
            seen.add(table.name)
            table.check(self.name)
            if self.stateful and table.route is not None:
                raise RegistryError(f"job {self.name}, table {table.name}: route {table.route!r} is for stateless "
                                    "jobs (a stateful job's select picks its rows); drop the route")
            if not self.stateful and len(self.tables) > 1 and table.route is None:
                raise RegistryError(f"job {self.name}, table {table.name}: route None leaves the table's rows "
                                    "unknown in a stateless job with several tables; give it a route (a SQL "
                                    "condition over the transform's result, e.g. 'reason IS NULL')")

    @property
    def output_mode(self) -> str:
        """The streaming output mode its tables' write modes need: ``complete`` when a table is rewritten
        whole, ``update`` when rows are upserted, else ``append``."""
        modes = {table.write_mode for table in self.tables}
        return "complete" if "complete" in modes else "update" if "upsert" in modes else "append"

    @property
    def accepts_backfill(self) -> bool:
        """Whether ``python -m spark_jobs backfill`` may load files into its tables: it reads files and every
        table holds each key once (a second writer of a table rewritten whole, or of counts, would be wrong)."""
        return self.source.lands_files and all(table.write_mode == "insert" for table in self.tables)

    @property
    def discovers_files(self) -> bool:
        """Whether the job finds its input files by discovery: a file source that declares a key layout
        (:mod:`spark_jobs.control.discovery`, docs/discovery.md); else Spark's own file source lists them."""
        return getattr(self.source, "layout", None) is not None

    @property
    def quarantine_tables(self) -> tuple[str, ...]:
        """The names of its tables that hold what it quarantines, in the order of :attr:`tables`."""
        return tuple(table.name for table in self.tables if table.quarantine)

    @property
    def module(self) -> str:
        """The dotted module holding the job's ``transform`` and, unless it is a file log type, its ``OUTPUTS``
        (:class:`~spark_jobs.driver.job_contract.JobModule`)."""
        return f"spark_jobs.jobs.{self.name}"

    @property
    def input_env_var(self) -> str:
        """The environment variable that overrides :attr:`default_input`."""
        return f"{self.name.upper()}_INPUT"

    def table(self, name: str) -> TableSpec:
        """The output table called ``name``."""
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(name)


def check_jobs(jobs: Iterable[JobSpec]) -> Mapping[str, JobSpec]:
    """The jobs by name, after the checks that span jobs: job names are unique, and a table several jobs
    write (``cloudtrail_events``) is declared identically by each (best: one :class:`TableSpec` shared).

    :raises RegistryError: naming the jobs, the table, the field and the fix.
    """
    by_name: dict[str, JobSpec] = {}
    tables: dict[str, tuple[str, TableSpec]] = {}
    for job in jobs:
        if job.name in by_name:
            raise RegistryError(f"job {job.name}: name {job.name!r} is declared twice; give each job its own name")
        by_name[job.name] = job
        for table in job.tables:
            owner, first = tables.setdefault(table.name, (job.name, table))
            if first != table:
                differ = next(f.name for f in fields(TableSpec) if getattr(first, f.name) != getattr(table, f.name))
                raise RegistryError(
                    f"job {job.name}, table {table.name}: {differ} {getattr(table, differ)!r} differs from job "
                    f"{owner}'s {getattr(first, differ)!r}; a table several jobs write is one declaration: use "
                    f"{owner}'s TableSpec in both")
    return MappingProxyType(by_name)


def file_log_type(log_type: str, *, name: str, description: str, layout: KeyLayout, glob: str, key: str,
                  position: str, identity: str, events: str, quarantine: str, position_may_be_null: bool = False,
                  files_per_trigger: int = FILES_PER_TRIGGER, tags: tuple[str, ...] = (),
                  stats_columns: tuple[str, ...] = (), zorder_by: tuple[str, ...] = (),
                  delivery_date_bound: DeliveryDateBound | None = None,
                  delivery_time_bound: DeliveryTimeBound | None = None, **job: Any) -> JobSpec:
    """The registry entry of a log that lands as files: its events and quarantine tables, their routes, keys,
    partitions and source-file columns, its file source and options, all derived from a few facts
    (:mod:`spark_jobs.model.log_types`). Its job module holds only its parser's ``transform``.

    :param log_type: the log type (``cowrie``): table names, landing folder, parser package, first tag.
    :param name: the job's name (see :class:`JobSpec`).
    :param description: one line for people.
    :param layout: where its files' keys carry their delivery time (:class:`~spark_jobs.model.layout.KeyLayout`).
    :param glob: the file names it reads (a Hadoop glob, Spark's ``pathGlobFilter``).
    :param key: the parser's column that identifies an event (the events table's key, with the date).
    :param position: a record's place in its file as the quarantine names it (the parser's is ``_<position>``).
    :param identity: the parser's column of what a quarantined record claimed to be.
    :param events: the events table's description.
    :param quarantine: the quarantine table's description.
    :param position_may_be_null: a file-level problem has no position
        (see :class:`~spark_jobs.model.log_types.LogType`).
    :param files_per_trigger: files per micro-batch (``maxFilesPerTrigger``).
    :param tags: DAG tags after the log type's name (``streaming`` comes last).
    :param stats_columns: the events table's (see :class:`~spark_jobs.model.tables.TableSpec`).
    :param zorder_by: the events table's.
    :param delivery_date_bound: the events table's.
    :param delivery_time_bound: the events table's.
    :param job: any other :class:`JobSpec` field (``continuous_trigger``, ``catchup``, ``health``, ...).
    """
    kind = LogType(log_type, key=key, position=position, identity=identity, position_may_be_null=position_may_be_null)
    tables = kind.tables(events, quarantine, stats_columns=stats_columns, zorder_by=zorder_by,
                         delivery_date_bound=delivery_date_bound, delivery_time_bound=delivery_time_bound)
    return JobSpec(name=name, description=description, default_input=kind.default_input, tables=tables,
                   source=kind.source(layout), file_source_options=kind.source_options(glob, files_per_trigger),
                   tags=(log_type, *tags, "streaming"), source_file_column=PARSED_SOURCE_FILE, log_type=kind, **job)
