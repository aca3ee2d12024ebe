"""The Spark side of Kafka: the job's source options, batch and streaming reads, and
its fixed schema (the reprocess of a Kafka job from a point in time is :mod:`spark_jobs.driver.kafka_reprocess`).

Everything here is Spark's own Kafka connector (``spark-sql-kafka-0-10``, fetched at set-up by
:mod:`spark_jobs.launch.jars`); this module only assembles its options from the registry, the command line
and the Airflow connection (:mod:`spark_jobs.model.kafka_connection`), and logs the connection without
its secrets.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kafka_connection import KafkaConnection
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.streams import kafka_subscription

log = logging.getLogger("spark_jobs")

# The rows of Spark's Kafka source (its fixed schema): a job's transform runs on an empty frame of it to
# find its tables' schemas.
KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
])
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


