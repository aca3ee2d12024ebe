"""Consumer lag of a Kafka job, from its checkpoint and the brokers (no pyspark; ``checkpoint inspect`` uses it).

Spark's Kafka source keeps its offsets in the checkpoint (``offsets/N``: ``{"topic": {"0": 42, ...}}``,
the next offset to read per partition) and commits none to Kafka, so the brokers' consumer-group tools
(``kafka-consumer-groups.sh``) know nothing of the job. The lag is therefore computed here the way those
tools compute it, with the checkpoint as the committed position: per partition, the broker's latest
offset (its high watermark) minus the next offset the last committed batch reads. Its age is how old the
first waiting message is (its timestamp, read from the broker). A partition the checkpoint does not know
yet (the topic grew, or a pattern matched a new topic) is read by Spark from its earliest offset, and
counts so here. Offsets the checkpoint has not read that the broker no longer holds (retention) are
reported as ``lost``: the job (``failOnDataLoss=true``) fails on them.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass

from spark_jobs.model.kafka_connection import KafkaConnection

TIMEOUT_SECONDS = 5.0


def kafka_source_offset(offset) -> dict[str, dict[int, int]] | None:
    """The Kafka source's offset as written in ``offsets/N`` (topic -> partition -> next offset); None for
    another kind of source's offset."""
    if not isinstance(offset, dict) or not offset:
        return None
    found: dict[str, dict[int, int]] = {}
    for topic, partitions in offset.items():
        if not isinstance(partitions, dict):
            return None
        try:
            found[topic] = {int(p): int(o) for p, o in partitions.items() if not isinstance(o, bool)}
        except (TypeError, ValueError):
            return None
    return found


@dataclass
class PartitionLag:
    """One partition's place in the stream.

    :param position: the next offset the job reads (the checkpoint's; the earliest for a partition it
        does not know yet).
    :param earliest: the broker's first offset still held.
    :param latest: the broker's latest offset (the next one written).
    :param lag: messages waiting: ``latest - max(position, earliest)``.
    :param lost: messages the job never read that the broker no longer holds.
    :param oldest_waiting: the timestamp (ms) of the first waiting message; None when nothing waits.
    :param lag_seconds: how old that message is.
    """

    topic: str
    partition: int
    position: int | None
    earliest: int
    latest: int
    lag: int
    lost: int = 0
    in_checkpoint: bool = True
    oldest_waiting: int | None = None
    lag_seconds: float | None = None


def _consumer(connection: KafkaConnection):
    from confluent_kafka import Consumer

    # assign() and get_watermark_offsets() only: nothing joins the group or commits an offset.
    return Consumer({**connection.client_config(), "group.id": "spark-jobs-lag-report", "enable.auto.commit": False,
                     "enable.partition.eof": False, "log_level": 0})


def subscribed_partitions(consumer, subscription: dict[str, str], extra_topics=(),
                          timeout: float = TIMEOUT_SECONDS) -> dict[str, list[int]]:
    """Topic -> partitions the subscription (``subscribe`` or ``subscribePattern``) names on the brokers now."""
    metadata = consumer.list_topics(timeout=timeout)
    if "subscribePattern" in subscription:
        pattern = re.compile(subscription["subscribePattern"])
        wanted = {t for t in metadata.topics if pattern.fullmatch(t) and not t.startswith("__")}
    else:
        wanted = set(subscription["subscribe"].split(","))
    wanted |= set(extra_topics)
    return {topic: sorted(metadata.topics[topic].partitions) if topic in metadata.topics else []
            for topic in sorted(wanted)}


def consumer_lag(connection: KafkaConnection, subscription: dict[str, str], positions: dict[str, dict[int, int]] | None,
                 now_ms: int | None = None, timeout: float = TIMEOUT_SECONDS) -> list[PartitionLag]:
    """Every subscribed partition's lag behind the brokers, given the checkpoint's ``positions``.

    :param positions: the next offset per topic and partition from the checkpoint (None: no batch committed
        yet: every partition counts from its earliest offset, as ``startingOffsets=earliest`` reads).
    """
    from confluent_kafka import TopicPartition

    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    positions = positions or {}
    consumer = _consumer(connection)
    try:
        lags = []
        for topic, partitions in subscribed_partitions(consumer, subscription, positions, timeout).items():
            for partition in partitions:
                earliest, latest = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
                known = partition in positions.get(topic, {})
                position = positions[topic][partition] if known else earliest
                start = max(position, earliest)
                lags.append(PartitionLag(topic, partition, position if known else None, earliest, latest,
                                         max(latest - start, 0), max(min(earliest, latest) - position, 0), known))
        _oldest_waiting(consumer, lags, now_ms, timeout)
    finally:
        consumer.close()
    return lags


def _oldest_waiting(consumer, lags: list[PartitionLag], now_ms: int, timeout: float) -> None:
    """Fill in the timestamp of each lagging partition's first waiting message (one fetch per partition)."""
    from confluent_kafka import TopicPartition

    waiting = {(l.topic, l.partition): l for l in lags if l.lag > 0}
    if not waiting:
        return
    consumer.assign([TopicPartition(l.topic, l.partition, max(l.position or l.earliest, l.earliest))
                     for l in waiting.values()])
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        lag = waiting.pop((message.topic(), message.partition()), None)
        if lag is not None:
            _, stamp = message.timestamp()
            lag.oldest_waiting = stamp
            lag.lag_seconds = round(max(now_ms - stamp, 0) / 1000, 3)
        consumer.pause([TopicPartition(message.topic(), message.partition())])


def offsets_at(connection: KafkaConnection, subscription: dict[str, str], timestamp_ms: int,
               timeout: float = TIMEOUT_SECONDS) -> list[dict]:
    """Per partition: the first offset whose timestamp is at or after ``timestamp_ms``, the latest offset and the
    messages between them (what a reprocess from that time reads)."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(connection)
    try:
        wanted = [TopicPartition(t, p, timestamp_ms)
                  for t, partitions in subscribed_partitions(consumer, subscription, (), timeout).items()
                  for p in partitions]
        found = consumer.offsets_for_times(wanted, timeout=timeout) if wanted else []
        plan = []
        for tp in found:
            _, latest = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=timeout)
            start = latest if tp.offset < 0 else tp.offset  # -1: no message that new
            plan.append({"topic": tp.topic, "partition": tp.partition, "from_offset": start, "latest_offset": latest,
                         "messages": latest - start})
        return plan
    finally:
        consumer.close()


def lag_report(lags: list[PartitionLag], connection: KafkaConnection) -> dict:
    """The ``consumer_lag`` part of ``checkpoint inspect --json``."""
    ages = [l.lag_seconds for l in lags if l.lag_seconds is not None]
    return {"brokers": connection.describe(), "messages": sum(l.lag for l in lags),
            "lost": sum(l.lost for l in lags), "max_lag_seconds": max(ages) if ages else 0.0,
            "partitions": [asdict(l) for l in lags]}
