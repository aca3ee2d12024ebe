"""A lake table forwarded to a Kafka topic (:data:`spark_jobs.registry.FORWARDS`; run by :mod:`spark_jobs.driver.forward`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ForwardSpec:
    """One table forwarded to a Kafka topic.

    :param name: the forward's name (its checkpoint folder and query name).
    :param table: the registry table it reads as a stream.
    :param topic: the topic it writes (created by whoever runs the brokers; it is not created here).
    :param key: the column that is each message's key, by which consumers drop at-least-once duplicates.
    :param where: a SQL filter of the rows that go out (``None``: all of them).
    :param connection_id: the Airflow connection with the brokers (:mod:`spark_jobs.model.kafka_connection`).
    """

    name: str
    table: str
    topic: str
    key: str
    where: str | None = None
    connection_id: str = "cloudtrail_kafka"
