"""The OCSF tables and the registry entry of a log type's OCSF mapping: :func:`ocsf_job` (no pyspark).

The raw tables (``cloudtrail_events``, ``cowrie_events``, ``suricata_events``) stay as they are; beside them, one
Delta table per OCSF class, ``ocsf_<class>`` (:data:`OCSF_CLASSES`), holds every source's events of that class in
the pinned OCSF version (:data:`~spark_jobs.model.ocsf_schema.OCSF_VERSION`): CloudTrail's and Cowrie's logins are
both rows of ``ocsf_authentication``. One table per class, not per category, because OCSF defines its attributes
and their requirements per class: each table is typed by its class alone, is checked against it alone, and a
question about one class ("every failed authentication", "every detection finding of the day") is a SELECT of one
table. A question across classes ("everything an IP did") is one SELECT of the classes' shared attributes, UNION
ALL (docs/ocsf.md).

Each table's columns are its class's attributes that the mappings fill (:attr:`OcsfClass.columns`, dotted paths
inside objects), typed from the pinned schema, plus the lake's ``date`` (the UTC date of ``time``, its partition).
A row's key is ``(date, raw_data)``: ``raw_data`` is a reference to the source row (its table, date and key as
JSON), so one source event is one OCSF row whatever replays it. An OCSF job reads one raw table as a stream and
writes its classes' tables and its quarantine, ``<log type>_ocsf_quarantine``: the events the raw table accepted
that OCSF cannot express (an event type without a class, a required attribute missing), with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.log_types import INGEST_DATE, REASON
from spark_jobs.model.streams import DeltaTableSource
from spark_jobs.model.tables import TableSpec

# The lake's partition column of every OCSF table (not an OCSF attribute): the UTC date of the event's time.
OCSF_DATE = "date"
# The OCSF row's key besides its date: the reference to its source row.
OCSF_KEY = (OCSF_DATE, "raw_data")

# Attributes every class's table has (base_event's), then the groups several classes share.
BASE = ("activity_id", "activity_name", "category_uid", "category_name", "class_uid", "class_name", "type_uid",
        "type_name", "severity_id", "severity", "time", "message", "status_id", "status", "status_code",
        "status_detail", "start_time", "end_time", "duration", "raw_data", "unmapped",
        "metadata.version", "metadata.uid", "metadata.correlation_uid", "metadata.log_name", "metadata.log_version",
        "metadata.event_code", "metadata.profiles", "metadata.product.name", "metadata.product.vendor_name")
CLOUD = ("cloud.provider", "cloud.region", "cloud.account.uid")


def _endpoint(name: str) -> tuple[str, ...]:
    return tuple(f"{name}.{part}" for part in ("ip", "port", "hostname", "domain", "svc_name"))


USER = ("name", "uid", "type", "credential_uid", "account.uid")
ACTOR = (*(f"actor.user.{part}" for part in USER), "actor.session.uid", "actor.session.is_mfa",
         "actor.session.created_time", "actor.session.issuer", "actor.invoked_by", "actor.idp.name")
ENDPOINTS = (*_endpoint("src_endpoint"), *_endpoint("dst_endpoint"))
CONNECTION = ("connection_info.uid", "connection_info.community_uid", "connection_info.protocol_name",
              "connection_info.direction_id")
NETWORK = (*ENDPOINTS, *CONNECTION, "app_name", "traffic.packets_in", "traffic.packets_out", "traffic.bytes_in",
           "traffic.bytes_out")


@dataclass(frozen=True)
class OcsfClass:
    """One OCSF class and its table.

    :param name: the class's name in the schema (``api_activity``); the table is ``ocsf_<name>``.
    :param uid: its ``class_uid`` (checked against the pinned schema by the tests).
    :param columns: the attributes its table holds, as dotted paths (``actor.user.name``; ``evidences[].x``: an
        array of objects, of which the mappings fill one).
    :param description: the table's one line.
    """

    name: str
    uid: int
    columns: tuple[str, ...]
    description: str

    @property
    def table_name(self) -> str:
        return f"ocsf_{self.name}"

    @cached_property
    def table(self) -> TableSpec:
        """The class's table (one declaration, the same object in every job that writes the class)."""
        return TableSpec(name=self.table_name, partition_by=(OCSF_DATE,), description=self.description,
                         unique_key=OCSF_KEY, route=f"{REASON} IS NULL AND class_uid = {self.uid}",
                         stats_columns=("time", "class_uid", "activity_id", "status_id", "severity_id"))


OCSF_CLASSES = {c.name: c for c in (
    OcsfClass("api_activity", 6003, (*BASE, *ACTOR, *_endpoint("src_endpoint"), *CLOUD, "api.operation",
                                     "api.version", "api.service.name", "api.request.uid", "api.response.error",
                                     "api.response.error_message", "http_request.user_agent"),
              "OCSF API Activity (6003): cloud API calls (CloudTrail), one row per source event"),
    OcsfClass("authentication", 3002, (*BASE, *ACTOR, *ENDPOINTS, *CLOUD, *(f"user.{part}" for part in USER),
                                       "is_mfa", "is_remote", "auth_protocol", "auth_protocol_id", "service.name",
                                       "session.uid", "http_request.user_agent"),
              "OCSF Authentication (3002): logons of every source (CloudTrail console, the honeypot's SSH), one row "
              "per source event"),
    OcsfClass("account_change", 3001, (*BASE, *ACTOR, *_endpoint("src_endpoint"), *CLOUD,
                                       *(f"user.{part}" for part in USER), "http_request.user_agent"),
              "OCSF Account Change (3001): IAM users created, deleted, given or stripped of policies, MFA, passwords"),
    OcsfClass("detection_finding", 2004, (*BASE, "is_alert", "finding_info.uid", "finding_info.title",
                                          "finding_info.types", "finding_info.analytic.uid",
                                          "finding_info.analytic.name", "finding_info.analytic.type_id",
                                          "finding_info.analytic.category", "device.hostname", "device.type_id",
                                          *(f"evidences[].{c}" for c in (*ENDPOINTS, *CONNECTION))),
              "OCSF Detection Finding (2004): IDS alerts (Suricata), one row per alert"),
    OcsfClass("network_activity", 4001, (*BASE, *NETWORK),
              "OCSF Network Activity (4001): flows and connections (Suricata flows, the honeypot's forwarded TCP)"),
    OcsfClass("dns_activity", 4003, (*BASE, *NETWORK, "query.hostname", "query.type", "query.class", "rcode"),
              "OCSF DNS Activity (4003): DNS queries and answers (Suricata)"),
    OcsfClass("http_activity", 4002, (*BASE, *NETWORK, "http_request.http_method", "http_request.url.url_string",
                                      "http_request.url.hostname", "http_request.url.path",
                                      "http_request.user_agent", "http_response.code"),
              "OCSF HTTP Activity (4002): HTTP transactions (Suricata)"),
    OcsfClass("ssh_activity", 4007, (*BASE, *NETWORK, "protocol_ver", "client_hassh.algorithm",
                                     "client_hassh.fingerprint.algorithm_id", "client_hassh.fingerprint.value"),
              "OCSF SSH Activity (4007): SSH sessions (the honeypot's sessions, Suricata's SSH events)"),
    OcsfClass("process_activity", 1007, (*BASE, "actor.session.uid", "actor.user.name", "device.hostname",
                                         "device.type_id", "process.cmd_line", "process.name"),
              "OCSF Process Activity (1007): commands run (the honeypot's shell commands)"),
)}


def ocsf_quarantine(log_type: str) -> TableSpec:
    """The quarantine of a log type's OCSF job: one row per source event and reason."""
    return TableSpec(name=f"{log_type}_ocsf_quarantine", partition_by=(INGEST_DATE,), quarantine=True,
                     description=f"{log_type}_events rows that OCSF cannot express (no class for the event type, a "
                                 "required attribute missing): the source key and date, the reason, the row as JSON",
                     unique_key=("source_key", "reason"), route=f"{REASON} IS NOT NULL")


def ocsf_job(log_type: str, *, classes: tuple[str, ...], description: str, tags: tuple[str, ...] = (),
             **job: Any) -> JobSpec:
    """The registry entry of a log type's OCSF mapping: ``<log type>_events`` read as a stream, written to its
    classes' tables and ``<log type>_ocsf_quarantine``. Its module (``spark_jobs.jobs.<log type>_ocsf``) holds the
    mapping's ``transform`` and ``OUTPUTS`` (:mod:`spark_jobs.transforms.ocsf`).

    :param log_type: the raw log type (``cowrie``): the source table and the job's name ``<log type>_ocsf``.
    :param classes: the OCSF classes (:data:`OCSF_CLASSES`) its mapping writes.
    :param job: any other :class:`JobSpec` field (``continuous_trigger``, ``health``, ...).
    """
    tables = (*(OCSF_CLASSES[name].table for name in classes), ocsf_quarantine(log_type))
    return JobSpec(name=f"{log_type}_ocsf", description=description, default_input="",
                   source=DeltaTableSource(f"{log_type}_events"), tables=tables,
                   # A restore of the raw table (a commit that removes rows) is skipped rather than failing the
                   # stream; OPTIMIZE commits carry no data change and are never read.
                   file_source_options={"maxFilesPerTrigger": "1000", "skipChangeCommits": "true"},
                   tags=(log_type, "ocsf", *tags, "streaming"), **job)
