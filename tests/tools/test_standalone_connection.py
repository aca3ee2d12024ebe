"""The standalone spark_default: the Spark provider turns it into the master URL and client mode (no JVM)."""

from __future__ import annotations

import json

from tools.standalone import connection_json, spark_connection


def test_the_provider_submits_to_the_standalone_master_in_client_mode(monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", connection_json("127.0.0.1", 17077))

    command = SparkSubmitHook(conn_id="spark_default")._build_spark_submit_command("app.py")

    assert command[:3] == ["spark-submit", "--master", "spark://127.0.0.1:17077"]
    assert command[command.index("--deploy-mode") + 1] == "client"


def test_the_connection_is_plain_json():
    assert json.loads(connection_json("spark-master")) == spark_connection("spark-master", 7077) == {
        "conn_type": "spark", "host": "spark://spark-master", "port": 7077, "extra": {"deploy-mode": "client"}}

