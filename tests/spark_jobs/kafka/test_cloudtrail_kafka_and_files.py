"""The same events as S3 files and as Kafka messages (bare, in EventBridge's envelope, as a whole S3 delivery): one
row each in cloudtrail_events, whichever job wrote it first."""

from __future__ import annotations

import json
import time

from tools.kafka_broker import create_topic
from tools.kafka_messages import Message, produce
from tools.sample_data import write_sample_landing
from tests.helpers.cloudtrail import source_records

TOPIC = "ct-both-ways"


def _envelope(record: dict) -> bytes:
    """The event as an EventBridge rule delivers it ("AWS API Call via CloudTrail")."""
    return json.dumps({"version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
                       "detail-type": "AWS API Call via CloudTrail", "source": "aws.s3",
                       "account": record.get("recipientAccountId"), "time": record["eventTime"],
                       "region": record.get("awsRegion"), "resources": [], "detail": record}).encode()


def test_the_same_events_as_files_and_as_messages_are_one_row_each(spark, tmp_path, kafka_broker, run_job,
                                                                   run_kafka_job):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_sample_landing(landing, files=4, records_per_file=25, seed=5, include_bad_files=False)
    files = sorted(landing.rglob("*.json.gz"))
    records = [r for f in files for r in source_records(f)]
    assert len(records) == len({r["eventID"] for r in records}) == 100

    now_ms = int(time.time() * 1000)
    bare = [Message(json.dumps(r).encode(), i % 2, now_ms, r["eventID"]) for i, r in enumerate(records[:60])]
    wrapped = [Message(_envelope(r), 1, now_ms, r["eventID"]) for r in records[60:90]]
    delivery = Message(json.dumps({"Records": records[90:]}).encode(), 0, now_ms)
    create_topic(kafka_broker.bootstrap_servers, TOPIC, 2)
    produce(kafka_broker.bootstrap_servers, TOPIC, bare + wrapped + [delivery])

    first = run_kafka_job(TOPIC, lake)
    assert first.rows == {"cloudtrail_events": 100, "cloudtrail_kafka_quarantine": 0}
    second = run_job(landing, lake)
    assert second.rows == {"cloudtrail_events": 0, "cloudtrail_quarantine": 0}  # every event was there already

    table = spark.read.format("delta").load(str(lake / "tables" / "cloudtrail_events"))
    rows = {r.eventID: r for r in table.collect()}
    assert len(rows) == table.count() == 100 and set(rows) == {r["eventID"] for r in records}
    # The message's place is the row's source; the envelope was unwrapped into the same typed columns.
    for record in records[60:90]:
        row = rows[record["eventID"]]
        assert row._source_file.startswith(f"kafka://{TOPIC}/1/")
        assert (row.eventName, row.eventSource, row.awsRegion) == (record["eventName"], record["eventSource"],
                                                                   record["awsRegion"])
    assert {rows[r["eventID"]]._record_index for r in records[90:]} == set(range(10))
