"""Suricata's EVE JSON log to one typed row per line: the ``suricata_eve`` job's parser.

Suricata (an IDS) writes one JSON object per line to its EVE log (``eve.json``): every event has a
``timestamp`` and an ``event_type`` (``alert``, ``flow``, ``dns``, ``http``, ``tls``, ``ssh``, ``fileinfo``,
``anomaly``, ``stats``, ...), most the flow's addresses and ``flow_id``, and the event's own object under the
key its ``event_type`` names (``"alert": {...}``, ``"flow": {...}``; ``stats`` objects hold hundreds of counters).

Rows: one per non-blank line. The fields every event type shares are typed columns (:data:`FIELDS`); each
event type's object is a column of its compact JSON text, whatever it holds (so nothing depends on a
Suricata version's inner layout), and the parts that have kept their shape since EVE began are typed out
of it too (:data:`NESTED`: an alert's signature and severity, a flow's packets, bytes and times, HTTP's host,
URL, method and status, TLS's SNI and certificate, SSH's software versions). DNS keeps only its JSON text: its
layout changed between EVE's DNS versions 1, 2 and 3. A top-level key no column declares (a newer event type's
object) goes to ``_rescued_data``. EVE writes its times with ``%z``, ``+0000`` without a colon; a time without
a zone is ``bad_timestamp``. How a line is split, typed and judged is every JSON-lines log's
(:mod:`spark_jobs.transforms.json_lines`); the tables, keys and routes are the registry's (``SURICATA_EVE``, a
:func:`~spark_jobs.model.jobs.file_log_type`).

**What identifies an event.** EVE writes no event id. ``flow_id`` names the flow (a connection) and is the
same in every event of it; ``event_type`` and ``timestamp`` (the packet's time, to the microsecond) tell the
events of one flow apart, but not all of them: one packet that matches two signatures gives two alerts with
the same three, as a packet with two anomalies gives two ``anomaly`` events, and two transactions of a flow
completed by one packet share them too. What does tell them apart is the event's own object (the signature,
the anomaly, the transaction) and ``tx_id``. So ``event_id`` is the SHA-256 (hex) of the JSON array
``[host, flow_id, event_type, timestamp, tx_id, object]``: ``host`` (the sensor's name, when Suricata is
configured with one: two sensors number their flows independently), the timestamp written back as
``YYYY-MM-DDTHH:MM:SS.ffffffZ``, and the event's object as JSON with its keys sorted (the same event
re-serialized with another key order has the same id); an absent part is ``null`` (``stats`` events have no
flow, ``flow`` events no ``tx_id``). The same line delivered again (the log landing again under its rotated
name, a copy, a backfill beside the live stream) adds nothing, even with fields a shipper added at the top
level. A hash of the whole line was rejected for that reason, and ``flow_id`` + ``event_type`` +
``timestamp`` alone for the collisions above. Measured on the real log
(``../shared/data/real/applogs/magnc_suricata_data_training/eve.json``, 253 lines: flow 215, ssh 13, stats 13,
tls 12): 253 distinct ids; ``flow_id`` + ``event_type`` + ``timestamp`` alone are distinct there as well (the
sample has no alerts), ``flow_id`` + ``event_type`` are not (241: a flow logs its ``ssh`` or ``tls`` event, then
its ``flow`` event).
"""

from __future__ import annotations

import datetime as dt
import json

from spark_jobs.transforms.json_lines import (
    BOOLEAN, INT, JSON, LONG, STRING, TIMESTAMP, JsonLinesLog, sha256_of, utc_micros,
)

# Top-level field -> the Spark type of its column (JSON: the object's compact JSON text).
FIELDS = {
    # every event type (stats: only event_type)
    "event_type": STRING, "flow_id": LONG, "parent_id": LONG, "host": STRING, "in_iface": STRING, "vlan": JSON,
    "src_ip": STRING, "src_port": INT, "dest_ip": STRING, "dest_port": INT, "proto": STRING, "app_proto": STRING,
    "icmp_type": INT, "icmp_code": INT, "tx_id": LONG, "community_id": STRING, "direction": STRING,
    "pcap_cnt": LONG, "pkt_src": STRING,
    # each event type's own object, and the flow's TCP flags beside a flow
    "alert": JSON, "anomaly": JSON, "flow": JSON, "tcp": JSON, "netflow": JSON, "dns": JSON, "http": JSON,
    "tls": JSON, "ssh": JSON, "smtp": JSON, "email": JSON, "fileinfo": JSON, "dhcp": JSON, "drop": JSON,
    "stats": JSON, "metadata": JSON,
    # an alert's packet, when logged
    "payload": STRING, "payload_printable": STRING, "packet": STRING, "packet_info": JSON,
}
# Typed out of an object that keeps its JSON text: column -> (path, type).
NESTED = {
    "alert_action": ("alert.action", STRING), "alert_gid": ("alert.gid", LONG),
    "alert_signature_id": ("alert.signature_id", LONG), "alert_rev": ("alert.rev", LONG),
    "alert_signature": ("alert.signature", STRING), "alert_category": ("alert.category", STRING),
    "alert_severity": ("alert.severity", INT),
    "flow_pkts_toserver": ("flow.pkts_toserver", LONG), "flow_pkts_toclient": ("flow.pkts_toclient", LONG),
    "flow_bytes_toserver": ("flow.bytes_toserver", LONG), "flow_bytes_toclient": ("flow.bytes_toclient", LONG),
    "flow_start": ("flow.start", TIMESTAMP), "flow_end": ("flow.end", TIMESTAMP), "flow_state": ("flow.state", STRING),
    "flow_reason": ("flow.reason", STRING), "flow_alerted": ("flow.alerted", BOOLEAN),
    "http_hostname": ("http.hostname", STRING), "http_url": ("http.url", STRING),
    "http_method": ("http.http_method", STRING), "http_status": ("http.status", INT),
    "tls_sni": ("tls.sni", STRING), "tls_version": ("tls.version", STRING), "tls_subject": ("tls.subject", STRING),
    "tls_issuerdn": ("tls.issuerdn", STRING),
    "ssh_client_software": ("ssh.client.software_version", STRING),
    "ssh_server_software": ("ssh.server.software_version", STRING),
}


def event_id(row: dict, record: dict, moment: dt.datetime) -> str:
    """The id of an event (see the module docstring): SHA-256 of
    ``[host, flow_id, event_type, UTC time, tx_id, the event's object with sorted keys]``."""
    kind = row["event_type"]
    own = record.get(kind)
    own_text = None if own is None else json.dumps(own, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return sha256_of([record.get("host"), record.get("flow_id"), kind, utc_micros(moment), record.get("tx_id"),
                      own_text])


EVE = JsonLinesLog(kind="event_type", fields=FIELDS, nested=NESTED, event_key=event_id, compact_offsets=True)
REASONS = EVE.reasons
# EVE log files (Spark's binaryFile rows) to one row per non-blank line, every column of both tables.
transform = EVE.transform
