"""The raw jobs and the OCSF jobs run in this process on the tests' SparkSession, and events planted beside the real
samples: one attacker address (:data:`ATTACKER`) in CloudTrail, the honeypot and Suricata on one day (:data:`DAY`),
Suricata's event types the real sample lacks (alert, dns, http), and events the raw tables accept that OCSF cannot
express."""

from __future__ import annotations

import json
from pathlib import Path

from spark_jobs.driver.runner import run_streaming
from spark_jobs.model.lake import Lake
from spark_jobs.model.runs import RunOptions
from spark_jobs.model.triggers import parse_trigger
from spark_jobs.registry import get_job

ATTACKER = "203.0.113.7"
DAY = "2026-12-07"
SOURCES = ("cloudtrail", "cowrie", "suricata")
RAW_JOBS = {"cloudtrail": "cloudtrail_etl", "cowrie": "cowrie_honeypot", "suricata": "suricata_eve"}


def run(name: str, lake: Path, landing: Path | None = None, **file_options: str):
    """Run job ``name`` (available-now) in this process; a job that reads a Delta table reads it in ``lake``."""
    job = get_job(name)
    options = {**job.file_source_options, **file_options}
    input_path = landing if landing is not None else Lake(lake).table_path(job.source.table)
    return run_streaming(job, RunOptions(input_path, Lake(lake), parse_trigger("available-now"), options))


def _cloudtrail(name: str, event_id: str, minute: int, **fields) -> dict:
    record = {"eventVersion": "1.08", "eventTime": f"{DAY}T10:{minute:02d}:00Z", "eventSource": "iam.amazonaws.com",
              "eventName": name, "awsRegion": "us-east-1", "sourceIPAddress": ATTACKER, "userAgent": "aws-cli/2",
              "eventID": event_id, "eventType": "AwsApiCall", "recipientAccountId": "111122223333",
              "userIdentity": {"type": "IAMUser", "principalId": "AIDAPLANTED", "accountId": "111122223333",
                               "arn": "arn:aws:iam::111122223333:user/alice", "userName": "alice"}}
    record.update(fields)
    return {k: v for k, v in record.items() if v is not None}


CLOUDTRAIL = [
    _cloudtrail("ConsoleLogin", "00000000-0000-4000-8000-000000000001", 1, eventSource="signin.amazonaws.com",
                eventType="AwsConsoleSignIn", errorMessage="Failed authentication",
                responseElements={"ConsoleLogin": "Failure"}, additionalEventData={"MFAUsed": "No"}),
    _cloudtrail("CreateUser", "00000000-0000-4000-8000-000000000002", 2, requestParameters={"userName": "mallory"},
                requestID="req-2"),
    _cloudtrail("ListBuckets", "00000000-0000-4000-8000-000000000003", 3, eventSource="s3.amazonaws.com",
                requestID="req-3", readOnly=True),
    # accepted by the raw table, but API Activity requires src_endpoint: quarantined by OCSF
    _cloudtrail("DescribeInstances", "00000000-0000-4000-8000-000000000004", 4, eventSource="ec2.amazonaws.com",
                sourceIPAddress=None, requestID="req-4"),
]


def _cowrie(eventid: str, second: int, **fields) -> dict:
    return {"eventid": eventid, "timestamp": f"{DAY}T10:10:{second:02d}.000000Z", "session": "planted1",
            "sensor": "honeypot-2", "src_ip": ATTACKER, "message": eventid, **fields}


COWRIE = [
    _cowrie("cowrie.session.connect", 1, src_port=40000, dst_ip="198.51.100.2", dst_port=22, protocol="ssh"),
    _cowrie("cowrie.login.failed", 2, username="root", password="123456"),
    _cowrie("cowrie.command.input", 3, input="uname -a"),
    _cowrie("cowrie.login.failed", 4, password="no user given"),  # Authentication requires user: quarantined
]


def _eve(event_type: str, second: int, **fields) -> dict:
    return {"timestamp": f"{DAY}T10:20:{second:02d}.000000+0000", "flow_id": 1000 + second, "event_type": event_type,
            "src_ip": ATTACKER, "src_port": 50000 + second, "dest_ip": "198.51.100.9", "dest_port": 80, "proto": "TCP",
            "host": "ids-1", **fields}


SURICATA = [
    _eve("alert", 1, alert={"action": "allowed", "gid": 1, "signature_id": 2100498, "rev": 7, "severity": 1,
                            "signature": "GPL ATTACK_RESPONSE id check returned root", "category": "Potentially Bad Traffic"}),
    _eve("alert", 2, alert={"action": "allowed", "gid": 1, "signature_id": 2024897, "rev": 2, "severity": 3,
                            "signature": "ET USER_AGENTS Go HTTP Client User-Agent", "category": "Misc activity"}),
    _eve("dns", 3, dest_port=53, proto="UDP", dns={"type": "query", "id": 7, "rrname": "evil.example", "rrtype": "A"}),
    _eve("http", 4, app_proto="http", http={"hostname": "evil.example", "url": "/x.sh", "http_method": "GET",
                                            "status": 200, "http_user_agent": "curl/8"}),
    _eve("anomaly", 5, anomaly={"type": "stream", "event": "INVALID_ACK"}),  # no OCSF class: quarantined
]


def plant(source: str, landing: Path) -> None:
    """Write the planted events of ``source`` into its landing folder, in the log's own file format."""
    if source == "cloudtrail":
        (landing / "planted").mkdir(parents=True, exist_ok=True)
        (landing / "planted" / "planted.json").write_text(json.dumps({"Records": CLOUDTRAIL}))
    else:
        name = f"cowrie.json.{DAY}" if source == "cowrie" else "planted-eve.json"
        (landing / name).write_text("".join(json.dumps(r) + "\n" for r in (COWRIE if source == "cowrie" else SURICATA)))


def read(spark, lake: Path, table: str):
    return spark.read.format("delta").load(str(Lake(lake).table_path(table)))
