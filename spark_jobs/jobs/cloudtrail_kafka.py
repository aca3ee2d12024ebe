"""cloudtrail_kafka: CloudTrail events from Kafka topics become rows of the same ``cloudtrail_events``.

Usage::

    export AIRFLOW_CONN_CLOUDTRAIL_KAFKA='{"conn_type": "kafka", "host": "127.0.0.1:9092"}'
    python -m spark_jobs run cloudtrail_kafka --input cloudtrail-events --trigger available-now
    python -m spark_jobs run cloudtrail_kafka --input 'pattern:cloudtrail-.*' --max-offsets-per-trigger 5000

Each message holds one CloudTrail event as JSON, as an EventBridge rule or a Firehose/Lambda bridge
delivers them: the bare event (``{"eventVersion": ..., "eventID": ...}``), or EventBridge's envelope
(``{"detail-type": ..., "detail": {event}}``), which is unwrapped first. A message may also hold a
whole S3 delivery (``{"Records": [...]}``) or JSON lines of events. :func:`transform` hands every
message to ``cloudtrail_etl``'s transform as one input (its "file" is
``kafka://<topic>/<partition>/<offset>``), so a message is parsed, typed and judged exactly as a
record in a log file is. Good events go to ``cloudtrail_events`` under the same key (``eventID``,
``date``) as the file job's: an event that arrives both as a file and as a message, twice on the
topic, or again after a restart or a reprocess, is one row. Everything else goes to
``cloudtrail_kafka_quarantine`` with the message's topic, partition and offset, the reason and the
whole message as raw text (an empty message or tombstone is ``empty_file``).

:func:`transform` is pure and runs on ``spark.read`` and ``spark.readStream`` of the Kafka source alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.model.jobs import JobSpec
from spark_jobs.registry import CLOUDTRAIL_ETL
from spark_jobs.transforms.cloudtrail.parse import parse
from spark_jobs.transforms.quarantine import log_type_selects

if TYPE_CHECKING:
    from spark_jobs.driver.job_contract import BatchContext

QUARANTINE = "cloudtrail_kafka_quarantine"
# The file job's two selects: the events one as it is, the quarantine one with the message's place added here.
_FILE_SELECTS = log_type_selects(CLOUDTRAIL_ETL.log_type)
MESSAGE_PREFIX = "kafka://"
_MESSAGE = r"^kafka://(.+)/(\d+)/(\d+)$"


def message_id() -> Column:
    """A message's place as the ETL transform's "file": ``kafka://<topic>/<partition>/<offset>``."""
    return F.concat(F.lit(MESSAGE_PREFIX), F.col("topic"), F.lit("/"), F.col("partition").cast("string"), F.lit("/"),
                    F.col("offset").cast("string"))


def unwrapped_value() -> Column:
    """The message's bytes, or the ``detail`` of an EventBridge envelope (a JSON object with ``detail-type``).

    A message with no value (a tombstone) is empty bytes, so it is quarantined as ``empty_file``: a NULL
    content means a file that was gone when it was read, which a message never is.
    """
    text = F.col("value").cast("string")
    detail = F.get_json_object(text, "$.detail")
    envelope = ((F.instr(text, '"detail-type"') > 0) & F.get_json_object(text, "$['detail-type']").isNotNull()
                & F.startswith(F.ltrim(detail), F.lit("{")))
    return F.when(envelope, F.encode(detail, "UTF-8")).otherwise(F.coalesce(F.col("value"), F.lit(b"")))


def transform(messages: DataFrame, job: JobSpec) -> DataFrame:
    """Parse Kafka messages into events, and mark what must be quarantined.

    :param messages: rows of Spark's Kafka source (``topic``, ``partition``, ``offset``, ``value``, ...).
    :param job: the registry entry (not used).
    :returns: ``cloudtrail_etl.transform``'s rows: one per event (or damaged message); ``reason`` is
        NULL for a good event; ``_source_file`` names the message.
    """
    files = messages.select(message_id().alias("path"), unwrapped_value().alias("content"))
    return parse(files, whole_raw=True)


def quarantine(parsed: DataFrame, context: BatchContext | None = None) -> DataFrame:
    """Columns of ``cloudtrail_kafka_quarantine`` (of the rows its route takes): the message's topic, partition
    and offset first."""
    rows = _FILE_SELECTS["cloudtrail_quarantine"](parsed, context)
    place = F.col("source_file")
    return rows.select(
        F.regexp_extract(place, _MESSAGE, 1).alias("topic"),
        F.regexp_extract(place, _MESSAGE, 2).cast("int").alias("partition"),
        F.regexp_extract(place, _MESSAGE, 3).cast("long").alias("offset"),
        *[c for c in rows.columns if c != "source_file"],
    )


# cloudtrail_events is the file job's table (one row per eventID, whichever way it came in: its key, first
# delivery and route are the registry's one declaration).
OUTPUTS = {"cloudtrail_events": _FILE_SELECTS["cloudtrail_events"], QUARANTINE: quarantine}
