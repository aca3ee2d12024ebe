"""Forward a lake table's new rows to a Kafka topic: alerts, and selected events, for other systems.

Usage::

    python -m spark_jobs forward cloudtrail_alerts_to_kafka [--lake L] [--trigger processing-time:10s]
    python -m spark_jobs forward console_logins_to_kafka --trigger available-now

Each forward is declared once in the registry (:data:`spark_jobs.registry.FORWARDS`): the table it
reads as a stream (Delta's streaming source: every commit after the checkpoint's offset), an optional
SQL filter, the topic, the key column and the Airflow connection. The rows go out through Spark's own
Kafka sink (``writeStream.format("kafka")``), one JSON object per message, with the key column as the
message key; the checkpoint is ``<lake>/checkpoints/<forward name>``.

**At least once.** Spark's Kafka sink is not transactional: a micro-batch that fails or is killed after
sending some messages is sent again whole at the restart, and a forward replayed from a new checkpoint
sends everything again. Every message of a row carries the same key (``alert_id``: stable for the life
of an alert; ``eventID`` for events) and the same value, so a consumer keeps the first message per key
(a compacted topic does this by itself) and sees each alert or event once.
"""

from __future__ import annotations

import logging
import time
from spark_jobs.model.errors import UsageError
from spark_jobs.model.forwards import ForwardSpec

log = logging.getLogger("spark_jobs")


def run_forward(spec: ForwardSpec, lake_root=None, trigger_spec: str = "available-now", spark=None,
                topic: str | None = None) -> dict:
    """Run the forward until its trigger ends (available-now) or SIGTERM/SIGINT (processing-time).

    :returns: ``{"forward", "topic", "batches", "rows"}``.
    """
    from spark_jobs.model.kafka_connection import KafkaConnection
    from spark_jobs.model.lake import Lake
    from spark_jobs.driver.session import build_session
    from spark_jobs.model.triggers import parse_trigger

    trigger = parse_trigger(trigger_spec)
    lake = Lake.at(lake_root)
    connection = KafkaConnection.from_airflow(spec.connection_id)
    source = lake.table_path(spec.table)
    if not (source / "_delta_log").is_dir():
        raise UsageError(f"table {spec.table} does not exist at {source}; run its job first")
    long_running = not trigger.available_now
    spark = spark or build_session(spec.name, ui=long_running, long_running=long_running)
    from pyspark.sql import functions as F

    rows = spark.readStream.format("delta").option("skipChangeCommits", "true").load(str(source))
    if spec.where:
        rows = rows.where(spec.where)
    messages = rows.select(F.col(spec.key).cast("string").alias("key"),
                           F.to_json(F.struct(*[F.col(c) for c in rows.columns])).alias("value"))
    log.info("forwarding %s%s to Kafka topic %s on %s", spec.table, f" where {spec.where}" if spec.where else "",
             topic or spec.topic, connection.describe())
    query = (messages.writeStream.format("kafka").queryName(spec.name).options(**connection.spark_options())
             .option("topic", topic or spec.topic)
             .option("checkpointLocation", str(lake.checkpoint_path(spec.name)))
             .trigger(**trigger.writer_kwargs()).start())
    stopped = _stop_on_signal(query)
    try:
        query.awaitTermination()
    finally:
        stopped()
    sent = sum(p.numInputRows for p in query.recentProgress)
    if query.exception() is not None:
        raise RuntimeError(f"forward {spec.name} failed: {str(query.exception()).strip().splitlines()[0]}")
    return {"forward": spec.name, "topic": topic or spec.topic, "batches": len(query.recentProgress), "rows": sent}


def _stop_on_signal(query):
    """SIGTERM/SIGINT stop the query after its micro-batch; returns the function that restores the handlers."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {}

    def handle(signum, _frame):
        log.warning("%s received: stopping the forward", signal.Signals(signum).name)
        threading.Thread(target=lambda: (time.sleep(0.1), query.stop()), daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handle)
    return lambda: [signal.signal(sig, handler) for sig, handler in previous.items()]
