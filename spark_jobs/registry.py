"""The job registry: one declaration per job, read by the CLI, the DAGs, the sensors and the tests.

A job's name is also its module under :mod:`spark_jobs.jobs`, its Spark app name, the prefix of its
DAG ids, its checkpoint folder and the name of its Assets. This module is data only (the shapes are
in :mod:`spark_jobs.model`) and imports nothing heavy (no pyspark), so Airflow can read it while
parsing DAG files without doing any I/O.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from spark_jobs.model.errors import UsageError
from spark_jobs.model.catchup import CatchupTrigger
from spark_jobs.model.forwards import ForwardSpec
from spark_jobs.model.jobs import JobSpec, check_jobs, file_log_type
from spark_jobs.model.kafka_connection import REDACTION_REGEX
from spark_jobs.model.layout import KeyLayout
from spark_jobs.model.oncall import OncallAction, check_actions
from spark_jobs.model.ocsf import ocsf_job
from spark_jobs.model.policies import HealthThresholds, RestartPolicy
from spark_jobs.model.streams import DeltaTableSource, DimensionSpec, EventTimeSpec, FileSource, KafkaSource, WindowSpec
from spark_jobs.model.tables import DeliveryDateBound, DeliveryTimeBound, TableSpec

# CloudTrail's S3 keys: AWSLogs/<account>/CloudTrail/<region>/YYYY/MM/DD/<account>_CloudTrail_<region>_
# YYYYMMDDTHHMMZ_<id>.json.gz. Delivered within about 15 minutes of its events (a late file: hours); a day of
# lookback lets discovery and the window's dedup cover every usual delay, the reconcile the rest.
CLOUDTRAIL_LAYOUT = KeyLayout(name=r"_{YYYY}{MM}{DD}T{hh}{mm}Z[_.]", folders="{YYYY}/{MM}/{DD}", lookback="1 day")

CLOUDTRAIL_ETL = file_log_type(
    "cloudtrail", name="cloudtrail_etl", continuous_trigger="processing-time:10s",
    description="AWS CloudTrail log files -> typed, date-partitioned events, bad input quarantined",
    layout=CLOUDTRAIL_LAYOUT, glob="*.{json,json.gz,jsonl,jsonl.gz,ndjson,ndjson.gz}", files_per_trigger=1000,
    # One row per eventID: CloudTrail delivers some events more than once, a backfill may overlap the live stream,
    # a file may land again under a new name. A file-level problem has no record_index.
    key="eventID", position="record_index", identity="eventID", position_may_be_null=True,
    events="one row per CloudTrail event, typed and flattened, partitioned by event date (UTC)",
    quarantine="records and files that could not be ingested, with the reason and the raw text",
    stats_columns=("eventTime", "eventSource", "eventName", "errorCode", "awsRegion", "recipientAccountId",
                   "userIdentity_accountId", "sourceIPAddress"),
    zorder_by=("eventTime",),  # each compacted file a stretch of event time, which the live MERGE skips files by
    # An event's UTC date is its file's delivery date or the day before, and its eventTime (the same in every
    # delivery) at most 20 minutes before the delivery time (the real samples: 10): a batch's MERGE reads only those.
    delivery_date_bound=DeliveryDateBound("date", 1),
    delivery_time_bound=DeliveryTimeBound("eventTime", minutes_before=20, minutes_after=5),
    # A run when CloudTrail delivers (its files land every few minutes), the hourly cron as a safety net.
    catchup=CatchupTrigger(on="data", poll_seconds=2),
    # The flagship continuous job keeps a warm standby: a killed driver is replaced in seconds, not a cold start
    # (a second driver's memory; on-call switches it with set_warm_standby, docs/continuous-jobs.md).
    restart=RestartPolicy(warm_standby=True),
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
# The accounts file's columns the analytics tables add to each row (spark_jobs.transforms.enrich).
ACCOUNT_COLUMNS = "account_name STRING, owner_team STRING, environment STRING, account_known BOOLEAN"
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
            # A window's row is one per window and key; its date (of window_start) bounds the MERGE to the
            # batch's days.
            unique_key=("date", "window_kind", "window_start", "account_id", "eventSource", "eventName", "is_error"),
            null_safe=("account_id", "eventSource", "eventName"),
            schema="date DATE, window_kind STRING, window_start TIMESTAMP, window_end TIMESTAMP, account_id STRING, "
                   "eventSource STRING, eventName STRING, is_error BOOLEAN, events BIGINT, "
                   f"{ACCOUNT_COLUMNS}, updated_at TIMESTAMP",
        ),
        TableSpec(
            name="cloudtrail_late_events",
            partition_by=("date",),
            description="events that came after the watermark had closed their window: one row per event and "
                        "window, with how late it was",
            unique_key=("date", "eventID", "window_kind", "window_start"),
            schema="date DATE, eventID STRING, window_kind STRING, window_start TIMESTAMP, window_end TIMESTAMP, "
                   "eventTime TIMESTAMP, account_id STRING, eventSource STRING, eventName STRING, is_error BOOLEAN, "
                   "errorCode STRING, awsRegion STRING, sourceIPAddress STRING, watermark TIMESTAMP, "
                   "seconds_behind_watermark DOUBLE, window_closed_seconds DOUBLE, batch_id BIGINT, "
                   f"{ACCOUNT_COLUMNS}, recorded_at TIMESTAMP",
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
            unique_key=("alert_id",),
            # The rules' output (spark_jobs.transforms.alert_rules.OUTPUT_SCHEMA), then the account and the time.
            schema="alert_id STRING, rule STRING, severity STRING, account_id STRING, subject STRING, "
                   "source_ip STRING, window_start TIMESTAMP, window_end TIMESTAMP, event_time TIMESTAMP, "
                   f"event_id STRING, events BIGINT, detail STRING, {ACCOUNT_COLUMNS}, detected_at TIMESTAMP",
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
            schema="word STRING, count BIGINT",
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
            unique_key=("topic", "partition", "offset", "record_index", "reason"),
            null_safe=("record_index",),
            route="reason IS NOT NULL",
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
    source_file_column="_source_file",
)

COWRIE_HONEYPOT = file_log_type(
    "cowrie", name="cowrie_honeypot", tags=("honeypot",), continuous_trigger="processing-time:30s",
    description="Cowrie SSH/telnet honeypot JSON logs -> one typed row per event (connections, logins, commands, "
                "downloads), bad lines quarantined",
    # Cowrie rotates its log daily to cowrie.json.YYYY-MM-DD (gzipped or not), one sub-folder per sensor; never the
    # live cowrie.json, which is still being written.
    layout=KeyLayout(name=r"\.json\.{YYYY}-{MM}-{DD}", lookback="2 days"),
    glob="{*.json.????-??-??,*.json.????-??-??.gz}",
    # event_id: sensor, session, eventid and timestamp (spark_jobs.transforms.cowrie.parse); eventid: what a bad line
    # claimed. A line's number is its place (every quarantined line has one, a damaged gzip's too).
    key="event_id", position="line_number", identity="eventid",
    events="one row per honeypot event (event_id: sensor, session, eventid and timestamp), every shape's fields "
           "typed, partitioned by event date (UTC)",
    quarantine="lines of the honeypot's logs that could not be ingested, with the reason and the raw line",
    stats_columns=("timestamp", "eventid", "session", "src_ip", "username"),
)

SURICATA_EVE = file_log_type(
    "suricata", name="suricata_eve", tags=("ids",), continuous_trigger="processing-time:30s",
    description="Suricata EVE JSON logs -> one typed row per event (alerts, flows, DNS, HTTP, TLS, ... stats), bad "
                "lines quarantined",
    # Rotated by logrotate (eve.json-YYYYMMDD, eve.json.YYYY-MM-DD) or by Suricata (eve-YYYY-MM-DD-HHMM.json), gzipped
    # or not; a name without a date (eve.json, a pcap run's) is dated by its modification time (docs/suricata-eve.md).
    layout=KeyLayout(name=r"(?:\.json[.-]|-){YYYY}-?{MM}-?{DD}(?:-{hh}(?::?{mm}(?::?{ss})?)?)?", lookback="2 days"),
    glob="{*.json,*.json.gz,*.json.[0-9][0-9][0-9][0-9]*,*.json-[0-9][0-9][0-9][0-9]*}",
    # event_id: host, flow_id, event_type, timestamp, tx_id and the event's object (transforms/suricata/parse.py)
    key="event_id", position="line_number", identity="event_type",
    events="one row per EVE event (event_id: host, flow, event type, time, transaction and object), the shared "
           "fields and each type's stable ones typed, every object as JSON text, partitioned by event date (UTC)",
    quarantine="lines of the EVE logs that could not be ingested, with the reason and the raw line",
    stats_columns=("timestamp", "event_type", "src_ip", "dest_ip", "dest_port", "flow_id", "alert_signature_id"),
)

# The OCSF tables beside the raw ones (docs/ocsf.md): each log type's events table read as a stream, one row per event
# in its OCSF class's table (ocsf_<class>, shared by the sources), what OCSF cannot express in <log type>_ocsf_quarantine.
# The mappings are spark_jobs/transforms/<log type>/ocsf.py.
CLOUDTRAIL_OCSF = ocsf_job(
    "cloudtrail", classes=("api_activity", "authentication", "account_change"), continuous_trigger="processing-time:30s",
    description="cloudtrail_events -> OCSF API Activity (6003), Authentication (3002, console logins) and Account "
                "Change (3001, IAM users), one row per event",
)
COWRIE_OCSF = ocsf_job(
    "cowrie", classes=("authentication", "network_activity", "ssh_activity", "process_activity"), tags=("honeypot",),
    continuous_trigger="processing-time:30s",
    description="cowrie_events -> OCSF Authentication (3002), SSH Activity (4007), Network Activity (4001) and Process "
                "Activity (1007), one row per event",
)
SURICATA_OCSF = ocsf_job(
    "suricata", classes=("detection_finding", "network_activity", "dns_activity", "http_activity", "ssh_activity"),
    tags=("ids",), continuous_trigger="processing-time:30s",
    description="suricata_events -> OCSF Detection Finding (2004), Network (4001), DNS (4003), HTTP (4002) and SSH "
                "(4007) Activity, one row per event",
)

# Checked as it loads: an inconsistent declaration fails here, naming it (RegistryError).
JOBS: Mapping[str, JobSpec] = check_jobs((CLOUDTRAIL_ETL, CLOUDTRAIL_ACTIVITY, CLOUDTRAIL_ALERTS, WORD_COUNT,
                                          CLOUDTRAIL_KAFKA, COWRIE_HONEYPOT, SURICATA_EVE, CLOUDTRAIL_OCSF, COWRIE_OCSF,
                                          SURICATA_OCSF))

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

# The on-call actions of the DAG streaming_oncall (spark_jobs.control.oncall.requests): the form's label of each, and
# whether a second user must approve it (those that destroy or rewrite data) and how long the request waits.
ONCALL_ACTION_SPECS: Mapping[str, OncallAction] = check_actions((
    OncallAction("restart", "restart: stop the driver after its micro-batch, start a new one"),
    OncallAction("stop", "stop: pause the continuous DAG (the driver stops after its micro-batch)"),
    OncallAction("pause_supervision", "pause supervision: no restart, no stall kill (the driver keeps running)"),
    OncallAction("resume_supervision", "resume supervision (and unpause the continuous DAG)"),
    OncallAction("set_warm_standby", "warm standby on or off from now on (needs Warm standby; kept for every later run)"),
    OncallAction("rollout", "roll out a new version (needs Version): pre-flight, handover, probation, rollback"),
    OncallAction("rollout_destructive", "roll out a version pre-flight refused (needs Version): new checkpoint, "
                 "tables rebuilt", needs_approval=True, approval_expires_after_seconds=4 * 3600),
    OncallAction("reprocess_from", "reprocess from a time (needs From time)",
                 needs_approval=True, approval_expires_after_seconds=4 * 3600),
    OncallAction("reset_checkpoint", "reset the checkpoint (job stopped; backed up first)",
                 needs_approval=True, approval_expires_after_seconds=4 * 3600),
    OncallAction("rollback_table", "roll a table back to a version (needs Table and Table version)",
                 needs_approval=True, approval_expires_after_seconds=4 * 3600),
))
ONCALL_ACTIONS: Mapping[str, str] = MappingProxyType({a.name: a.label for a in ONCALL_ACTION_SPECS.values()})


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
