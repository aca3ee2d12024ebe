"""The suricata_eve job: hand-made EVE lines through its transform in batch (a line per quarantine reason, the file
names it reads, typed and JSON columns), then the real EVE log in ../shared through real runs: every line in its
table or its quarantine, one row per distinct event_id, and a rerun or the log landing again adds nothing."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.driver.runner import run_streaming
from spark_jobs.model.lake import Lake
from spark_jobs.model.runs import RunOptions
from spark_jobs.model.triggers import parse_trigger
from spark_jobs.registry import get_job
from spark_jobs.transforms.json_lines import JSON
from spark_jobs.transforms.suricata.parse import FIELDS, NESTED
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.transformed import json_line, transformed_rows

JOB = get_job("suricata_eve")
EVENTS, QUARANTINE = (table.name for table in JOB.tables)
REAL_EVE = PROJECT_ROOT.parent / "shared" / "data" / "real" / "applogs" / "magnc_suricata_data_training" / "eve.json"
UTC = dt.timezone.utc

ALERT = {"timestamp": "2023-02-28T12:00:01.000002+0100", "flow_id": 1234567890123456, "in_iface": "ens18",
         "event_type": "alert", "src_ip": "10.0.0.1", "src_port": 40000, "dest_ip": "10.0.0.2", "dest_port": 80,
         "proto": "TCP", "tx_id": 0, "alert": {"action": "allowed", "gid": 1, "signature_id": 2100498, "rev": 7,
                                               "signature": "GPL ATTACK_RESPONSE id check returned root",
                                               "category": "Potentially Bad Traffic", "severity": 2},
         "http": {"hostname": "example.org", "url": "/x", "http_method": "GET", "status": 200}, "app_proto": "http",
         "flow": {"pkts_toserver": 3, "bytes_toserver": 300, "start": "2023-02-28T12:00:00.5+0100"},
         "shipper": {"name": "vector"}}




def test_a_line_per_quarantine_reason_and_the_names_it_reads(spark, tmp_path):
    # One packet matching two signatures: two alerts with the same flow, type and time, two events.
    second = {**ALERT, "alert": {**ALERT["alert"], "signature_id": 2013028}}
    lines = [
        json_line(ALERT), json_line(second), b"",
        b'{"event_type": "alert", "timestamp": ',  # 4
        b'"stats"',  # 5
        b'{"event_type": "dns", "timestamp": "2023-02-28T11:00:00+0000", "event_type": "tls"}',  # 6
        b'{"timestamp": "2023-02-28T11:00:00+0000", "flow_id": 1}',  # 7
        b'{"event_type": "flow", "flow_id": 1}',  # 8
        b'{"event_type": "flow", "timestamp": "2023-02-28T11:00:00"}',  # 9: no zone
        b'{"event_type": "http", "timestamp": "2023-02-28T11:00:00+0000", "http": {"url": "/\xff"}}',  # 10
    ]
    got = transformed_rows(spark, JOB, tmp_path, {
        "eve-2023-02-28-1200.json": b"\n".join(lines) + b"\n",  # Suricata's own rotation
        "eve.json-20230228.gz": gzip.compress(json_line({**ALERT, "event_type": "flow"}) + b"\n"),  # logrotate dateext
        "eve.json": json_line(ALERT),  # no date in the name: read all the same (the same event again)
        "eve.json.1": json_line(second),  # logrotate's numbered copies are renamed every day: not read
        "fast.log": b"not EVE\n",
    })
    text = [x.decode("utf-8", errors="replace") for x in lines]
    assert sorted((Path(r.source_file).name, r.line_number, r.reason, r.detail, r.raw, r.event_type)
                  for r in got[QUARANTINE]) == [
        ("eve-2023-02-28-1200.json", 4, "invalid_json", "Expecting value at column 38", text[3], None),
        ("eve-2023-02-28-1200.json", 5, "not_an_object", 'a line must be a JSON object, got a JSON str: "stats"',
         text[4], None),
        ("eve-2023-02-28-1200.json", 6, "duplicate_key", "the key 'event_type' comes more than once", text[5], "tls"),
        ("eve-2023-02-28-1200.json", 7, "missing_event_type", "the line has no event_type", text[6], None),
        ("eve-2023-02-28-1200.json", 8, "missing_timestamp", "the line has no timestamp", text[7], "flow"),
        ("eve-2023-02-28-1200.json", 9, "bad_timestamp",
         'timestamp is not an ISO-8601 time with a zone: "2023-02-28T11:00:00"', text[8], "flow"),
        ("eve-2023-02-28-1200.json", 10, "invalid_utf8",
         "bytes that are not UTF-8 at byte 83 of the line (shown as U+FFFD)", text[9], None),
    ]
    events = sorted((Path(r._source_file).name, r._line_number, r.event_type, r.alert_signature_id)
                    for r in got[EVENTS])
    assert events == [("eve-2023-02-28-1200.json", 1, "alert", 2100498),
                      ("eve-2023-02-28-1200.json", 2, "alert", 2013028),
                      ("eve.json", 1, "alert", 2100498), ("eve.json-20230228.gz", 1, "flow", 2100498)]
    ids = {(Path(r._source_file).name, r._line_number): r.event_id for r in got[EVENTS]}
    assert ids[("eve.json", 1)] == ids[("eve-2023-02-28-1200.json", 1)]  # one event, two deliveries: one row
    assert len(set(ids.values())) == 3


def test_shared_fields_are_typed_objects_kept_as_json_and_unknown_keys_rescued(spark, tmp_path):
    [row] = transformed_rows(spark, JOB, tmp_path, {"eve.json": json_line(ALERT)})[EVENTS]
    got = {name: value for name, value in row.asDict().items() if value is not None}
    assert got == {
        "event_id": got["event_id"], "timestamp": dt.datetime(2023, 2, 28, 11, 0, 1, 2), "date": dt.date(2023, 2, 28),
        "event_type": "alert", "flow_id": 1234567890123456, "in_iface": "ens18", "src_ip": "10.0.0.1",
        "src_port": 40000, "dest_ip": "10.0.0.2", "dest_port": 80, "proto": "TCP", "app_proto": "http", "tx_id": 0,
        **{name: json.dumps(ALERT[name], separators=(",", ":")) for name in ("alert", "http", "flow")},
        "alert_action": "allowed", "alert_gid": 1, "alert_signature_id": 2100498, "alert_rev": 7,
        "alert_signature": "GPL ATTACK_RESPONSE id check returned root", "alert_category": "Potentially Bad Traffic",
        "alert_severity": 2, "flow_pkts_toserver": 3, "flow_bytes_toserver": 300,
        "flow_start": dt.datetime(2023, 2, 28, 11, 0, 0, 500000), "http_hostname": "example.org", "http_url": "/x",
        "http_method": "GET", "http_status": 200, "_rescued_data": '{"shipper":{"name":"vector"}}',
        "_source_file": got["_source_file"], "_line_number": 1}


# ---- The real EVE log (../shared/data/real/applogs/magnc_suricata_data_training: one eve.json, 253 lines) -----

def run(landing: Path, lake: Path):
    """Run the job in this process on the tests' SparkSession (available-now)."""
    return run_streaming(JOB, RunOptions(landing, Lake(lake), parse_trigger("available-now"),
                                         dict(JOB.file_source_options)))


def rows(spark, lake: Path) -> dict[str, list]:
    return {t.name: spark.read.format("delta").load(str(Lake(lake).table_path(t.name))).collect() for t in JOB.tables}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, spark):
    if not REAL_EVE.is_file():
        pytest.skip(f"the real EVE log is not at {REAL_EVE} (it sits beside the project in ../shared/data/real)")
    root = tmp_path_factory.mktemp("suricata")
    landing, lake = root / "landing", root / "lake"
    landing.mkdir()
    shutil.copyfile(REAL_EVE, landing / "eve.json")  # its own name: no date in it (dated by its modification time)
    summary = run(landing, lake)
    return {"summary": summary, "landing": landing, "lake": lake, **rows(spark, lake)}


@pytest.mark.real_data
def test_every_real_line_is_in_its_table_or_its_quarantine(ingested):
    text = REAL_EVE.read_text(encoding="utf-8").split("\n")
    records = {number: json.loads(found) for number, found in enumerate(text, start=1) if found.strip()}
    events, quarantined = ingested[EVENTS], ingested[QUARANTINE]
    assert (len(records), ingested["summary"].rows) == (253, {EVENTS: len(events), QUARANTINE: len(quarantined)})
    placed = Counter([r._line_number for r in events] + [r.line_number for r in quarantined])
    assert placed == Counter(records.keys())  # every line once, in one of the two
    assert len(events) == len({r.event_id for r in events}) == 253 and quarantined == []
    assert Counter(r.event_type for r in events) == {"flow": 215, "ssh": 13, "stats": 13, "tls": 12}
    for row in events:
        record = records[row._line_number]
        assert row.timestamp.replace(tzinfo=UTC) == dt.datetime.strptime(record["timestamp"], "%Y-%m-%dT%H:%M:%S.%f%z")
        typed = {name: getattr(row, name) for name in FIELDS if name in record}
        assert typed == {name: json.dumps(record[name], ensure_ascii=False, separators=(",", ":")) if kind == JSON
                         else record[name] for name, kind in FIELDS.items() if name in record}, row._line_number
        assert set(record) - set(FIELDS) == {"timestamp"} and row._rescued_data is None
    flows = [r for r in events if r.event_type == "flow"]
    assert sum(r.flow_bytes_toserver for r in flows) == sum(records[r._line_number]["flow"]["bytes_toserver"]
                                                            for r in flows)
    assert {r.date for r in events} == {dt.date(2023, 2, 28)} and set(NESTED) <= set(events[0].asDict())


@pytest.mark.real_data
def test_a_rerun_or_the_log_landing_again_adds_nothing(ingested, spark):
    again = run(ingested["landing"], ingested["lake"])
    assert (again.input_files, again.rows) == (0, {EVENTS: 0, QUARANTINE: 0})
    # The same log again, rotated to a dated name (logrotate's dateext) and gzipped, from a second sensor's folder (a
    # new folder is listed whole; in the first one, its 2023 name would be behind the window the undated file's
    # modification time opened, and wait for the reconcile): a new file of the same events.
    (ingested["landing"] / "sensor-b").mkdir()
    (ingested["landing"] / "sensor-b" / "eve.json-20230301.gz").write_bytes(gzip.compress(REAL_EVE.read_bytes()))
    redelivered = run(ingested["landing"], ingested["lake"])
    assert (redelivered.input_files, redelivered.rows) == (1, {EVENTS: 0, QUARANTINE: 0})
    tables = rows(spark, ingested["lake"])
    assert (len(tables[EVENTS]), len({r.event_id for r in tables[EVENTS]}), len(tables[QUARANTINE])) == (253, 253, 0)
