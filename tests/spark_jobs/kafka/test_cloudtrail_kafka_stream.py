"""cloudtrail_kafka on a real broker: 10,000 events on 3 partitions with 2% re-sends and 20 bad messages, a driver
killed with SIGKILL mid-stream and restarted, then the consumer lag while it is stopped and a reprocess from a time.

One scenario (module fixture ``ingested``) feeds the tests in order: the exact tables, the lag the checkpoint
inspection reports against the broker's own offsets, then a reprocess from a timestamp.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from spark_jobs.control.checkpoint.lease import read_lease
from spark_jobs.model.lake import Lake
from tools.kafka_broker import create_topic
from spark_jobs.model.kafka_connection import env_var
from tools.kafka_messages import Message, produce, sample_messages
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.kafka_fixtures import KAFKA_JOB
from tests.helpers.kills import JobDriver, kill_mid_batch, run_command
from tests.helpers.processes import batch_ids

TOPIC = "ct-main"
PARTITIONS = 3
HOUR_MS = 3_600_000
SECRET = "trust-store-secret-5b1f"


def _events(spark, lake: Path) -> list[str]:
    return [r.eventID for r in spark.read.format("delta").load(str(lake / "tables" / "cloudtrail_events"))
            .select("eventID").collect()]


def _quarantine(spark, lake: Path):
    return spark.read.format("delta").load(str(lake / "tables" / "cloudtrail_kafka_quarantine")).collect()


def _checkpoint_offsets(checkpoint: Path) -> dict[int, int]:
    """The next offset per partition of the last committed batch, read straight from offsets/N."""
    last = max(batch_ids(checkpoint / "commits"))
    line = (checkpoint / "offsets" / str(last)).read_text().splitlines()[2]
    return {int(p): o for p, o in json.loads(line)[TOPIC].items()}


@pytest.fixture(scope="module")
def ingested(spark, kafka_broker, run_kafka_job, tmp_path_factory):
    """Produce the sample, run the job as a subprocess with small micro-batches, kill -9 it mid-batch, finish in-process."""
    now_ms = int(time.time() * 1000)
    create_topic(kafka_broker.bootstrap_servers, TOPIC, PARTITIONS)
    sample = sample_messages(10_000, 0.02, 20, PARTITIONS, [now_ms - 3 * HOUR_MS, now_ms - 2 * HOUR_MS])
    produce(kafka_broker.bootstrap_servers, TOPIC, sample.messages)
    lake = tmp_path_factory.mktemp("kafka-lake")
    checkpoint = lake / "checkpoints" / KAFKA_JOB.name
    log = lake.parent / "kafka-killed-driver.log"
    # The killed driver's connection carries a secret (a trust-store password the PLAINTEXT client ignores):
    # it reaches Spark's Kafka options and must not reach the log.
    connection = {"conn_type": "kafka", "host": kafka_broker.bootstrap_servers,
                  "extra": {"ssl.truststore.password": SECRET}}
    command = run_command(KAFKA_JOB.name, "--input", TOPIC, "--lake", str(lake), "--max-offsets-per-trigger", "1500",
                          "--lease-ttl", "2")
    env = {**os.environ, env_var(KAFKA_JOB.source.connection_id): json.dumps(connection)}
    with JobDriver(command, log, env=env) as driver:
        killed = kill_mid_batch(driver, checkpoint, after_commits=2, delay=0.0)
    text = log.read_text()
    assert f"reading Kafka {{'subscribe': '{TOPIC}'}} from {kafka_broker.bootstrap_servers} (PLAINTEXT)" in text
    assert "batch 0:" in text and SECRET not in text
    # The killed driver's lease is free at once, before its ttl: on its own host a holder whose pid is gone holds nothing.
    holder = read_lease(str(Lake(lake).control_path(KAFKA_JOB.name)))
    assert holder is not None and holder.alive_locally() is False and holder.expired(), holder
    summary = run_kafka_job(TOPIC, lake, maxOffsetsPerTrigger="20000")
    return {"sample": sample, "lake": lake, "checkpoint": checkpoint, "killed": killed, "summary": summary,
            "now_ms": now_ms}


def test_ten_thousand_messages_with_resends_and_bad_ones_killed_mid_stream_give_exact_tables(spark, ingested):
    sample, lake = ingested["sample"], ingested["lake"]
    killed = ingested["killed"]
    assert killed.in_flight == killed.committed + 1  # the kill hit a planned, uncommitted batch
    assert (len(sample.messages), len(sample.good_ids), sample.duplicates, len(sample.bad)) == (10_020, 9_800, 200, 20)

    ids = _events(spark, lake)
    assert len(ids) == len(set(ids)) == 9_800
    assert set(ids) == sample.good_ids

    quarantined = _quarantine(spark, lake)
    assert len(quarantined) == 20
    assert {(r.topic, r.partition, r.offset): (r.reason, r.raw) for r in quarantined} == {
        (TOPIC, m.partition, m.offset): (m.reason, (m.value or b"").decode("utf-8", "replace")) for m in sample.bad}


def test_consumer_lag_in_checkpoint_inspect_equals_the_brokers_numbers_while_stopped(ingested, kafka_broker):
    from confluent_kafka import Consumer, TopicPartition

    from spark_jobs.control.checkpoint.inspect import inspect_checkpoint

    waiting = {0: 3, 1: 5, 2: 7}
    sent_ms = int(time.time() * 1000) - 60_000  # a minute old when produced
    produce(kafka_broker.bootstrap_servers, TOPIC,
            [Message(json.dumps({"eventID": f"lag-{p}-{i}", "eventTime": "2024-03-02T00:00:00Z"}).encode(), p, sent_ms,
                     f"lag-{p}-{i}") for p, n in waiting.items() for i in range(n)])
    report = inspect_checkpoint(KAFKA_JOB, ingested["lake"]).to_dict()

    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "test-lag"})
    try:
        latest = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()
    position = _checkpoint_offsets(ingested["checkpoint"])
    lag = {p["partition"]: p["lag"] for p in report["consumer_lag"]["partitions"]}
    assert lag == {p: latest[p] - position[p] for p in range(PARTITIONS)} == waiting
    assert report["backlog_files"] == 15 and report["status"] == "idle" and report["in_flight_files"] == 0
    ages = [p["lag_seconds"] for p in report["consumer_lag"]["partitions"]]
    assert all(60 <= age < 60 + 120 for age in ages), ages
    assert report["input"] == f"kafka:{TOPIC}"

    # The health page's backlog cell says the same (the health summary runs the same inspection).
    if str(PROJECT_ROOT / "plugins") not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT / "plugins"))
    from spark_jobs.control.monitoring.health import check_job
    from streaming.health_page import _row

    row = _row(check_job(KAFKA_JOB, ingested["lake"]))
    assert 'data-backlog="15"' in row and f"{TOPIC}/0: 3, {TOPIC}/1: 5, {TOPIC}/2: 7" in row
    ingested["lag_ids"] = {f"lag-{p}-{i}" for p, n in waiting.items() for i in range(n)}


def test_reprocess_from_a_timestamp_restores_lost_rows_and_leaves_the_table_exact(spark, ingested):
    from delta.tables import DeltaTable

    from spark_jobs.driver.kafka_reprocess import reprocess_kafka
    from spark_jobs.model.lake import Lake

    sample, lake, now_ms = ingested["sample"], ingested["lake"], ingested["now_ms"]
    newer = {m.event_id for m in sample.messages if m.event_id and m.timestamp_ms >= now_ms - 2 * HOUR_MS}
    older_only = sorted(sample.good_ids - newer)
    lost_newer, lost_older = sorted(newer)[:50], older_only[:10]
    table = DeltaTable.forPath(spark, str(lake / "tables" / "cloudtrail_events"))
    table.delete(f"eventID IN ({', '.join(repr(i) for i in lost_newer + lost_older)})")
    assert len(_events(spark, lake)) == 9_800 - 60

    from_time = datetime.fromtimestamp((now_ms - 2 * HOUR_MS) / 1000, timezone.utc)
    result = reprocess_kafka(spark, KAFKA_JOB, Lake(lake), TOPIC, from_time)

    ids = _events(spark, lake)
    lag_ids = ingested.get("lag_ids", set())
    assert len(ids) == len(set(ids))
    # Everything delivered from the time on is back (and the lag test's messages are in); what only came
    # before it stays as it was (deleted rows of older messages are not replayed).
    assert set(ids) == (sample.good_ids - set(lost_older)) | lag_ids
    assert result["inserted"]["cloudtrail_events"] == len(lost_newer) + len(lag_ids)
    assert result["inserted"]["cloudtrail_kafka_quarantine"] == 0
    assert len(_quarantine(spark, lake)) == 20


def test_messages_deleted_before_the_job_read_them_are_reported_and_fail_the_job(spark, ingested, kafka_broker,
                                                                                  run_kafka_job):
    """failOnDataLoss=true: retention (here delete-records) took messages the checkpoint had not read yet."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from spark_jobs.control.checkpoint.inspect import inspect_checkpoint
    from spark_jobs.driver.runner import JobFailed

    lake = ingested["lake"]
    position = _checkpoint_offsets(ingested["checkpoint"])
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for future in admin.delete_records([TopicPartition(TOPIC, 1, position[1] + 2)]).values():
        future.result(30)

    report = inspect_checkpoint(KAFKA_JOB, lake).to_dict()
    lost = {p["partition"]: p["lost"] for p in report["consumer_lag"]["partitions"]}
    assert lost == {0: 0, 1: 2, 2: 0}
    problem = next(p for p in report["problems"] if p["code"] == "kafka_offsets_lost")
    assert problem["severity"] == "error" and f"{TOPIC}/1 offsets {position[1]}-{position[1] + 1}" in problem["explanation"]

    before = sorted(_events(spark, lake))
    with pytest.raises(JobFailed, match="(?i)data (may have been )?lost|failOnDataLoss|DATA_LOSS"):
        run_kafka_job(TOPIC, lake)
    assert sorted(_events(spark, lake)) == before  # nothing of the failed batch was written
