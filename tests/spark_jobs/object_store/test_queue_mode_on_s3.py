"""Queue mode with moto's real bucket notifications (spark_jobs/control/discovery/notifications.py): S3 event times
ahead of the run's clock change when a file is taken, never whether; a run with messages waiting reads them even
when the listing sees nothing new, and loads a late file at once. One bucket, queue and lake for the module; the
runs are available-now runs in this process's SparkSession."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from collections import Counter

import pytest

from spark_jobs.model.lake import Lake, as_path
from spark_jobs.model.runs import RunOptions
from spark_jobs.model.triggers import parse_trigger
from tools.sample_data import write_sample_landing
from tests.helpers.cloudtrail import JOB
from tests.helpers.s3_fixtures import notification_queue, queue_counts

UTC = dt.timezone.utc
SKEWS = (0, 300, 3600)  # event times ahead of the run: none, 5 minutes, an hour


@pytest.fixture(scope="module")
def stream(s3, s3_spark, bucket, tmp_path_factory):
    """A bucket whose ObjectCreated events go to a queue, a local lake, and ``run()``: one available-now run."""
    from spark_jobs.driver.runner import run_streaming

    trail = bucket("trail")
    name = trail.removeprefix("s3a://")
    sqs, url = notification_queue(s3, name)
    lake = tmp_path_factory.mktemp("queue-lake")

    def run():
        options = RunOptions(as_path(f"{trail}/AWSLogs/"), Lake.at(str(lake)), parse_trigger("available-now"),
                             dict(JOB.file_source_options), queue_url=url)
        return run_streaming(JOB, options, spark=s3_spark)

    yield {"name": name, "sqs": sqs, "url": url, "lake": lake, "run": run}
    s3.events_ahead(0)


def _events(lake) -> list[str]:
    import deltalake

    return deltalake.DeltaTable(str(lake / "tables" / "cloudtrail_events")).to_pyarrow_table(
        columns=["eventID"]).column("eventID").to_pylist()


def test_messages_ahead_of_the_run_by_0s_5min_and_1h_each_land_in_the_table_exactly_once(
        s3, s3_env, stream, tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUDTRAIL_ETL_QUEUE_VISIBILITY_SECONDS", "5")
    landing = tmp_path / "landing"
    manifest = write_sample_landing(landing, files=len(SKEWS), records_per_file=4, seed=64, include_bad_files=False)
    client = s3.client()
    for path, skew in zip(manifest.files_written, SKEWS):  # the clock of S3's events runs ahead by `skew`
        s3.events_ahead(skew)
        client.upload_file(str(path), stream["name"], path.relative_to(landing).as_posix())
    s3.events_ahead(0)
    assert queue_counts(stream["sqs"], stream["url"]) == (len(SKEWS) + 1, 0)  # and S3's s3:TestEvent

    first = stream["run"]()
    events = _events(stream["lake"])
    assert len(events) == len(set(events)) == len(manifest.good_event_ids) == 3 * 4
    assert Counter(events) == Counter(manifest.good_event_ids)
    assert first.input_files == len(SKEWS) and first.messages_not_loaded == {"test_event": 1}
    assert queue_counts(stream["sqs"], stream["url"]) == (0, 0)
    again = stream["run"]()  # the queue is empty: nothing new, said by the queue
    assert again.batches == 0 and again.skipped.startswith(f"nothing new: the queue {stream['url']} holds no "
                                                           "message waiting; 3 file(s) of ")


def test_a_run_with_messages_waiting_and_nothing_new_in_the_listing_window_loads_a_late_file_at_once(
        s3, s3_env, stream, monkeypatch):
    from spark_jobs.control.checkpoint.inspect import inspect_checkpoint

    monkeypatch.setenv("CLOUDTRAIL_ETL_QUEUE_VISIBILITY_SECONDS", "5")
    before = _events(stream["lake"])
    assert before, "runs after the test above, on its lake"
    late = dt.datetime(2024, 2, 20, 8, 5, tzinfo=UTC)  # weeks behind every stem's window: a listing never sees it
    key = f"AWSLogs/111122223333/CloudTrail/us-east-1/{late:%Y/%m/%d}/111122223333_CloudTrail_us-east-1_" \
          f"{late:%Y%m%dT%H%MZ}_late.json.gz"
    record = {"eventID": "late-event-64", "eventTime": f"{late:%Y-%m-%dT%H:%M:%SZ}", "eventName": "GetObject",
              "eventSource": "s3.amazonaws.com", "awsRegion": "us-east-1"}
    s3.client().put_object(Bucket=stream["name"], Key=key, Body=gzip.compress(json.dumps({"Records": [record]}).encode()))
    assert queue_counts(stream["sqs"], stream["url"]) == (1, 0)
    listing = inspect_checkpoint(JOB, str(stream["lake"]), f"s3a://{stream['name']}/AWSLogs/", queue_url="")
    assert listing.backlog_files == 0  # the listing's nothing-new answer; the queue's is one message
    queued = inspect_checkpoint(JOB, str(stream["lake"]), f"s3a://{stream['name']}/AWSLogs/")  # the queue it read
    assert queued.backlog_files == 1 and queued.discovery["queue"]["queue_url"] == stream["url"]
    assert queued.discovery["messages_not_loaded"] == {"test_event": 1, "deferred": 0}

    loaded = stream["run"]()
    assert loaded.skipped is None and loaded.batches == 1 and loaded.input_files == 1
    assert loaded.rows["cloudtrail_events"] == 1 and loaded.messages_not_loaded == {}
    events = _events(stream["lake"])
    assert Counter(events) == Counter(before + ["late-event-64"]) and len(events) == len(set(events))
    assert queue_counts(stream["sqs"], stream["url"]) == (0, 0)
