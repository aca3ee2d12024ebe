"""The Spark side of Kafka: the job's source options, batch and streaming reads, writes to a topic, and
the reprocess of a Kafka job from a point in time.

Everything here is Spark's own Kafka connector (``spark-sql-kafka-0-10``, fetched at set-up by
:mod:`spark_jobs.launch.jars`); this module only assembles its options from the registry, the command line
and the Airflow connection (:mod:`spark_jobs.model.kafka_connection`), and logs the connection without
its secrets.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kafka_connection import KafkaConnection
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.streams import kafka_subscription

log = logging.getLogger("spark_jobs")

# Options only a stream takes (a batch read refuses or ignores them).
STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch of an aware datetime (Kafka's timestamps)."""
    if moment.tzinfo is None:
        raise UsageError(f"time {moment.isoformat()} has no time zone; give it in UTC (…Z or +00:00)")
    return int(moment.timestamp() * 1000)


def source_options(job: JobSpec, spec: str, options: dict[str, str], streaming: bool,
                   connection: KafkaConnection | None = None) -> dict[str, str]:
    """The Kafka source's options: the subscription ``spec``, the connection's ``kafka.*`` settings, then ``options``.

    A ``startingTimestamp`` replaces ``startingOffsets`` (Spark would take the timestamp anyway; dropping
    the other keeps the plan unambiguous). A batch read ends at the latest offsets.
    """
    connection = connection or KafkaConnection.from_airflow(job.source.connection_id)
    chosen = {**kafka_subscription(spec), **connection.spark_options(), **options}
    if "startingTimestamp" in chosen:
        chosen.pop("startingOffsets", None)
    if not streaming:
        chosen = {k: v for k, v in chosen.items() if k not in STREAM_ONLY}
        chosen.setdefault("endingOffsets", "latest")
    return chosen


def read_kafka(spark: SparkSession, job: JobSpec, spec: str, options: dict[str, str], streaming: bool) -> DataFrame:
    """Spark's Kafka source over the topics ``spec`` (``a,b`` or ``pattern:<regex>``), streaming or batch."""
    connection = KafkaConnection.from_airflow(job.source.connection_id)
    chosen = source_options(job, spec, options, streaming, connection)
    log.info("reading Kafka %s from %s (%s)", kafka_subscription(spec), connection.describe(),
             ", ".join(f"{k}={v}" for k, v in sorted(chosen.items()) if not k.startswith("kafka.")))
    reader = spark.readStream if streaming else spark.read
    return reader.format("kafka").options(**chosen).load()


def write_to_topic(frame: DataFrame, topic: str, connection: KafkaConnection, key: str, value_columns=None) -> None:
    """Write ``frame`` to ``topic`` (a batch write of Spark's Kafka sink): the message key is column ``key``,
    the value the row's JSON (of ``value_columns``, default all).

    At least once: a batch written again after a failure sends its messages again, with the same keys,
    so a consumer drops duplicates by key.
    """
    columns = value_columns or frame.columns
    (frame.select(F.col(key).cast("string").alias("key"), F.to_json(F.struct(*columns)).alias("value"))
     .write.format("kafka").options(**connection.spark_options()).option("topic", topic).save())


def reprocess_kafka(spark: SparkSession, job: JobSpec, lake, spec: str, from_time: datetime,
                    audit_id: str | None = None) -> dict:
    """Read every message of ``spec`` with a timestamp at or after ``from_time`` up to the latest offsets, in one
    batch, and write it through the job's own transform and writer.

    The tables' insert-only merge keeps them exact: an event or quarantined message they hold already is not
    added again; one they lost (a restored table, a bad deploy's rows deleted) comes back. The live job's
    checkpoint is not touched (it may run meanwhile: Delta's conflict retries keep both exact).

    :returns: what was read and inserted per table.
    """
    from spark_jobs.driver.runner import job_module, output_schemas, table_targets, write_micro_batch
    from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, create_tables

    module = job_module(job)
    targets = table_targets(job, module, lake)
    create_tables(spark, targets, output_schemas(spark, job))
    options = {k: v for k, v in job.file_source_options.items() if k != "startingOffsets"}
    options["startingTimestamp"] = str(epoch_ms(from_time))
    options["startingOffsetsByTimestampStrategy"] = "latest"  # a partition with nothing that new: nothing to read
    messages = read_kafka(spark, job, spec, options, streaming=False)
    writer = ExactlyOnceWriter(spark, targets, f"reprocess-{audit_id or uuid.uuid4()}")
    carried: dict[str, int] = {}
    read, inserted = write_micro_batch(module, writer, targets, messages, 0, carried)
    return {"job": job.name, "from_time": from_time.isoformat(), "topics": spec, "messages": read,
            "rows": carried, "inserted": inserted, "audit_id": audit_id}


def reprocess_command(job: JobSpec, lake, args) -> int:
    """``python -m spark_jobs reprocess <kafka job> --from-time T [--input TOPICS] [--dry-run]``: one JSON line.

    A dry run starts no JVM: it prints, per partition, the first offset at or after ``T`` and the latest
    (from the brokers), i.e. the messages a run would read.
    """
    import json

    from spark_jobs.control.kafka_lag import offsets_at
    from spark_jobs.control.kafka_options import parse_time
    from spark_jobs.driver.runner import configure_logging, resolve_input
    from spark_jobs.driver.session import build_session

    if args.audit_id is not None:
        try:
            uuid.UUID(args.audit_id)
        except ValueError:
            raise UsageError(f"--audit-id {args.audit_id!r} is not a uuid") from None
    from_time = parse_time(args.from_time, "--from-time")
    spec = str(resolve_input(job, args.input))
    if args.dry_run:
        connection = KafkaConnection.from_airflow(job.source.connection_id)
        plan = offsets_at(connection, kafka_subscription(spec), epoch_ms(from_time))
        print(json.dumps({"job": job.name, "from_time": from_time.isoformat(), "topics": spec, "dry_run": True,
                          "partitions": plan, "messages": sum(p["messages"] for p in plan)}, sort_keys=True))
        return 0
    configure_logging()
    spark = build_session(f"{job.name}_reprocess", extra_conf=dict(job.spark_conf))
    result = reprocess_kafka(spark, job, lake, spec, from_time, args.audit_id)
    print(json.dumps(result, sort_keys=True, default=str))
    return 0
