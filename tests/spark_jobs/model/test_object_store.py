"""Where each client finds the bucket: the standard AWS variables and config files, never a secret copied
into a setting; URL lake roots and inputs; the backfill's URL roots (no JVM)."""

from __future__ import annotations


import pytest

from spark_jobs.control.catchup.backfill import BackfillRefused, check_source, input_roots
from spark_jobs.model.lake import Lake
from spark_jobs.model.object_store import S3Settings, delta_rs_options, hadoop_conf
from spark_jobs.registry import get_job
from tests.helpers.project import PROJECT_ROOT

from streaming.aws_connection import aws_variables

ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIAX",
       "AWS_SECRET_ACCESS_KEY": "settings-secret", "AWS_CONFIG_FILE": "/nonexistent"}


def test_spark_and_delta_rs_get_endpoint_and_region_never_the_credentials():
    conf = hadoop_conf(ENV)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.delta.logStore.s3a.impl"] == conf["spark.delta.logStore.s3.impl"] == \
        "spark_jobs.delta.S3ConditionalLogStore"
    assert "settings-secret" not in str(conf) and "AKIAX" not in str(conf)
    assert delta_rs_options("s3a://lake/x", ENV) == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
                                                     "AWS_REGION": "eu-west-1", "AWS_ALLOW_HTTP": "true"}
    assert delta_rs_options("/local/lake", ENV) is None  # local tables: delta-rs's defaults, as before


def test_on_aws_itself_no_endpoint_is_set():
    conf = hadoop_conf({"AWS_REGION": "us-east-2", "AWS_CONFIG_FILE": "/nonexistent"})
    assert "spark.hadoop.fs.s3a.endpoint" not in conf and conf["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-2"
    assert delta_rs_options("s3://b/t", {"AWS_REGION": "us-east-2", "AWS_CONFIG_FILE": "/nonexistent"}) == {
        "AWS_REGION": "us-east-2"}


def test_the_profile_in_the_config_file_gives_endpoint_and_region(tmp_path):
    config = tmp_path / "config"
    config.write_text("[default]\nregion = us-west-1\n[profile lake]\nregion = ap-south-1\n"
                      "endpoint_url = https://s3.example.internal\n")
    assert S3Settings.from_environment({"AWS_CONFIG_FILE": str(config)}) == S3Settings(None, "us-west-1")
    assert S3Settings.from_environment({"AWS_CONFIG_FILE": str(config), "AWS_PROFILE": "lake"}) == S3Settings(
        "https://s3.example.internal", "ap-south-1")
    assert S3Settings.from_environment({"AWS_CONFIG_FILE": str(config), "AWS_PROFILE": "lake",
                                        "AWS_REGION": "eu-north-1"}).region == "eu-north-1"  # the variable wins


def test_a_url_lake_root_names_urls():
    lake = Lake.at("s3a://lake-bucket/lake/")
    assert str(lake.table_path("cloudtrail_events")) == "s3a://lake-bucket/lake/tables/cloudtrail_events"
    assert str(lake.checkpoint_path("cloudtrail_etl")) == "s3a://lake-bucket/lake/checkpoints/cloudtrail_etl"
    assert str(lake.control_path("cloudtrail_etl")) == "s3a://lake-bucket/lake/control/cloudtrail_etl"


def test_airflows_aws_connection_becomes_the_standard_variables():
    assert aws_variables("AKIAC", "conn-secret", {"region_name": "eu-west-3",
                                                 "service_config": {"s3": {"endpoint_url": "http://minio:9000"}},
                                                 "aws_session_token": "tok"}) == {
        "AWS_ACCESS_KEY_ID": "AKIAC", "AWS_SECRET_ACCESS_KEY": "conn-secret", "AWS_SESSION_TOKEN": "tok",
        "AWS_REGION": "eu-west-3", "AWS_ENDPOINT_URL": "http://minio:9000"}
    assert aws_variables(None, None, {"region_name": "eu-west-3"}) == {"AWS_REGION": "eu-west-3"}  # a role


def test_a_backfill_reads_a_bucket_only_under_a_url_root(s3_env, bucket, monkeypatch):
    import fsspec

    trail = bucket("roots")
    fs, path = fsspec.core.url_to_fs(f"{trail}/AWSLogs/111122223333/CloudTrail/us-east-1/2024/03/01/x.json")
    fs.pipe_file(path, b'{"Records": []}')
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT_ROOTS", f"{PROJECT_ROOT / 'landing'}:{trail}/AWSLogs")
    job = get_job("cloudtrail_etl")
    assert [str(r) for r in input_roots(job)] == [str(PROJECT_ROOT / "landing"), f"{trail}/AWSLogs"]
    assert str(check_source(job, f"{trail}/AWSLogs/111122223333/")) == f"{trail}/AWSLogs/111122223333"
    for source, why in ((f"{trail}/other", "is not under an input root"),
                        (f"{trail}/AWSLogs/../x", "contains '..'"),
                        (f"{trail}/AWSLogs/999", "is not an existing folder")):
        with pytest.raises(BackfillRefused, match=why):
            check_source(job, source)
