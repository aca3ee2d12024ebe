"""Generated CloudTrail events as Kafka messages, with re-deliveries and bad messages, and the producer that sends them.

Used by the tests and trials of ``cloudtrail_kafka``: :func:`sample_messages` says exactly what the
tables must hold afterwards (the distinct good eventIDs; one quarantine row per bad message), and
:func:`produce` sends the messages with a real Kafka producer (``confluent_kafka``) and returns where
each one landed (partition, offset), which is what the quarantine rows name.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from spark_jobs.transforms.cloudtrail import reasons
from tools.sample_data import generate_records

# Each bad message, and the reason the quarantine gives it.
BAD_MESSAGES: tuple[tuple[bytes | None, str], ...] = (
    (b'{"eventVersion": "1.08", "eventID": "cut-off', reasons.INVALID_JSON),
    (b"", reasons.EMPTY_FILE),
    (None, reasons.EMPTY_FILE),  # a tombstone: no value at all
    (b"42", reasons.NO_RECORDS),
    (b'{"hello": "world"}', reasons.NO_RECORDS),
    (b'{"eventVersion": "1.08", "eventName": "GetObject", "eventTime": "2024-03-01T00:00:00Z"}',
     reasons.MISSING_EVENT_ID),
    (b'{"eventVersion": "1.08", "eventID": "no-time-1", "eventName": "GetObject"}', reasons.MISSING_EVENT_TIME),
    (b'{"eventVersion": "1.08", "eventID": "bad-time-1", "eventTime": "yesterday"}', reasons.BAD_EVENT_TIME),
    (b'{"eventVersion": "1.08", "eventID": "utf8-1", "eventTime": "2024-03-01T00:00:00Z", "userAgent": "\xff\xfe"}',
     reasons.INVALID_UTF8),
    (b"not json at all", reasons.INVALID_JSON),
)


@dataclass
class Message:
    """One message to send.

    :param value: the bytes (None: a tombstone).
    :param partition: the partition it goes to.
    :param timestamp_ms: its CreateTime.
    :param event_id: the eventID of a good event (None for a bad message).
    :param reason: the quarantine reason of a bad message.
    """

    value: bytes | None
    partition: int
    timestamp_ms: int
    event_id: str | None = None
    reason: str | None = None
    key: bytes | None = None
    offset: int | None = None  # set by produce()


@dataclass
class SampleMessages:
    messages: list[Message] = field(default_factory=list)

    @property
    def good_ids(self) -> set[str]:
        return {m.event_id for m in self.messages if m.event_id}

    @property
    def bad(self) -> list[Message]:
        return [m for m in self.messages if m.reason]

    @property
    def duplicates(self) -> int:
        return sum(1 for m in self.messages if m.event_id) - len(self.good_ids)


def sample_messages(events: int, duplicate_share: float, bad: int, partitions: int, timestamps_ms: list[int],
                    seed: int = 11, start: datetime = datetime(2024, 3, 1, tzinfo=timezone.utc)) -> SampleMessages:
    """``events`` good messages (``duplicate_share`` of them re-sends of an earlier event, to any partition) and
    ``bad`` bad ones (cycling through :data:`BAD_MESSAGES`), shuffled, spread over ``partitions``.

    :param timestamps_ms: the messages' CreateTimes: message *i* of the shuffled list gets
        ``timestamps_ms[i * len(timestamps_ms) // total]`` (so the first half can be older than the second).
    """
    rng = random.Random(seed)
    distinct = events - int(round(events * duplicate_share))
    records = []
    while len(records) < distinct:
        records += generate_records(rng, min(100, distinct - len(records)),
                                    start + timedelta(minutes=5 * (len(records) // 100)))
    payloads = [(json.dumps(r, separators=(",", ":")).encode(), r["eventID"], None) for r in records]
    payloads += [rng.choice(payloads) for _ in range(events - distinct)]
    payloads += [(value, None, reason) for value, reason in (BAD_MESSAGES[i % len(BAD_MESSAGES)] for i in range(bad))]
    # Shuffled: a re-send may even come before the first delivery (on another partition), as it can in Kafka.
    order = list(range(len(payloads)))
    rng.shuffle(order)
    total = len(payloads)
    sample = SampleMessages()
    for i, index in enumerate(order):
        value, event_id, reason = payloads[index]
        sample.messages.append(Message(value, rng.randrange(partitions), timestamps_ms[i * len(timestamps_ms) // total],
                                       event_id, reason, key=event_id.encode() if event_id else None))
    return sample


def produce(bootstrap_servers: str, topic: str, messages: list[Message], timeout: float = 60.0) -> None:
    """Send ``messages`` in order (idempotent producer, acks=all) and record each one's offset."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 20, "log_level": 0})
    failures = []

    def delivered(error, record, message=None):
        if error is not None:
            failures.append(str(error))
        else:
            message.offset = record.offset()

    for message in messages:
        while True:
            try:
                producer.produce(topic, value=message.value, key=message.key, partition=message.partition,
                                 timestamp=message.timestamp_ms,
                                 on_delivery=lambda e, r, m=message: delivered(e, r, m))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(timeout)
    if left or failures:
        raise RuntimeError(f"{left} message(s) not delivered to {topic}, failures: {failures[:3]}")
