"""The control plane, without pyspark, one package per concept: ``checkpoint`` (the checkpoint and its lease),
``discovery``, ``supervision``, ``monitoring``, ``catchup`` (catch-up runs and backfills), ``oncall`` (on-call
requests, their approval, the audit), ``kafka`` (a Kafka job's lag and options), ``lake`` (Delta tables through
delta-rs)."""
