"""Bare Spark doing the job's work the plain way: the yardstick the benchmark measures the job against.

``spark.read.json`` with an explicit schema (``Records array<struct<...>>`` from
:data:`spark_jobs.transforms.cloudtrail.schema.RECORD_SCHEMA`), ``posexplode``, the same flattening and typing
as the ``cloudtrail_events`` table, and a ``date``-partitioned parquet write. What it does not do,
and the job does: per-file decoding that survives damaged files, the quarantine table,
``_rescued_data`` (unknown top-level keys), and exactly-once commits.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructField, StructType

from spark_jobs.transforms.cloudtrail.schema import RAW_JSON_FIELDS, RECORD_SCHEMA

EVENT_FIELDS = (
    "eventID", "eventVersion", "eventSource", "eventName", "eventType", "eventCategory", "awsRegion",
    "sourceIPAddress", "userAgent", "errorCode", "errorMessage", "requestID", "apiVersion",
    "recipientAccountId", "sharedEventID", "vpcEndpointId", "vpcEndpointAccountId")
BOOLEAN_FIELDS = ("readOnly", "managementEvent", "sessionCredentialFromConsole")
IDENTITY_FIELDS = ("type", "principalId", "arn", "accountId", "accessKeyId", "userName", "invokedBy",
                   "identityProvider", "credentialId")
ISSUER_FIELDS = ("type", "principalId", "arn", "accountId", "userName")
TLS_FIELDS = ("tlsVersion", "cipherSuite", "clientProvidedHostHeader")

# Options of the JSON reader tried for the bare baseline; the fastest is kept (see the report).
READ_VARIANTS = {
    "defaults": {},
    # Spread small gzipped files evenly over the cores: no 4 MB open cost per file, 16 MB splits.
    "even_splits": {"spark.sql.files.openCostInBytes": "0", "spark.sql.files.maxPartitionBytes": str(16 << 20)},
}


def records_schema() -> StructType:
    """``Records array<struct<...>>``: the schema of a CloudTrail S3 delivery, for ``spark.read.json``."""
    record = StructType([f for f in RECORD_SCHEMA.fields if f.name != "_corrupt_record"])
    return StructType([StructField("Records", ArrayType(record))])


def raw_records(spark: SparkSession, input_path: Path) -> DataFrame:
    """One row per record of every file under ``input_path``: ``rec``, ``_source_file``, ``_record_index``."""
    files = spark.read.schema(records_schema()).option("recursiveFileLookup", "true").json(str(input_path))
    return files.select(F.col("_metadata.file_path").alias("_source_file"),
                        F.posexplode("Records").alias("_record_index", "rec"))


def flatten(records: DataFrame) -> DataFrame:
    """The typed, flattened columns of ``cloudtrail_events`` (all but ``_rescued_data``)."""
    rec: Column = F.col("rec")
    ui, tls = rec["userIdentity"], rec["tlsDetails"]
    ctx = ui["sessionContext"]
    event_time = F.try_to_timestamp(rec["eventTime"])
    return records.select(
        event_time.alias("eventTime"),
        F.to_date(event_time).alias("date"),
        *[rec[n].alias(n) for n in EVENT_FIELDS],
        *[rec[n].try_cast("boolean").alias(n) for n in BOOLEAN_FIELDS],
        *[ui[n].alias(f"userIdentity_{n}") for n in IDENTITY_FIELDS],
        *[ctx["sessionIssuer"][n].alias(f"userIdentity_sessionIssuer_{n}") for n in ISSUER_FIELDS],
        F.try_to_timestamp(ctx["attributes"]["creationDate"]).alias("userIdentity_sessionCreationDate"),
        ctx["attributes"]["mfaAuthenticated"].try_cast("boolean").alias("userIdentity_mfaAuthenticated"),
        ctx["sourceIdentity"].alias("userIdentity_sourceIdentity"),
        ctx["webIdFederationData"].alias("userIdentity_webIdFederationData"),
        ui["onBehalfOf"].alias("userIdentity_onBehalfOf"),
        *[tls[n].alias(f"tlsDetails_{n}") for n in TLS_FIELDS],
        *[rec[n].alias(n) for n in RAW_JSON_FIELDS],
        "_source_file",
        "_record_index",
    )


def events(spark: SparkSession, input_path: Path) -> DataFrame:
    """The events of every file under ``input_path``, parsed, exploded and flattened."""
    return flatten(raw_records(spark, input_path))


def write_events(spark: SparkSession, input_path: Path, out: Path) -> None:
    """Parse, explode, flatten and write ``date``-partitioned parquet to ``out`` (one Spark job)."""
    events(spark, input_path).write.mode("overwrite").partitionBy("date").parquet(str(out))


def errors_by_source(frame: DataFrame, day: str) -> list[tuple[str, int]]:
    """The ad-hoc query: events with an ``errorCode`` per ``eventSource`` on UTC date ``day``."""
    rows = (frame.where((F.col("date") == F.lit(day).cast("date")) & F.col("errorCode").isNotNull())
            .groupBy("eventSource").count().collect())
    return sorted((r.eventSource, r["count"]) for r in rows)


def errors_by_source_raw(spark: SparkSession, input_path: Path, day: str) -> list[tuple[str, int]]:
    """:func:`errors_by_source` over the raw JSON files."""
    rec = F.col("rec")
    records = raw_records(spark, input_path).select(
        F.to_date(F.try_to_timestamp(rec["eventTime"])).alias("date"),
        rec["errorCode"].alias("errorCode"), rec["eventSource"].alias("eventSource"))
    return errors_by_source(records, day)
