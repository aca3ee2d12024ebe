"""The backlog of a job reading Kafka, for :func:`spark_jobs.control.checkpoint.inspect.inspect_checkpoint`.

The checkpoint's offsets of the last committed batch are the job's position; the brokers (reached
through the job's Airflow connection, :mod:`spark_jobs.model.kafka_connection`) say how far each partition
has grown (:mod:`spark_jobs.control.kafka.lag`). ``backlog_files`` counts messages for a Kafka job, and
``consumer_lag`` holds the per-partition numbers and their age. No broker, no connection: the
backlog is unknown and a warning says why (the rest of the report does not depend on it).
"""

from __future__ import annotations

from datetime import datetime

from spark_jobs.model.errors import UsageError
from spark_jobs.model.jobs import JobSpec


def kafka_backlog(report, job: JobSpec, given, entries: dict, committed: int, now: datetime) -> None:
    """Fill ``report``'s input, backlog (messages), in-flight messages and ``consumer_lag``."""
    from spark_jobs.model.kafka_connection import KafkaConnection
    from spark_jobs.control.kafka.lag import consumer_lag, kafka_source_offset, lag_report
    from spark_jobs.model.inputs import named_input
    from spark_jobs.model.streams import kafka_subscription

    def offset(batch: int):
        entry = entries.get(batch)
        return kafka_source_offset(entry.sources[0]) if entry and entry.sources else None

    done = offset(committed) if committed >= 0 else None
    planned = offset(max(entries)) if report.batch_in_flight is not None and entries else None
    # The topics: as given, else as the runner would resolve them, else the ones the checkpoint has read
    # (a job started with --input TOPICS and inspected without it), else the registry's.
    read = ",".join(sorted((planned or done or {}).keys()))
    spec = named_input(job, given, default=read or None)
    report.input = f"kafka:{spec}"
    try:
        connection = KafkaConnection.from_airflow(job.source.connection_id)
        subscription = kafka_subscription(spec)
    except UsageError as exc:
        report.add("kafka_connection_missing", "warning", f"the backlog is unknown: {exc}",
                   f"export the connection ($AIRFLOW_CONN_{job.source.connection_id.upper()}) where you inspect")
        return
    try:
        lags = consumer_lag(connection, subscription, done, int(now.timestamp() * 1000))
    except Exception as exc:  # noqa: BLE001 - a broker that does not answer leaves the backlog unknown
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        report.add("kafka_unreachable", "warning",
                   f"the brokers {connection.describe()} did not answer ({first}), so the backlog is unknown",
                   "check the brokers and the connection; the job fails the same way if it cannot reach them")
        return
    report.consumer_lag = lag_report(lags, connection)
    report.backlog_files = report.consumer_lag["messages"]
    if planned is not None:
        report.in_flight_files = sum(max(o - (done or {}).get(t, {}).get(p, o), 0)
                                     for t, parts in planned.items() for p, o in parts.items())
    else:
        report.in_flight_files = 0
    lost = [l for l in lags if l.lost]
    if lost:
        where = ", ".join(f"{l.topic}/{l.partition} offsets {l.position}-{l.earliest - 1}" for l in lost[:5])
        report.add("kafka_offsets_lost", "error",
                   f"{sum(l.lost for l in lost)} message(s) the job has not read are no longer on the brokers "
                   f"(retention deleted them, or the topic was recreated): {where}",
                   "the job fails on them (failOnDataLoss=true); if their events came another way too, reprocess "
                   "from a time or reset the checkpoint knowingly; otherwise they are lost")
