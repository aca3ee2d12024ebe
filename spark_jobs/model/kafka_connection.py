"""Kafka connection settings from an Airflow connection, never from code or logs.

A Kafka job names an Airflow connection id (the registry's ``KafkaSource.connection_id``, e.g.
``cloudtrail_kafka``). The driver reads it the way Airflow's own environment-variable secrets backend
does, from ``$AIRFLOW_CONN_<ID>`` (upper case), without importing Airflow: either Airflow's JSON form

    {"conn_type": "kafka", "host": "b1:9093,b2:9093", "login": "user", "password": "...",
     "extra": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
               "ssl.truststore.location": "/etc/kafka/truststore.jks", "ssl.truststore.password": "..."}}

or its URI form (``kafka://user:pass@b1:9093,b2:9093/?security.protocol=SASL_SSL&...``). ``extra``
holds client settings as the Apache Kafka provider's connections do (its ``bootstrap.servers`` wins
over ``host``; ``sasl.username`` / ``sasl.password`` over ``login`` / ``password``). An Airflow
deployment keeps the connection in its metadata DB or a secrets backend and puts it in the task's
environment (the DAGs' spark-submit passes the environment on); a person running the CLI exports it.

:meth:`KafkaConnection.spark_options` turns it into the ``kafka.*`` options of Spark's Kafka source
and sink (the Java client: SASL credentials become ``sasl.jaas.config``); :meth:`client_config` into
librdkafka settings for the checkpoint's lag report (:mod:`spark_jobs.control.kafka.lag`). ``repr`` and
:meth:`describe` show no secret, and the Kafka job sets ``spark.sql.redaction.options.regex`` so the
query plan in logs and the Spark UI shows none either.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

from spark_jobs.model.errors import UsageError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
# Spark redacts data source options whose name matches this in plans, logs and the UI.
REDACTION_REGEX = "(?i)url|password|jaas|secret|token"
# Keys of ``extra`` handled here rather than passed to the client as they are.
_OWN_KEYS = {"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
             "sasl.password", "ssl.ca.location"}


def env_var(connection_id: str) -> str:
    """The environment variable Airflow reads connection ``connection_id`` from."""
    return f"AIRFLOW_CONN_{connection_id.upper()}"


@dataclass(frozen=True)
class KafkaConnection:
    """Where the brokers are and how to authenticate to them.

    :param bootstrap_servers: ``host:port[,host:port...]``.
    :param security_protocol: one of :data:`PROTOCOLS`.
    :param sasl_mechanism: ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` (with a SASL protocol).
    :param username: the SASL user.
    :param password: the SASL password (secret).
    :param ca_location: a PEM file of the CAs to trust (used by both Spark and librdkafka).
    :param extra: further client settings (``ssl.truststore.location``, ``ssl.endpoint.identification.algorithm``,
        ...), given to Spark as ``kafka.<key>``.
    """

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_location: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.security_protocol not in PROTOCOLS:
            raise UsageError(f"Kafka security.protocol {self.security_protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if self.security_protocol.startswith("SASL"):
            if self.sasl_mechanism not in _LOGIN_MODULES:
                raise UsageError(f"Kafka sasl.mechanism {self.sasl_mechanism!r} is not one of "
                                 f"{', '.join(_LOGIN_MODULES)} (needed with {self.security_protocol})")
            if not self.username or self.password is None:
                raise UsageError(f"Kafka {self.security_protocol} needs a user and a password: set the connection's "
                                 "login and password (or extra sasl.username / sasl.password)")

    @classmethod
    def from_airflow(cls, connection_id: str, environ: Mapping[str, str] | None = None) -> "KafkaConnection":
        """The connection ``connection_id`` from ``$AIRFLOW_CONN_<ID>`` (JSON or URI).

        :raises UsageError: naming the variable when it is missing or unreadable (never its value).
        """
        environ = os.environ if environ is None else environ
        name = env_var(connection_id)
        text = environ.get(name, "").strip()
        if not text:
            raise UsageError(f"no Kafka connection {connection_id!r}: set ${name} (an Airflow connection, e.g. "
                             '\'{"conn_type": "kafka", "host": "broker:9092"}\'), or add the connection in Airflow')
        fields = _json_fields(text, name) if text.startswith("{") else _uri_fields(text)
        extra = {str(k): str(v) for k, v in (fields.get("extra") or {}).items()}
        host = fields.get("host") or ""
        if fields.get("port") and "," not in host and ":" not in host:
            host = f"{host}:{fields['port']}"
        servers = extra.get("bootstrap.servers") or host
        if not servers:
            raise UsageError(f"the Kafka connection in ${name} names no brokers: give it a host (host:port) or "
                             "extra bootstrap.servers")
        return cls(bootstrap_servers=servers, security_protocol=extra.get("security.protocol", "PLAINTEXT").upper(),
                   sasl_mechanism=(extra.get("sasl.mechanism") or extra.get("sasl.mechanisms") or "").upper() or None,
                   username=extra.get("sasl.username") or fields.get("login") or None,
                   password=extra.get("sasl.password", fields.get("password")),
                   ca_location=extra.get("ssl.ca.location"),
                   extra={k: v for k, v in extra.items() if k not in _OWN_KEYS})

    def describe(self) -> str:
        """The connection for a log line: brokers, protocol, mechanism and user; no secret."""
        sasl = f" {self.sasl_mechanism} as {self.username}" if self.sasl_mechanism else ""
        return f"{self.bootstrap_servers} ({self.security_protocol}{sasl})"

    def spark_options(self) -> dict[str, str]:
        """The ``kafka.*`` options of Spark's Kafka source and sink (the Java client's settings)."""
        options = {"kafka.bootstrap.servers": self.bootstrap_servers,
                   "kafka.security.protocol": self.security_protocol}
        if self.security_protocol.startswith("SASL"):
            options["kafka.sasl.mechanism"] = self.sasl_mechanism
            options["kafka.sasl.jaas.config"] = (f'{_LOGIN_MODULES[self.sasl_mechanism]} required '
                                                 f'username={_quoted(self.username)} password={_quoted(self.password)};')
        if self.ca_location:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = self.ca_location
        options.update({f"kafka.{key}": value for key, value in self.extra.items()})
        return options

    def client_config(self) -> dict[str, str]:
        """librdkafka settings (``confluent_kafka``) for the same brokers, for lag and offset look-ups."""
        config = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        if self.security_protocol.startswith("SASL"):
            config.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                           "sasl.password": self.password})
        location = self.ca_location or (self.extra.get("ssl.truststore.location")
                                        if self.extra.get("ssl.truststore.type", "").upper() == "PEM" else None)
        if location:
            config["ssl.ca.location"] = location
        if self.extra.get("ssl.endpoint.identification.algorithm") == "":
            config["ssl.endpoint.identification.algorithm"] = "none"
        return config


def _quoted(value: str | None) -> str:
    return json.dumps(value or "")  # a JAAS string literal: double quotes, backslash escapes


def _json_fields(text: str, name: str) -> dict:
    try:
        fields = json.loads(text)
    except ValueError:
        raise UsageError(f"${name} is not valid JSON; write it as an Airflow connection in JSON "
                         '(\'{"conn_type": "kafka", "host": "broker:9092", "extra": {...}}\') or as a URI') from None
    if not isinstance(fields, dict):
        raise UsageError(f"${name} must be a JSON object (an Airflow connection)")
    extra = fields.get("extra")
    if isinstance(extra, str):
        try:
            fields["extra"] = json.loads(extra) if extra.strip() else {}
        except ValueError:
            raise UsageError(f"the extra of ${name} is not a JSON object") from None
    if fields.get("extra") is not None and not isinstance(fields.get("extra"), dict):
        raise UsageError(f"the extra of ${name} is not a JSON object")
    return fields


def _uri_fields(text: str) -> dict:
    parts = urlsplit(text)
    netloc = parts.netloc.rsplit("@", 1)
    hosts = netloc[-1]
    login = password = None
    if len(netloc) == 2:
        login, _, password = netloc[0].partition(":")
        login, password = unquote(login), unquote(password) if password else None
    return {"host": unquote(hosts), "login": login, "password": password, "extra": dict(parse_qsl(parts.query))}
