"""Kafka for the platform: connection settings (:mod:`.connection`), consumer lag from a checkpoint and the
brokers (:mod:`.lag`), a local test broker (:mod:`.broker`); the Spark side is in :mod:`.spark`. Only
:mod:`.spark` imports pyspark."""
