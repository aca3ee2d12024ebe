"""Suricata EVE events (``suricata_events``) as OCSF: the ``suricata_ocsf`` job's mapping.

After Tenzir's public Suricata mappings: ``alert`` is a Detection Finding (2004, Create; the signature is the
analytic, the flow's endpoints the evidence, Suricata's severity 1/2/3 High/Medium/Low), ``flow`` Network Activity
(4001, Traffic; packets and bytes to the server are out, to the client in), ``dns`` DNS Activity (4003, Query or
Response), ``http`` HTTP Activity (4002, by method), ``ssh`` SSH Activity (4007, Traffic) and ``tls`` Network
Activity (Traffic, the SNI as the server's host name). Every row has the flow's endpoints, its ``flow_id``
(``connection_info.uid``, and ``metadata.correlation_uid``: every event of one flow shares it) and Community ID.
Each event type's own object stays whole in ``unmapped`` as JSON text. ``stats`` (the sensor's counters, not an
event on the network), ``anomaly``, ``fileinfo`` and any other type have no class here and go to the OCSF
quarantine (``no_ocsf_class``).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_jobs.transforms.ocsf.mapping import OcsfMapping, Reads, Route, job_transform, outputs

HTTP_METHODS = {"CONNECT": 1, "DELETE": 2, "GET": 3, "HEAD": 4, "OPTIONS": 5, "POST": 6, "PUT": 7, "TRACE": 8,
                "PATCH": 9}
# Suricata's alert severity (1 the highest) -> OCSF's severity_id (4 High, 3 Medium, 2 Low).
SEVERITIES = {1: 4, 2: 3, 3: 2}


def _flow(c: Reads, prefix: str = "") -> dict[str, Column]:
    """The flow's endpoints and connection (``prefix``: inside a detection finding's evidence)."""
    return {f"{prefix}src_endpoint.ip": c("src_ip"), f"{prefix}src_endpoint.port": c("src_port"),
            f"{prefix}dst_endpoint.ip": c("dest_ip"), f"{prefix}dst_endpoint.port": c("dest_port"),
            f"{prefix}connection_info.uid": c("flow_id"), f"{prefix}connection_info.community_uid": c("community_id"),
            f"{prefix}connection_info.protocol_name": F.lower(c("proto")),
            f"{prefix}connection_info.direction_id": F.lit(0)}


def _network(c: Reads) -> dict[str, Column]:
    return {**_flow(c), "app_name": c("app_proto"), "metadata.correlation_uid": F.col("flow_id")}


def network_activity(c: Reads) -> dict[str, Column]:
    start, end = c("flow_start"), c("flow_end")
    return {**_network(c), "traffic.packets_out": c("flow_pkts_toserver"), "traffic.packets_in": c("flow_pkts_toclient"),
            "traffic.bytes_out": c("flow_bytes_toserver"), "traffic.bytes_in": c("flow_bytes_toclient"),
            "start_time": F.unix_millis(start), "end_time": F.unix_millis(end),
            "duration": F.unix_millis(end) - F.unix_millis(start),
            "dst_endpoint.hostname": c("tls_sni")}


def detection_finding(c: Reads) -> dict[str, Column]:
    severity = c("alert_severity")
    signature = c("alert_signature")
    return {**_flow(c, "evidences[]."), "metadata.correlation_uid": F.col("flow_id"),
            "finding_info.uid": F.col("event_id"), "finding_info.title": signature,
            "finding_info.types": F.when(F.col("alert_category").isNotNull(), F.array(c("alert_category"))),
            "finding_info.analytic.uid": F.concat_ws(":", c("alert_gid"), c("alert_signature_id"), c("alert_rev")),
            "finding_info.analytic.name": signature, "finding_info.analytic.type_id": F.lit(1),  # a rule
            "finding_info.analytic.category": F.col("alert_category"),
            "severity_id": F.coalesce(F.try_element_at(F.create_map(*[F.lit(x) for p in SEVERITIES.items() for x in p]),
                                                       severity), F.lit(0)),
            "is_alert": F.lit(True), "message": signature, "device.hostname": c("host"),
            "device.type_id": F.lit(13)}  # IDS


def dns_activity(c: Reads) -> dict[str, Column]:
    dns = c.peek("dns")
    kind = F.get_json_object(dns, "$.type")
    return {**_network(c), "activity_id": F.when(kind == "query", 1).when(kind == "answer", 2),
            "query.hostname": F.coalesce(F.get_json_object(dns, "$.rrname"), F.get_json_object(dns, "$.queries[0].rrname")),
            "query.type": F.coalesce(F.get_json_object(dns, "$.rrtype"), F.get_json_object(dns, "$.queries[0].rrtype")),
            "rcode": F.get_json_object(dns, "$.rcode")}


def http_activity(c: Reads) -> dict[str, Column]:
    method = c("http_method")
    host, url = c("http_hostname"), c("http_url")
    return {**_network(c),
            "activity_id": F.coalesce(F.try_element_at(F.create_map(*[F.lit(x) for p in HTTP_METHODS.items() for x in p]),
                                                       F.upper(method)), F.lit(99)),
            "http_request.http_method": method, "http_request.url.hostname": host, "http_request.url.path": url,
            "http_request.url.url_string": F.concat(F.lit("http://"), host, url),
            "http_request.user_agent": F.get_json_object(F.col("http"), "$.http_user_agent"),
            "http_response.code": c("http_status")}


def ssh_activity(c: Reads) -> dict[str, Column]:
    ssh = c.peek("ssh")
    hassh = F.get_json_object(ssh, "$.client.hassh.hash")
    return {**_network(c), "protocol_ver": F.get_json_object(ssh, "$.client.proto_version"),
            "client_hassh.algorithm": F.get_json_object(ssh, "$.client.hassh.string"),
            "client_hassh.fingerprint.algorithm_id": F.when(hassh.isNotNull(), F.lit(1)),  # MD5
            "client_hassh.fingerprint.value": hassh}


MAPPING = OcsfMapping(
    log_type="suricata", key="event_id", kind="event_type", product=("Suricata", "OISF"),
    routes={"alert": Route("detection_finding", 1), "flow": Route("network_activity", 6),
            "tls": Route("network_activity", 6), "dns": Route("dns_activity", 0),
            "http": Route("http_activity", 0), "ssh": Route("ssh_activity", 6)},
    fields={"detection_finding": detection_finding, "network_activity": network_activity,
            "dns_activity": dns_activity, "http_activity": http_activity, "ssh_activity": ssh_activity},
)
transform = job_transform(MAPPING)
OUTPUTS = outputs(MAPPING)
