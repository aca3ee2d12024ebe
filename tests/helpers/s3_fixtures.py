"""The object-store fixtures: an S3 server, moto in server mode on 127.0.0.1 (tools/s3_server.py), one per session.

Its clients get a distinctive secret key (:data:`SECRET`) so that the tests can grep everything a run
left (logs, command lines, tables, pages) for it. ``s3_env`` puts the standard AWS variables in the
test's environment (and so in every subprocess's); ``s3_spark`` points the session's SparkSession at the
server (started before the server, it saw no AWS variables: the test sets S3A's endpoint and gives the
SDK's default credential chain the keys as JVM system properties, never as a Spark setting).
"""

from __future__ import annotations

import threading
import uuid

import pytest

from tests.helpers.cloudtrail import JOB
from tools.bench import queue_kills
from tools.bench.queue_kills import queue_counts  # noqa: F401 - the tests' name for it

ACCESS_KEY = "AKIAOBJECTSTORETESTS"
SECRET = "objstore-Secret-7f3Kq9ZxWv2Lm8"


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    from tools.s3_server import LocalS3

    folder = tmp_path_factory.mktemp("s3-server")
    # its S3 event times can be set ahead of its clock (s3.events_ahead): clock skew, for the notification tests
    server = LocalS3(access_key=ACCESS_KEY, secret_key=SECRET, log_path=folder / "moto.log",
                     event_clock=folder / "event-clock").start()
    yield server
    server.stop()
    assert server.process.poll() is not None


@pytest.fixture
def s3_env(s3, monkeypatch) -> dict[str, str]:
    """The standard AWS variables for the server, in this test's environment (subprocesses inherit them)."""
    for key, value in s3.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("LAKE_ROOT", raising=False)
    return s3.environment()


@pytest.fixture(scope="session")
def bucket(s3):
    """A new bucket: ``bucket("lake")`` -> ``s3a://lake-<random>``."""

    def make(stem: str) -> str:
        return s3.create_bucket(f"{stem}-{uuid.uuid4().hex[:10]}")

    return make


@pytest.fixture(scope="session")
def s3_spark(spark, s3):
    """The session's SparkSession, reaching the server through S3A."""
    from spark_jobs.model.object_store import hadoop_conf

    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hadoop_conf(s3.environment()).items():
        if key.startswith("spark.hadoop."):
            hadoop.set(key.removeprefix("spark.hadoop."), value)
    system = spark.sparkContext._jvm.java.lang.System
    system.setProperty("aws.accessKeyId", s3.access_key)
    system.setProperty("aws.secretAccessKey", s3.secret_key)
    # The landing source reads the bucket from Spark's Python workers, which get the environment the session's
    # Python functions carry (a spark-submit driver's are its own, with the AWS variables it was started with).
    spark.sparkContext.environment.update(s3.environment())
    return spark


@pytest.fixture(scope="session")
def run_job_s3(s3_spark):
    """Run cloudtrail_etl in this process with input and lake on the server: ``run_job_s3(input, lake, ...)``."""
    from spark_jobs.driver.runner import run_streaming
    from spark_jobs.model.lake import Lake, as_path
    from spark_jobs.model.runs import RunOptions
    from spark_jobs.model.triggers import parse_trigger

    def run(input_url: str, lake_url: str, trigger: str = "available-now", writer: str | None = None,
            **file_options: str):
        options = {**JOB.file_source_options, **file_options}
        run_options = RunOptions(as_path(input_url), Lake.at(lake_url), parse_trigger(trigger), options, writer=writer)
        return run_streaming(JOB, run_options, spark=s3_spark)

    return run


def notification_queue(s3, bucket_name: str) -> tuple[object, str]:
    """An SQS queue on ``s3``'s server receiving the bucket's ``s3:ObjectCreated:*`` events through moto's real bucket
    notification configuration (each upload then sends S3's own event JSON); the SQS client and the queue's URL."""
    return queue_kills.notification_queue(s3, bucket_name)


def at_once(**calls) -> dict:
    """Run each ``name=callable`` in its own thread at the same time; their results by name.

    :raises AssertionError: naming the calls that raised, with their exceptions.
    """
    results, errors = {}, {}

    def run(name, call):
        try:
            results[name] = call()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors[name] = exc

    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not errors, errors
    return results
