"""The job registry: one declaration per job, read by the CLI, the DAGs, the sensors and the tests.

A job's name is also its module under :mod:`spark_jobs.jobs`, its Spark app name, the suffix of its
DAG ids, its checkpoint folder and the name of its Assets. This module imports nothing heavy (no
pyspark), so Airflow can read it while parsing DAG files without doing any I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kafka_connection import REDACTION_REGEX
from spark_jobs.model.forwards import ForwardSpec
from spark_jobs.model.streams import (DeltaTableSource, DimensionSpec, EventTimeSpec, FileSource, KafkaSource, SourceSpec,
                                WindowSpec)

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


@dataclass(frozen=True)
class HealthThresholds:
    """Limits the checkpoint-health sensors hold a job to.

    :param max_batch_age_seconds: a running job whose last commit is older than this is stalled.
    :param max_pending_files: more unprocessed input files than this is lag worth alerting on.
    :param lease_ttl_seconds: a driver's lease on the checkpoint whose heartbeat is older than this
        has expired (another driver may take over; the holder itself stops writing).
    """

    max_batch_age_seconds: int = 15 * 60
    max_pending_files: int = 10_000
    lease_ttl_seconds: float = 30


@dataclass(frozen=True)
class AlertThresholds:
    """When a job's health opens an incident (one alert when it opens, one when it resolves).

    Evaluated by :mod:`spark_jobs.control.monitoring.health` (the health sensor's trigger delivers the alerts;
    ``python -m spark_jobs status`` and the health page show them). The stall alert uses the job's
    :class:`HealthThresholds` (no commit for ``max_batch_age_seconds`` while input waits).

    :param slow_batches: falling behind: this many micro-batches in a row processed rows slower than
        they arrived (``processedRowsPerSecond < inputRowsPerSecond``) while input waits.
    :param max_backlog_files: more input files waiting than this; ``None``: the job's
        ``HealthThresholds.max_pending_files``.
    :param max_quarantine_rate: the share of the last ``quarantine_window_batches`` batches' rows that
        went to the quarantine table, above which bad input is an incident.
    :param quarantine_window_batches: the batches the quarantine rate is taken over.
    :param max_restarts_in_window: the supervisor restarted the driver this many times within its
        restart window (or gave up): the job keeps failing.
    """

    slow_batches: int = 5
    max_backlog_files: int | None = None
    max_quarantine_rate: float = 0.05
    quarantine_window_batches: int = 10
    max_restarts_in_window: int = 3


@dataclass(frozen=True)
class ProgressHistory:
    """How a job's drivers keep their micro-batches' progress in the lake's ``streaming_progress`` table.

    :param enabled: record each micro-batch's progress (Spark's typed progress object) as a row.
    :param flush_seconds: rows are buffered in the driver and appended (delta-rs, off the query's
        thread) at most this often, and when the run ends.
    :param retention_days: rows older than this are deleted (whole days; the table is partitioned by
        date) by the drivers' recorders, at start and every hour.
    :param compact_every_commits: the recorder compacts the table's small files after this many of
        its appends.
    """

    enabled: bool = True
    flush_seconds: float = 30.0
    retention_days: int = 7
    compact_every_commits: int = 100


@dataclass(frozen=True)
class RestartPolicy:
    """How the supervisor of a continuous job restarts its driver (``python -m spark_jobs supervise``).

    The backoff before restart *n* (n consecutive failures) is ``initial_backoff_seconds *
    multiplier ** (n - 1)``, capped at ``max_backoff_seconds``. After ``max_restarts`` restarts within
    ``window_seconds`` the next failure is not restarted: the supervisor gives up and tells a person
    once. A run that stayed healthy for ``healthy_reset_seconds`` clears both counts.

    :param initial_backoff_seconds: the wait before the first restart.
    :param multiplier: each further consecutive failure multiplies the wait by this.
    :param max_backoff_seconds: the longest wait.
    :param max_restarts: restarts allowed within ``window_seconds`` before giving up.
    :param window_seconds: the sliding window of the restart budget.
    :param healthy_reset_seconds: a run healthy for this long resets the consecutive failures and the
        budget.
    :param poll_seconds: how often the supervisor looks at its driver, its lease and the checkpoint.
    :param stop_grace_seconds: after SIGTERM, how long the driver gets to finish its micro-batch
        before its process group is killed (below Airflow's 60 s ``killed_task_cleanup_time``).
    :param stall_after_seconds: a driver whose lease heartbeat is older than this is stalled (a
        paused or hung process); ``None``: the lease's own ttl (after which it may not write anyway).
    """

    initial_backoff_seconds: float = 2.0
    multiplier: float = 2.0
    max_backoff_seconds: float = 300.0
    max_restarts: int = 5
    window_seconds: float = 1800.0
    healthy_reset_seconds: float = 600.0
    poll_seconds: float = 1.0
    stop_grace_seconds: float = 45.0
    stall_after_seconds: float | None = None


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
    :param table_format: ``delta``, the only format: every table is a Delta table (the file-sink
        ``parquet`` format was removed; ``python -m spark_jobs lake convert`` converts such a lake).
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
        (:mod:`spark_jobs.control.priority`); ``$<NAME>_BACKFILL_PRIORITY`` or ``backfill --priority`` override it.
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
    """

    name: str
    description: str
    default_input: str
    tables: tuple[TableSpec, ...]
    default_trigger: str = "available-now"
    file_source_options: Mapping[str, str] = field(default_factory=dict)
    schedule: str = "@hourly"
    table_format: str = "delta"
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
        return self.source.kind == "files" and all(table.write_mode == "insert" for table in self.tables)

    @property
    def module(self) -> str:
        """The dotted module holding the job's ``transform`` and ``outputs``."""
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


CLOUDTRAIL_ETL = JobSpec(
    name="cloudtrail_etl",
    description="AWS CloudTrail log files -> typed, date-partitioned events, bad input quarantined",
    default_input="landing/cloudtrail",
    tables=(
        TableSpec(
            name="cloudtrail_events",
            partition_by=("date",),
            description="one row per CloudTrail event, typed and flattened, partitioned by event date (UTC)",
            stats_columns=("eventTime", "eventSource", "eventName", "errorCode", "awsRegion", "recipientAccountId",
                           "userIdentity_accountId", "sourceIPAddress"),
        ),
        TableSpec(
            name="cloudtrail_quarantine",
            partition_by=("ingest_date",),
            description="records and files that could not be ingested, with the reason and the raw text",
            quarantine=True,
        ),
    ),
    file_source_options={
        # Read every sub-folder (AWSLogs/<account>/CloudTrail/<region>/YYYY/MM/DD/) and only
        # finished log files: a file being written under a temp name (x.json.gz.tmp, x._COPYING_)
        # does not match, and Spark's file source skips names starting with '.' or '_'.
        "recursiveFileLookup": "true",
        "pathGlobFilter": "*.{json,json.gz,jsonl,jsonl.gz,ndjson,ndjson.gz}",
        "maxFilesPerTrigger": "1000",
        "latestFirst": "false",
    },
    schedule="@hourly",
    tags=("cloudtrail", "streaming"),
    continuous_trigger="processing-time:10s",
)

# Who owns each AWS account: joined to the analytics jobs' rows in every micro-batch.
ACCOUNTS = DimensionSpec(
    name="accounts",
    default_path="reference/accounts.csv",
    key="account_id",
    columns=("account_name", "owner_team", "environment"),
    key_pattern=r"\d{12}",
)

# The analytics jobs read cloudtrail_events as a stream. A restore of the events table (a commit that
# removes rows) is skipped rather than failing the stream; OPTIMIZE commits carry no data change and
# are never read.
EVENTS_STREAM_OPTIONS = {"maxFilesPerTrigger": "1000", "skipChangeCommits": "true"}
# The state store transformWithStateInPandas needs (and the one that keeps large state off the heap).
ROCKSDB = {"spark.sql.streaming.stateStore.providerClass":
           "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}

CLOUDTRAIL_ACTIVITY = JobSpec(
    name="cloudtrail_activity",
    description="cloudtrail_events -> event counts per time window, account, service, API and error/no-error; "
                "events too late to count kept in a ledger",
    default_input="",
    source=DeltaTableSource("cloudtrail_events"),
    stateful=True,
    event_time=EventTimeSpec(
        column="eventTime",
        watermark_delay="30 minutes",
        windows=(WindowSpec("tumbling_5m", "5 minutes"), WindowSpec("sliding_1h_15m", "1 hour", "15 minutes")),
    ),
    dimensions=(ACCOUNTS,),
    tables=(
        TableSpec(
            name="cloudtrail_activity",
            partition_by=("date",),
            description="events per event-time window, account, eventSource, eventName and error/no-error; late "
                        "events within the watermark correct their window (MERGE per micro-batch)",
            write_mode="upsert",
        ),
        TableSpec(
            name="cloudtrail_late_events",
            partition_by=("date",),
            description="events that came after the watermark had closed their window: one row per event and "
                        "window, with how late it was",
        ),
    ),
    file_source_options=EVENTS_STREAM_OPTIONS,
    schedule="@hourly",
    tags=("cloudtrail", "streaming", "analytics"),
    continuous_trigger="processing-time:30s",
    spark_conf=ROCKSDB,
)

CLOUDTRAIL_ALERTS = JobSpec(
    name="cloudtrail_alerts",
    description="cloudtrail_events -> security alerts from stateful rules (failed console sign-in bursts, "
                "root use, accounts gone silent), each fired once",
    default_input="",
    source=DeltaTableSource("cloudtrail_events"),
    stateful=True,
    dimensions=(ACCOUNTS,),
    tables=(
        TableSpec(
            name="cloudtrail_alerts",
            description="one row per alert: rule, account, who, the event-time window, details; its alert_id is "
                        "stable, so a replay never repeats it",
        ),
    ),
    file_source_options=EVENTS_STREAM_OPTIONS,
    # See spark_jobs.jobs.cloudtrail_alerts for what each setting does.
    settings={
        "console_login_failures": "5",
        "console_login_window": "10 minutes",
        "root_window": "1 hour",
        "silent_after": "2 hours",
        "allowed_lateness": "1 hour",
        "state_ttl": "24 hours",
    },
    schedule="@hourly",
    tags=("cloudtrail", "streaming", "security"),
    continuous_trigger="processing-time:30s",
    # transformWithStateInPandas in processing-time mode (state TTL and timers) would run a micro-batch
    # after every micro-batch forever (available-now never ends); timers are checked in batches with data.
    spark_conf={**ROCKSDB, "spark.sql.streaming.noDataMicroBatches.enabled": "false"},
)

WORD_COUNT = JobSpec(
    name="word_count",
    description="the Structured Streaming quickstart: text files -> running count of every word (complete mode)",
    default_input="landing/words",
    source=FileSource("text"),
    stateful=True,
    tables=(
        TableSpec(
            name="word_counts",
            description="every word seen in the text files and how often; rewritten whole by each micro-batch",
            write_mode="complete",
        ),
    ),
    file_source_options={"maxFilesPerTrigger": "100"},
    schedule="@hourly",
    tags=("streaming", "quickstart"),
    continuous_trigger="processing-time:10s",
    spark_conf=ROCKSDB,
)

CLOUDTRAIL_KAFKA = JobSpec(
    name="cloudtrail_kafka",
    description="CloudTrail events on Kafka topics (one JSON event per message) -> the same cloudtrail_events "
                "(one row per eventID with the files), bad messages quarantined with topic, partition and offset",
    default_input="",
    source=KafkaSource(topics="cloudtrail-events", connection_id="cloudtrail_kafka"),
    tables=(
        CLOUDTRAIL_ETL.tables[0],  # cloudtrail_events, shared with cloudtrail_etl (its owner)
        TableSpec(
            name="cloudtrail_kafka_quarantine",
            partition_by=("ingest_date",),
            description="Kafka messages that could not be ingested: topic, partition, offset, reason and the raw "
                        "message",
            quarantine=True,
        ),
    ),
    file_source_options={
        # A first start (no checkpoint) reads everything the topic still holds; a restart resumes from
        # the checkpoint's offsets whatever this says. startingTimestamp (run --starting-timestamp)
        # replaces it for a first start from a point in time.
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "20000",
        # Fail rather than skip when offsets the checkpoint has not read are gone (retention deleted
        # them, the topic was recreated): the table promises every event once, and a silent gap breaks
        # that. The error names the offsets; reprocess from a time or reset the checkpoint, knowingly.
        "failOnDataLoss": "true",
    },
    schedule="@hourly",
    tags=("cloudtrail", "streaming", "kafka"),
    continuous_trigger="processing-time:10s",
    input_roots=(),
    # Its backlog is counted in messages (consumer lag), not files.
    health=HealthThresholds(max_pending_files=200_000),
    # The Kafka options carry the SASL credentials: Spark redacts them in plans, logs and the UI.
    spark_conf={"spark.sql.redaction.options.regex": REDACTION_REGEX},
)

JOBS: Mapping[str, JobSpec] = MappingProxyType(
    {job.name: job for job in (CLOUDTRAIL_ETL, CLOUDTRAIL_ACTIVITY, CLOUDTRAIL_ALERTS, WORD_COUNT, CLOUDTRAIL_KAFKA)})

# Lake tables forwarded to Kafka topics for other systems (python -m spark_jobs forward NAME; at least once,
# keyed so that consumers drop duplicates: see spark_jobs.driver.forward).
FORWARDS: Mapping[str, ForwardSpec] = MappingProxyType({f.name: f for f in (
    ForwardSpec("cloudtrail_alerts_to_kafka", table="cloudtrail_alerts", topic="cloudtrail-alerts", key="alert_id"),
    ForwardSpec("console_logins_to_kafka", table="cloudtrail_events", topic="cloudtrail-console-logins", key="eventID",
                where="eventName = 'ConsoleLogin'"),
)})

# Tables of the platform itself, not written by a job's stream (``python -m spark_jobs sql`` shows them too).
OPS_AUDIT = TableSpec(
    name="ops_audit",
    description="one row per on-call action of streaming_oncall (refused and dry runs too): who, when, what, "
                "why, outcome, table versions before and after",
)
STREAMING_PROGRESS = TableSpec(
    name="streaming_progress",
    partition_by=("date",),
    description="one row per executed micro-batch of every job's stream (Spark's progress, rows per table, "
                "backlog), written by the driver's progress recorder (spark_jobs.control.monitoring.progress)",
)
PLATFORM_TABLES: Mapping[str, TableSpec] = MappingProxyType({t.name: t for t in (OPS_AUDIT, STREAMING_PROGRESS)})

# The on-call actions of the DAG streaming_oncall (spark_jobs.control.oncall_requests), with the form's label of each.
ONCALL_ACTIONS: Mapping[str, str] = MappingProxyType({
    "restart": "restart: stop the driver after its micro-batch, start a new one",
    "stop": "stop: pause the continuous DAG (the driver stops after its micro-batch)",
    "pause_supervision": "pause supervision: no restart, no stall kill (the driver keeps running)",
    "resume_supervision": "resume supervision (and unpause the continuous DAG)",
    "reprocess_from": "reprocess from a time (needs From time)",
    "reset_checkpoint": "reset the checkpoint (job stopped; backed up first)",
    "rollback_table": "roll a table back to a version (needs Table and Table version)",
})


def get_job(name: str) -> JobSpec:
    """The job called ``name``.

    :raises UsageError: naming the unknown job and the known ones.
    """
    try:
        return JOBS[name]
    except KeyError:
        raise UsageError(f"unknown job {name!r}; known jobs: {', '.join(sorted(JOBS))}") from None


def all_tables() -> dict[str, tuple[JobSpec, TableSpec]]:
    """Every table of every job, by table name, with its owner: the first job that declares it (a table
    several jobs write, like ``cloudtrail_events``, is one :class:`TableSpec` in each of them)."""
    tables: dict[str, tuple[JobSpec, TableSpec]] = {}
    for job in JOBS.values():
        for table in job.tables:
            tables.setdefault(table.name, (job, table))
    return tables


def table_specs() -> list[TableSpec]:
    """Every job's table once, in registry order."""
    return [table for _, table in all_tables().values()]
