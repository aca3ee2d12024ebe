"""cloudtrail_etl: AWS CloudTrail log files become typed events; bad input goes to quarantine.

Usage::

    python -m spark_jobs run cloudtrail_etl --input landing/cloudtrail --trigger available-now
    spark-submit --master 'local[2]' spark_jobs/__main__.py run cloudtrail_etl --input landing/cloudtrail

Reads CloudTrail files as S3 delivers them (``{"Records":[...]}``), JSON-array exports and JSON lines,
gzipped or plain, and writes ``cloudtrail_events`` (one typed row per event, partitioned by UTC date)
and ``cloudtrail_quarantine`` (what could not be ingested, with the reason and the raw text).

:func:`transform` is pure: the same function runs on ``spark.read`` and ``spark.readStream`` of
Spark's ``binaryFile`` source; :data:`OUTPUTS` picks each table's rows and columns from its result.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.cloudtrail import decode, reasons
from spark_jobs.cloudtrail.schema import (
    CORRUPT_COLUMN,
    KNOWN_TOP_LEVEL_KEYS,
    MAX_RAW_CHARS,
    RAW_JSON_FIELDS,
    RECORD_SCHEMA,
)



@functools.cache
def _salvage():
    """The salvage UDF (made on first use: making a UDF needs a running SparkContext)."""
    return F.udf(decode.salvage_row, decode.PIECES_DDL, useArrow=True)


def _split_records(decoded: DataFrame) -> DataFrame:
    """One row per record (or damaged stretch) of each file: source_file, record_index, raw, ..."""
    shape, text = F.col("shape"), F.col("text")
    records = F.when(
        F.col("reason").isNull(),
        F.when(shape == decode.RECORDS, F.from_json(text, "Records array<string>").getField("Records"))
        .when(shape == decode.ARRAY, F.from_json(text, "array<string>"))
        .when(shape == decode.LINES, F.filter(F.split(text, r"\r?\n"), lambda line: F.trim(line) != "")),
    )
    no_reason = F.lit(None).cast("string")
    split = decoded.select("source_file", "bad_utf8", "text", "reason", "detail", records.alias("records"))
    # Files Spark could not split (damaged, invalid JSON, no Records, odd shapes) go to salvage();
    # every other file passes it a NULL and costs nothing there.
    pieces = F.coalesce(
        _salvage()(F.when(F.col("records").isNull(), text), F.col("reason"), F.col("detail")),
        F.transform("records", lambda raw, i: F.struct(
            i.alias("record_index"), raw.alias("raw"), no_reason.alias("reason"), no_reason.alias("detail"))),
    )
    return split.select("source_file", "bad_utf8", F.explode(pieces).alias("piece")).select(
        "source_file", "bad_utf8", "piece.record_index", "piece.raw",
        F.col("piece.reason").alias("piece_reason"), F.col("piece.detail").alias("piece_detail"),
    )


def _quarantine_reason(rec: Column, event_time: Column) -> tuple[Column, Column]:
    """The reason code and detail of a record that cannot be an event; NULL for a good record."""
    raw = F.col("raw")
    rules = [
        (F.col("piece_reason").isNotNull(), F.col("piece_reason"), F.col("piece_detail")),
        (F.col("bad_utf8") & raw.contains("\ufffd"), F.lit(reasons.INVALID_UTF8),
         F.lit("the record holds bytes that are not UTF-8 (shown here as U+FFFD)")),
        (~F.ltrim(raw).startswith("{"), F.lit(reasons.NOT_AN_OBJECT),
         F.concat(F.lit("a record must be a JSON object, got: "), F.left(raw, F.lit(80)))),
        (rec[CORRUPT_COLUMN].isNotNull(), F.lit(reasons.INVALID_JSON), F.lit("the record is not valid JSON")),
        (rec["eventTime"].isNull(), F.lit(reasons.MISSING_EVENT_TIME), F.lit("the record has no eventTime")),
        (event_time.isNull(), F.lit(reasons.BAD_EVENT_TIME),
         F.concat(F.lit("eventTime is not an ISO-8601 timestamp: "), F.left(rec["eventTime"], F.lit(80)))),
        (F.coalesce(F.trim(rec["eventID"]), F.lit("")) == "", F.lit(reasons.MISSING_EVENT_ID),
         F.lit("the record has no eventID")),
    ]
    reason, detail = F, F
    for condition, code, text in rules:
        reason, detail = reason.when(condition, code), detail.when(condition, text)
    return reason, detail


def _rescued_data(raw: Column) -> Column:
    """JSON object of the top-level fields the schema does not know; NULL when there are none."""
    known = F.array(*[F.lit(k) for k in KNOWN_TOP_LEVEL_KEYS])
    unknown_keys = F.array_except(F.json_object_keys(raw), known)
    every_field = F.from_json(raw, "map<string, variant>")
    return F.when(
        F.size(unknown_keys) > 0,
        F.to_json(F.map_filter(every_field, lambda key, _: ~F.array_contains(known, key))),
    )


def transform(files: DataFrame) -> DataFrame:
    """Parse CloudTrail files into events, and mark what must be quarantined.

    :param files: rows of Spark's ``binaryFile`` source (``path``, ``content``), batch or streaming.
    :returns: one row per record, or per damaged stretch of a file, with every column of both output
        tables; ``reason`` is NULL for a good event.
    """
    decoded = files.select("path", "content").mapInArrow(decode.decode_batches, decode.DECODED_DDL)
    pieces = _split_records(decoded)
    rec = F.from_json("raw", RECORD_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN})
    parsed = pieces.withColumn("rec", rec)
    rec = F.col("rec")
    event_time = F.try_to_timestamp(rec["eventTime"])
    reason, detail = _quarantine_reason(rec, event_time)
    ui, tls = rec["userIdentity"], rec["tlsDetails"]
    ctx = ui["sessionContext"]
    issuer = ctx["sessionIssuer"]
    return parsed.select(
        event_time.alias("eventTime"),
        F.to_date(event_time).alias("date"),
        *[rec[name].alias(name) for name in (
            "eventID", "eventVersion", "eventSource", "eventName", "eventType", "eventCategory",
            "awsRegion", "sourceIPAddress", "userAgent", "errorCode", "errorMessage", "requestID",
            "apiVersion", "recipientAccountId", "sharedEventID", "vpcEndpointId", "vpcEndpointAccountId")],
        rec["readOnly"].try_cast("boolean").alias("readOnly"),
        rec["managementEvent"].try_cast("boolean").alias("managementEvent"),
        rec["sessionCredentialFromConsole"].try_cast("boolean").alias("sessionCredentialFromConsole"),
        *[ui[name].alias(f"userIdentity_{name}") for name in (
            "type", "principalId", "arn", "accountId", "accessKeyId", "userName", "invokedBy",
            "identityProvider", "credentialId")],
        *[issuer[name].alias(f"userIdentity_sessionIssuer_{name}") for name in (
            "type", "principalId", "arn", "accountId", "userName")],
        F.try_to_timestamp(ctx["attributes"]["creationDate"]).alias("userIdentity_sessionCreationDate"),
        ctx["attributes"]["mfaAuthenticated"].try_cast("boolean").alias("userIdentity_mfaAuthenticated"),
        ctx["sourceIdentity"].alias("userIdentity_sourceIdentity"),
        ctx["webIdFederationData"].alias("userIdentity_webIdFederationData"),
        ui["onBehalfOf"].alias("userIdentity_onBehalfOf"),
        *[tls[name].alias(f"tlsDetails_{name}") for name in ("tlsVersion", "cipherSuite", "clientProvidedHostHeader")],
        *[rec[name].alias(name) for name in RAW_JSON_FIELDS],
        _rescued_data(F.col("raw")).alias("_rescued_data"),
        F.col("source_file").alias("_source_file"),
        F.col("record_index").alias("_record_index"),
        reason.alias("reason"),
        detail.alias("detail"),
        F.when(reason.isNotNull(), F.col("raw")).alias("raw"),  # only quarantine keeps the raw text
    )


def is_event(parsed: DataFrame) -> Column:
    """Whether a row of :func:`transform`'s result is a good event (else it is quarantined)."""
    return parsed["reason"].isNull()


def events(parsed: DataFrame) -> DataFrame:
    """Rows and columns of ``cloudtrail_events``."""
    return parsed.where(is_event(parsed)).drop("reason", "detail", "raw")


def quarantine(parsed: DataFrame) -> DataFrame:
    """Rows and columns of ``cloudtrail_quarantine``."""
    raw = F.coalesce(F.col("raw"), F.lit(""))
    quarantined_at = F.current_timestamp()
    return parsed.where(~is_event(parsed)).select(
        F.col("_source_file").alias("source_file"),
        F.col("_record_index").alias("record_index"),
        "reason",
        "detail",
        F.left(raw, F.lit(MAX_RAW_CHARS)).alias("raw"),
        (F.length(raw) > MAX_RAW_CHARS).alias("raw_truncated"),
        F.length(raw).alias("raw_length"),
        "eventID",
        quarantined_at.alias("quarantined_at"),
        F.to_date(quarantined_at).alias("ingest_date"),
    )


OUTPUTS = {"cloudtrail_events": events, "cloudtrail_quarantine": quarantine}
# Which table each row goes to, for counting rows per table in one pass.
ROUTE = lambda parsed: F.when(is_event(parsed), "cloudtrail_events").otherwise("cloudtrail_quarantine")  # noqa: E731
