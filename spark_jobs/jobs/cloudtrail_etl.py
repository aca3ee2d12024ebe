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
    """One row per record (or damaged stretch) of each file.

    Healthy files are parsed once, in the JVM, into one VARIANT per record; the typed columns, the
    raw JSON of the varying fields and the list of top-level keys are then read from that binary
    form without parsing text again. Columns: source_file, bad_utf8, record_index, v (the record as
    VARIANT, NULL if it is not valid JSON), raw (the text, when it came as text), piece_reason,
    piece_detail.
    """
    shape, text = F.col("shape"), F.col("text")
    no_text = F.lit(None).cast("string")
    records = F.when(
        F.col("reason").isNull(),
        F.when(shape == decode.RECORDS, F.transform(
            F.from_json(text, "Records array<variant>").getField("Records"), lambda v: F.struct(v.alias("v"), no_text.alias("raw"))))
        .when(shape == decode.ARRAY, F.transform(
            F.from_json(text, "array<variant>"), lambda v: F.struct(v.alias("v"), no_text.alias("raw"))))
        .when(shape == decode.LINES, F.transform(
            F.filter(F.split(text, r"\r?\n"), lambda line: F.trim(line) != ""),
            lambda line: F.struct(F.try_parse_json(line).alias("v"), line.alias("raw")))),
    )
    split = decoded.select("source_file", "bad_utf8", "text", "reason", "detail", records.alias("records"))
    # Files Spark could not split (damaged, invalid JSON, no Records, odd shapes) go to salvage();
    # every other file passes it a NULL and costs nothing there.
    salvaged = F.transform(
        _salvage()(F.when(F.col("records").isNull(), text), F.col("reason"), F.col("detail")),
        lambda p: F.struct(p["record_index"].alias("record_index"), F.try_parse_json(p["raw"]).alias("v"),
                           p["raw"].alias("raw"), p["reason"].alias("reason"), p["detail"].alias("detail")))
    parsed = F.transform("records", lambda r, i: F.struct(
        i.alias("record_index"), r["v"].alias("v"), r["raw"].alias("raw"),
        no_text.alias("reason"), no_text.alias("detail")))
    return split.select("source_file", "bad_utf8", F.explode(F.coalesce(salvaged, parsed)).alias("piece")).select(
        "source_file", "bad_utf8", "piece.record_index", "piece.v", "piece.raw",
        F.col("piece.reason").alias("piece_reason"), F.col("piece.detail").alias("piece_detail"),
    )


def _record_text() -> Column:
    """The record's JSON text: as it came (JSON lines, salvage) or written back from the VARIANT."""
    return F.coalesce(F.col("raw"), F.to_json(F.col("v")))


def _quarantine_reason(rec: Column, fields: Column, event_time: Column) -> tuple[Column, Column]:
    """The reason code and detail of a record that cannot be an event; NULL for a good record.

    :param rec: the record cast to the schema's struct.
    :param fields: the record as a map of its top-level fields (NULL if it is not a JSON object).
    """
    rules = [
        (F.col("piece_reason").isNotNull(), F.col("piece_reason"), F.col("piece_detail")),
        (F.col("v").isNull(), F.lit(reasons.INVALID_JSON), F.lit("the record is not valid JSON")),
        # Evaluated only for files that held invalid UTF-8 (AND stops at a false left side).
        (F.col("bad_utf8") & _record_text().contains("\ufffd"), F.lit(reasons.INVALID_UTF8),
         F.lit("the record holds bytes that are not UTF-8 (shown here as U+FFFD)")),
        (fields.isNull(), F.lit(reasons.NOT_AN_OBJECT),
         F.concat(F.lit("a record must be a JSON object, got: "), F.left(_record_text(), F.lit(80)))),
        (rec["eventTime"].isNull(), F.lit(reasons.MISSING_EVENT_TIME), F.lit("the record has no eventTime")),
        (event_time.isNull(), F.lit(reasons.BAD_EVENT_TIME),
         F.concat(F.lit("eventTime is not an ISO-8601 timestamp: "), F.left(rec["eventTime"], F.lit(80)))),
        (F.coalesce(F.trim(rec["eventID"]), F.lit("")) == "", F.lit(reasons.MISSING_EVENT_ID),
         F.lit("the record has no eventID")),
    ]
    reason, detail = F, F  # F.when(...) starts the chain; Column.when(...) continues it
    for condition, code, text in rules:
        reason, detail = reason.when(condition, code), detail.when(condition, text)
    return reason, detail


def _rescued_data(fields: Column) -> Column:
    """JSON object of the top-level fields the schema does not know; NULL when there are none."""
    known = F.array(*[F.lit(k) for k in KNOWN_TOP_LEVEL_KEYS])
    return F.when(
        F.size(F.array_except(F.map_keys(fields), known)) > 0,
        F.to_json(F.map_filter(fields, lambda key, _: ~F.array_contains(known, key))),
    )


def transform(files: DataFrame) -> DataFrame:
    """Parse CloudTrail files into events, and mark what must be quarantined.

    :param files: rows of Spark's ``binaryFile`` source (``path``, ``content``), batch or streaming.
    :returns: one row per record, or per damaged stretch of a file, with every column of both output
        tables; ``reason`` is NULL for a good event.
    """
    decoded = files.select("path", "content").mapInArrow(decode.decode_batches, decode.DECODED_DDL)
    parsed = _split_records(decoded).select(
        "*",
        F.try_variant_get("v", "$", RECORD_SCHEMA.simpleString()).alias("rec"),
        F.try_variant_get("v", "$", "map<string, variant>").alias("fields"),
    )
    rec, fields = F.col("rec"), F.col("fields")
    event_time = F.try_to_timestamp(rec["eventTime"])
    reason, detail = _quarantine_reason(rec, fields, event_time)
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
        _rescued_data(fields).alias("_rescued_data"),
        F.col("source_file").alias("_source_file"),
        F.col("record_index").alias("_record_index"),
        reason.alias("reason"),
        detail.alias("detail"),
        F.when(reason.isNotNull(), _record_text()).alias("raw"),  # only quarantine keeps the raw text
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
