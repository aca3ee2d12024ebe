"""Kafka settings from an Airflow connection: both of Airflow's forms, SASL and trust stores, secrets never shown."""

from __future__ import annotations

import json

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kafka_connection import KafkaConnection
from spark_jobs.control.kafka.options import run_overrides
from spark_jobs.model.streams import kafka_subscription

SECRET = 's3cr"et'


def _from(value: str) -> KafkaConnection:
    return KafkaConnection.from_airflow("cloudtrail_kafka", {"AIRFLOW_CONN_CLOUDTRAIL_KAFKA": value})


def test_a_json_connection_with_sasl_ssl_gives_spark_the_jaas_config_and_the_trust_store():
    connection = _from(json.dumps({
        "conn_type": "kafka", "host": "b1:9093,b2:9093", "login": "etl", "password": SECRET,
        "extra": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                  "ssl.truststore.location": "/etc/kafka/truststore.jks", "ssl.truststore.password": "tspw"}}))
    assert connection.spark_options() == {
        "kafka.bootstrap.servers": "b1:9093,b2:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" '
                                  'password="s3cr\\"et";',
        "kafka.ssl.truststore.location": "/etc/kafka/truststore.jks",
        "kafka.ssl.truststore.password": "tspw",
    }
    assert SECRET not in repr(connection) and "tspw" not in repr(connection)
    assert connection.describe() == "b1:9093,b2:9093 (SASL_SSL SCRAM-SHA-512 as etl)"


def test_a_uri_connection_with_a_pem_ca_serves_spark_and_the_lag_client():
    connection = _from("kafka://etl:pw%40x@b1:9092/?security.protocol=SASL_SSL&sasl.mechanism=PLAIN"
                       "&ssl.ca.location=/etc/ssl/ca.pem")
    assert connection.spark_options()["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="etl" password="pw@x";')
    assert connection.spark_options()["kafka.ssl.truststore.type"] == "PEM"
    assert connection.client_config() == {"bootstrap.servers": "b1:9092", "security.protocol": "SASL_SSL",
                                          "sasl.mechanism": "PLAIN", "sasl.username": "etl", "sasl.password": "pw@x",
                                          "ssl.ca.location": "/etc/ssl/ca.pem"}


@pytest.mark.parametrize("value, message", [
    ("", r"no Kafka connection 'cloudtrail_kafka': set \$AIRFLOW_CONN_CLOUDTRAIL_KAFKA"),
    ('{"conn_type": "kafka", "password": "' + SECRET.replace('"', "") + '"', r"is not valid JSON"),
    ('{"conn_type": "kafka"}', r"names no brokers"),
    ('{"host": "b:1", "extra": {"security.protocol": "SASL_SSL"}}', r"sasl.mechanism None is not one of PLAIN"),
    ('{"host": "b:1", "extra": {"security.protocol": "SSLX"}}', r"security.protocol 'SSLX' is not one of"),
])
def test_a_bad_connection_is_one_line_naming_the_variable_never_its_secret(value, message):
    with pytest.raises(UsageError, match=message) as error:
        _from(value)
    assert "s3cret" not in str(error.value)


def test_topics_patterns_and_run_options_are_checked_before_spark_starts():
    assert kafka_subscription("a,b") == {"subscribe": "a,b"}
    assert kafka_subscription("pattern:cloudtrail-.*") == {"subscribePattern": "cloudtrail-.*"}
    with pytest.raises(UsageError, match="Kafka topic 'a b' is not a topic name"):
        kafka_subscription("a b")
    assert run_overrides("500", "2024-03-02T08:00:00Z") == {
        "maxOffsetsPerTrigger": "500", "startingTimestamp": "1709366400000",
        "startingOffsetsByTimestampStrategy": "latest"}
    with pytest.raises(UsageError, match="--max-offsets-per-trigger must be a whole number >= 1, got '0'"):
        run_overrides("0", None)
    with pytest.raises(UsageError, match="--starting-timestamp 'noon' is not an ISO-8601 time"):
        run_overrides(None, "noon")
