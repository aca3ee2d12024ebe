"""The job registry: one declaration per job, read by the CLI, the DAGs, the sensors and the tests.

A job's name is also its module under :mod:`spark_jobs.jobs`, its Spark app name, the suffix of its
DAG ids, its checkpoint folder and the name of its Assets. This module imports nothing heavy (no
pyspark), so Airflow can read it while parsing DAG files without doing any I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from spark_jobs.errors import UsageError
from spark_jobs.streams import (DeltaTableSource, DimensionSpec, EventTimeSpec, FileSource, SourceSpec,
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
    :param source: what the job reads (:mod:`spark_jobs.streams`): files (``FileSource``, the default:
        Spark's ``binaryFile`` source) or another job's Delta table as a stream (``DeltaTableSource``).
        ``file_source_options`` are that source's options (for a Delta table: ``maxFilesPerTrigger``,
        ``skipChangeCommits``, ...).
    :param stateful: the job's ``transform`` keeps state across micro-batches (windows, watermarks,
        ``transformWithStateInPandas``): it runs on the stream itself, and each micro-batch of its
        result is written (see :mod:`spark_jobs.analytics.batch_writer`). A stateless job's transform
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

JOBS: Mapping[str, JobSpec] = MappingProxyType(
    {job.name: job for job in (CLOUDTRAIL_ETL, CLOUDTRAIL_ACTIVITY, CLOUDTRAIL_ALERTS, WORD_COUNT)})


def get_job(name: str) -> JobSpec:
    """The job called ``name``.

    :raises UsageError: naming the unknown job and the known ones.
    """
    try:
        return JOBS[name]
    except KeyError:
        raise UsageError(f"unknown job {name!r}; known jobs: {', '.join(sorted(JOBS))}") from None


def all_tables() -> dict[str, tuple[JobSpec, TableSpec]]:
    """Every table of every job, by table name."""
    return {table.name: (job, table) for job in JOBS.values() for table in job.tables}
