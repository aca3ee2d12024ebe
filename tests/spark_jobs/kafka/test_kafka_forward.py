"""Alerts forwarded to a Kafka topic keyed by alert_id: new alerts arrive once per run, and a replay from a new
checkpoint sends them again under the same keys, so a consumer keeping one message per key sees no new alert."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict

from tools.kafka_broker import create_topic
from spark_jobs.driver.forward import run_forward
from spark_jobs.registry import FORWARDS

TOPIC = "ct-alerts"
SCHEMA = "alert_id string, rule string, account_id string, subject string"


def _consume(bootstrap: str) -> list[tuple[str, dict]]:
    """Every message of the topic, from the start: (key, value)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-forward", "enable.auto.commit": False})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        out = []
        while len(out) < end:
            message = consumer.poll(10)
            assert message is not None, f"only {len(out)} of {end} messages came back"
            if not message.error():
                out.append((message.key().decode(), json.loads(message.value())))
        return out
    finally:
        consumer.close()


def test_alerts_arrive_keyed_by_alert_id_and_a_replay_adds_no_new_key(spark, kafka_broker, tmp_path):
    spec = FORWARDS["cloudtrail_alerts_to_kafka"]
    lake = tmp_path / "lake"
    table = str(lake / "tables" / "cloudtrail_alerts")
    create_topic(kafka_broker.bootstrap_servers, TOPIC, 1)
    first = [("a1", "root_identity_use", "111122223333", "root"), ("a2", "account_silent", "444455556666", "-"),
             ("a3", "console_login_failures", "111122223333", "alice")]
    spark.createDataFrame(first, SCHEMA).write.format("delta").save(table)

    assert run_forward(spec, lake, spark=spark, topic=TOPIC)["rows"] == 3
    spark.createDataFrame([("a4", "root_identity_use", "444455556666", "root")], SCHEMA) \
        .write.format("delta").mode("append").save(table)
    assert run_forward(spec, lake, spark=spark, topic=TOPIC)["rows"] == 1  # only the new alert
    sent = _consume(kafka_broker.bootstrap_servers)
    assert sorted(key for key, _ in sent) == ["a1", "a2", "a3", "a4"]  # each alert once
    assert all(value["alert_id"] == key for key, value in sent)

    shutil.rmtree(lake / "checkpoints" / spec.name)  # a replay: a new checkpoint reads the whole table again
    assert run_forward(spec, lake, spark=spark, topic=TOPIC)["rows"] == 4
    by_key = defaultdict(list)
    for key, value in _consume(kafka_broker.bootstrap_servers):
        by_key[key].append(value)
    assert sorted(by_key) == ["a1", "a2", "a3", "a4"]  # no new key
    assert all(len(values) == 2 and values[0] == values[1] for values in by_key.values())  # the same alert twice
