"""Reprocess a Kafka job from a point in time: ``python -m spark_jobs reprocess <kafka job> --from-time T``.

Every message with a timestamp at or after ``T`` up to the latest offsets is read in one batch and
written through the job's own transform and the micro-batch writer (:func:`spark_jobs.driver.write.write_batch`)
under an app id of its own; the tables' insert-only merge keeps them exact.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from pyspark.sql import SparkSession

from spark_jobs.model.errors import UsageError
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.kafka_connection import KafkaConnection
from spark_jobs.model.streams import kafka_subscription
from spark_jobs.driver.job_modules import job_module, output_schemas, table_targets
from spark_jobs.driver.kafka import epoch_ms, read_kafka
from spark_jobs.driver.write import write_batch
from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, create_tables


def reprocess_kafka(spark: SparkSession, job: JobSpec, lake, spec: str, from_time: datetime,
                    audit_id: str | None = None) -> dict:
    """Read every message of ``spec`` with a timestamp at or after ``from_time`` up to the latest offsets, in one
    batch, and write it through the job's own transform and writer.

    The tables' insert-only merge keeps them exact: an event or quarantined message they hold already is not
    added again; one they lost (a restored table, a bad deploy's rows deleted) comes back. The live job's
    checkpoint is not touched (it may run meanwhile: Delta's conflict retries keep both exact).

    :returns: what was read and inserted per table.
    """
    module = job_module(job)
    targets = table_targets(job, lake)
    create_tables(spark, targets, lambda: output_schemas(spark, job))
    options = {k: v for k, v in job.file_source_options.items() if k != "startingOffsets"}
    options["startingTimestamp"] = str(epoch_ms(from_time))
    options["startingOffsetsByTimestampStrategy"] = "latest"  # a partition with nothing that new: nothing to read
    messages = read_kafka(spark, job, spec, options, streaming=False)
    writer = ExactlyOnceWriter(spark, targets, f"reprocess-{audit_id or uuid.uuid4()}")
    written = write_batch(messages, 0, job=job, module=module, writer=writer, targets=targets)
    return {"job": job.name, "from_time": from_time.isoformat(), "topics": spec, "messages": written.inputs,
            "rows": written.carried, "inserted": written.rows, "audit_id": audit_id}


def reprocess_command(job: JobSpec, lake, args) -> int:
    """``python -m spark_jobs reprocess <kafka job> --from-time T [--input TOPICS] [--dry-run]``: one JSON line.

    A dry run starts no JVM: it prints, per partition, the first offset at or after ``T`` and the latest
    (from the brokers), i.e. the messages a run would read.
    """
    import json

    from spark_jobs.control.kafka.lag import offsets_at
    from spark_jobs.control.kafka.options import parse_time
    from spark_jobs.driver.runner import resolve_input
    from spark_jobs.driver.session import build_session, configure_logging

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
