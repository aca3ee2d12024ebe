"""CloudTrail's parser: files of ``{"Records": [...]}`` deliveries, JSON-array exports and JSON lines, gzipped or
plain, to one row per record, with what must be quarantined marked (``reason``, ``detail``, ``raw``).

:func:`transform` is the ``cloudtrail_etl`` job's (``spark_jobs/jobs/cloudtrail_etl.py``) and :func:`parse` the
``cloudtrail_kafka`` job's (one message is one event). A file first goes through Python (:mod:`spark_jobs.transforms.
cloudtrail.decode`: gzip by content, UTF-8, a split into records or a salvage of a damaged file), then Spark's JSON
reader parses the records into :data:`~spark_jobs.transforms.cloudtrail.schema.RECORD_SCHEMA`; the rules of
:func:`_quarantine_reason` mark what cannot be an event. The tables, their keys and their two selects are the
registry's (``CLOUDTRAIL_ETL``, a file log type: :mod:`spark_jobs.model.log_types`).
"""

from __future__ import annotations

import functools
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.model.jobs import JobSpec
from spark_jobs.transforms.cloudtrail import decode, reasons
from spark_jobs.transforms.cloudtrail.schema import KNOWN_TOP_LEVEL_KEYS, RAW_JSON_FIELDS, RECORD_SCHEMA

_RECORD = RECORD_SCHEMA.simpleString()


def per_spark_context(build):
    """Cache what ``build()`` returns for as long as the same SparkContext is active.

    Making a Column costs a round trip to the JVM; this job's ~2,500 cost ~0.5 s, once per
    micro-batch if they were made anew. Unresolved Columns can serve any number of plans.
    """
    cache: dict = {}

    @functools.wraps(build)
    def cached():
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        if cache.get("context") is not context:
            cache.update(context=context, value=build())
        return cache["value"]

    return cached


def _piece_stages() -> list[tuple[list, Column | None]]:
    """The selects (each with a filter after it, or ``None``) that turn split files into one row per
    record (or damaged stretch).

    A healthy file's text is parsed once, by Spark's JSON reader, straight into an array of record
    structs; a salvaged file's pieces are parsed one by one into the same struct. That array is
    exploded as it is, by a ``posexplode_outer`` of a column (which Spark compiles, as it does bare
    Spark's ``posexplode``), and what Python noted per record (``raw``, ``rescued``, a piece's
    reason) is looked up by position. Wrapping each record in a struct with its notes would copy
    every record once more, and a file-sized column beside the explode would be copied into every
    row. Columns at the end:
    source_file, record_index, rec, raw (the record's JSON when quarantine may need it), rescued
    (JSON of unknown top-level fields), piece_reason, piece_detail.
    """
    shape, text, pieces, pos = F.col("shape"), F.col("text"), F.col("pieces"), F.col("pos")
    records, unread = F.col("records"), F.col("unread")
    parsed = (F.when(shape == decode.RECORDS, F.from_json(text, f"Records array<{_RECORD}>").getField("Records"))
              .when(shape == decode.ARRAY, F.from_json(text, f"array<{_RECORD}>")))
    salvaged = F.transform(pieces, lambda p: F.when(p["reason"].isNull(), F.from_json(p["raw"], _RECORD)))
    # Python found the file healthy but Spark's reader did not: never drop it silently.
    is_unread = shape.isNotNull() & records.isNull()
    piece = pieces[pos]
    return [
        (["source_file", "shape", "text", "raw", "rescued", "pieces", parsed.alias("records")], None),
        (["source_file", "raw", "rescued", "pieces", is_unread.alias("unread"), F.when(is_unread, text).alias("unread_text"),
          F.coalesce(salvaged, records, F.when(is_unread, F.array(F.lit(None).cast(_RECORD)))).alias("recs")], None),
        # _outer, then a filter for the row it makes of an empty file: a plain posexplode makes Spark
        # infer a filter on the array's size and push it below the parse, which would then run twice.
        (["source_file", "raw", "rescued", "pieces", "unread", "unread_text",
          F.posexplode_outer("recs").alias("pos", "rec")], pos.isNotNull()),
        (["source_file",
         F.when(pieces.isNotNull(), piece["record_index"]).when(~unread, pos).alias("record_index"),
         "rec",
         F.when(pieces.isNotNull(), piece["raw"]).when(unread, F.col("unread_text")).otherwise(F.col("raw")[pos])
         .alias("raw"),
         F.when(pieces.isNotNull(), piece["rescued"]).otherwise(F.col("rescued")[pos]).alias("rescued"),
         F.when(unread, F.lit(reasons.INVALID_JSON)).otherwise(piece["reason"]).alias("piece_reason"),
         F.when(unread, F.lit("Spark's JSON reader could not read this file as CloudTrail records"))
         .otherwise(piece["detail"]).alias("piece_detail")], None),
    ]


def _record_text() -> Column:
    """The record's JSON text: as it came (salvage, or noted by Python), else written back from the struct."""
    return F.coalesce(F.col("raw"), F.to_json(F.col("rec")))


def _quarantine_reason(rec: Column, event_time: Column) -> tuple[Column, Column]:
    """The reason code and detail of a record that cannot be an event; NULL for a good record.

    File-level problems, invalid UTF-8 and records that are not objects come from the Python split
    (``piece_reason``); the rules on the parsed record are here.
    """
    rules = [
        (F.col("piece_reason").isNotNull(), F.col("piece_reason"), F.col("piece_detail")),
        (rec.isNull(), F.lit(reasons.INVALID_JSON), F.lit("Spark's JSON reader could not read the record")),
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


def transform(files: DataFrame, job: JobSpec) -> DataFrame:
    """Parse CloudTrail files into events, and mark what must be quarantined (:func:`parse`).

    :param files: rows of Spark's ``binaryFile`` source (``path``, ``content``), batch or streaming.
    :param job: the registry entry (not used).
    """
    return parse(files)


def parse(files: DataFrame, whole_raw: bool = False) -> DataFrame:
    """Parse CloudTrail files into events, and mark what must be quarantined.

    :param files: rows with ``path`` (the "file") and ``content`` (its bytes), batch or streaming.
    :param whole_raw: a file-level problem's raw text is the whole input, not the text from the damage
        on (``cloudtrail_kafka``: one message is one event).
    :returns: one row per record, or per damaged stretch of a file, with every column of both output
        tables; ``reason`` is NULL for a good event.
    """
    stages, output = _columns()
    frame = files.select("path", "content").mapInArrow(
        functools.partial(decode.split_batches, known=KNOWN_TOP_LEVEL_KEYS, whole_raw=whole_raw), decode.SPLIT_DDL)
    for columns, condition in stages:
        frame = frame.select(*columns)
        if condition is not None:
            frame = frame.where(condition)
    return frame.select(*output)


@per_spark_context
def _columns() -> tuple[list[tuple[list, Column | None]], list[Column]]:
    """The Columns of :func:`transform`: the selects of :func:`_piece_stages`, then the output columns."""
    stages = _piece_stages()
    rec = F.col("rec")
    event_time = F.try_to_timestamp(rec["eventTime"])
    reason, detail = _quarantine_reason(rec, event_time)
    ui, tls = rec["userIdentity"], rec["tlsDetails"]
    ctx = ui["sessionContext"]
    issuer = ctx["sessionIssuer"]
    return stages, [
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
        F.col("rescued").alias("_rescued_data"),
        F.col("source_file").alias("_source_file"),
        F.col("record_index").alias("_record_index"),
        reason.alias("reason"),
        detail.alias("detail"),
        F.when(reason.isNotNull(), _record_text()).alias("raw"),  # only quarantine keeps the raw text
    ]
