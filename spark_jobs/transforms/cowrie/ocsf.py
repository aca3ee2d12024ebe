"""Cowrie honeypot events (``cowrie_events``) as OCSF: the ``cowrie_ocsf`` job's mapping.

No public mapping exists; this one follows OCSF's classes as a detection engineer would query them:

- ``cowrie.login.success`` / ``.failed``: Authentication (3002, Logon), the user the attacker tried, failed or not;
  the password tried has no place in OCSF and stays in ``unmapped``;
- ``cowrie.session.connect`` / ``.closed``: SSH Activity (4007, Open / Close), with the client's and the honeypot's
  addresses and the session's protocol in ``app_name`` (Cowrie's telnet sessions are rows of it too: its events do
  not tell every row's protocol); ``cowrie.client.version`` / ``.kex`` / ``.size``: SSH Activity, Traffic, with the
  client's version and HASSH;
- ``cowrie.direct-tcpip.request`` / ``.data``: Network Activity (4001, Open / Traffic): a connection the attacker
  asked the honeypot to forward;
- ``cowrie.command.input`` / ``.failed``: Process Activity (1007, Launch), the command line, on the honeypot (the
  device, a server); its session is the actor.

Any other event (``cowrie.log.open``, ``cowrie.session.file_download``, ...) has no class here and goes to the
OCSF quarantine (``no_ocsf_class``); its raw row stays in ``cowrie_events``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_jobs.transforms.ocsf.mapping import OcsfMapping, Reads, Route, job_transform, outputs

SESSION = ("cowrie.session.connect", "cowrie.session.closed", "cowrie.client.version", "cowrie.client.kex",
           "cowrie.client.size")


def _session(c: Reads) -> dict[str, Column]:
    """The connection every network row of a session has."""
    return {"message": c("message"), "src_endpoint.ip": c("src_ip"), "src_endpoint.port": c("src_port"),
            "dst_endpoint.ip": c("dst_ip"), "dst_endpoint.port": c("dst_port"), "dst_endpoint.hostname": c("sensor"),
            "connection_info.uid": c("session"), "connection_info.protocol_name": F.lit("tcp"),
            "connection_info.direction_id": F.lit(1),  # inbound: the client reached the honeypot
            "app_name": c("protocol"), "metadata.correlation_uid": F.col("session"),
            "duration": F.round(c("duration") * 1000).cast("long")}


def ssh_activity(c: Reads) -> dict[str, Column]:
    hassh = c("hassh")
    return {**_session(c), "protocol_ver": c("version"), "client_hassh.algorithm": c("hasshAlgorithms"),
            "client_hassh.fingerprint.algorithm_id": F.when(hassh.isNotNull(), F.lit(1)),  # MD5
            "client_hassh.fingerprint.value": hassh}


def network_activity(c: Reads) -> dict[str, Column]:
    forwarded = F.col("eventid").startswith("cowrie.direct-tcpip")
    return {**_session(c), "dst_endpoint.hostname": F.when(~forwarded, c("sensor"))}


def authentication(c: Reads) -> dict[str, Column]:
    failed = c("eventid") == "cowrie.login.failed"
    return {"message": c("message"), "user.name": c("username"), "status_id": F.when(failed, 2).otherwise(1),
            "src_endpoint.ip": c("src_ip"), "dst_endpoint.hostname": c("sensor"), "session.uid": c("session"),
            "service.name": F.lit("ssh"), "is_remote": F.lit(True), "metadata.correlation_uid": F.col("session")}


def process_activity(c: Reads) -> dict[str, Column]:
    failed = c("eventid") == "cowrie.command.failed"
    command = c("input")
    return {"message": c("message"), "status_id": F.when(failed, 2).otherwise(1), "process.cmd_line": command,
            "process.name": F.regexp_extract(command, r"^\s*(\S+)", 1), "actor.session.uid": c("session"),
            "device.hostname": c("sensor"), "device.type_id": F.lit(1), "metadata.correlation_uid": F.col("session")}


MAPPING = OcsfMapping(
    log_type="cowrie", key="event_id", kind="eventid", product=("Cowrie", "Cowrie"),
    routes={"cowrie.login.success": Route("authentication", 1), "cowrie.login.failed": Route("authentication", 1),
            "cowrie.session.connect": Route("ssh_activity", 1), "cowrie.session.closed": Route("ssh_activity", 2),
            **{name: Route("ssh_activity", 6) for name in SESSION[2:]},
            "cowrie.direct-tcpip.request": Route("network_activity", 1),
            "cowrie.direct-tcpip.data": Route("network_activity", 6),
            "cowrie.command.input": Route("process_activity", 1), "cowrie.command.failed": Route("process_activity", 1)},
    fields={"authentication": authentication, "ssh_activity": ssh_activity, "network_activity": network_activity,
            "process_activity": process_activity},
)
transform = job_transform(MAPPING)
OUTPUTS = outputs(MAPPING)
