"""The cowrie_honeypot job on small hand-made log files: its transform in batch (the same code runs in
streaming), a line per quarantine reason, and one row per event through a real run."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
from pathlib import Path

from tests.helpers.cowrie import EVENTS, JOB, QUARANTINE, read_tables, run
from tests.helpers.transformed import json_line, transformed_rows

UTC = dt.timezone.utc

LOGIN = {"eventid": "cowrie.login.failed", "username": "root", "timestamp": "2018-05-19T00:03:09.084318Z",
         "message": "login attempt [root/123456] failed", "system": "SSHService 'ssh-userauth' on HoneyPotSSHTransport",
         "isError": 0, "src_ip": "145.239.65.62", "session": "524e0ff18104", "password": "123456",
         "sensor": "920497a79896"}
# A connect from Cowrie 2 with a port as text (not an int: rescued) and a field no shape of the job knows.
CONNECT = {"eventid": "cowrie.session.connect", "timestamp": "2018-05-19T02:03:08.5+02:00", "src_ip": "1.2.3.4",
           "src_port": "50540", "dst_ip": "172.17.0.3", "dst_port": 2222, "protocol": "ssh", "session": "s1",
           "sensor": "h1", "isError": False, "arch": "linux-x64-lsb"}




def test_a_line_per_quarantine_reason_gives_exact_rows(spark, tmp_path):
    ok = json_line(LOGIN)
    lines = [
        ok,  # 1: an event
        b"",  # 2: blank lines are not records
        b'{"eventid": "cowrie.login.failed", "timestamp": ',  # 3
        b'["cowrie.login.failed"]',  # 4
        b'{"eventid": "cowrie.a", "timestamp": "2018-05-19T00:00:00Z", "eventid": "cowrie.b"}',  # 5
        b'{"timestamp": "2018-05-19T00:00:00Z", "eventid": "  "}',  # 6
        b'{"eventid": "cowrie.session.closed", "timestamp": null}',  # 7
        b'{"eventid": "cowrie.session.closed", "timestamp": "2018-02-30T00:00:00Z"}',  # 8
        b'{"eventid": "cowrie.session.closed", "timestamp": "2018-05-19T00:00:00"}',  # 9: no zone
        b'{"eventid": "cowrie.command.input", "input": "echo \xff"}',  # 10
        b'{"eventid": "cowrie.x", "timestamp": NaN}',  # 11
        b"   \r",  # 12: blank too
    ]
    # A gzip stream cut in its trailer: the whole lines are events, the unterminated one is the damage.
    cut = gzip.compress(ok + b"\n" + json_line(CONNECT) + b'\n{"eventid": "cowrie.session.clo')[:-8]
    got = transformed_rows(spark, JOB, tmp_path, {
        "a.json.2018-05-19": b"\n".join(lines) + b"\n",
        "b.json.2018-05-19.gz": cut,
        "c.json.2018-05-20": b"\n \n",  # only blank lines: nothing
        "cowrie.json": ok,  # the live log Cowrie still writes: not read
    })
    quarantined = sorted((Path(r.source_file).name, r.line_number, r.reason, r.detail, r.raw, r.eventid)
                         for r in got[QUARANTINE])
    text = [x.decode("utf-8", errors="replace") for x in lines]
    assert quarantined == [
        ("a.json.2018-05-19", 3, "invalid_json", "Expecting value at column 49", text[2], None),
        ("a.json.2018-05-19", 4, "not_an_object",
         'a line must be a JSON object, got a JSON list: ["cowrie.login.failed"]', text[3], None),
        ("a.json.2018-05-19", 5, "duplicate_key", "the key 'eventid' comes more than once", text[4], "cowrie.b"),
        ("a.json.2018-05-19", 6, "missing_eventid", 'eventid is not a non-blank string: "  "', text[5], "  "),
        ("a.json.2018-05-19", 7, "missing_timestamp", "the line has no timestamp", text[6], "cowrie.session.closed"),
        ("a.json.2018-05-19", 8, "bad_timestamp",
         'timestamp is not an ISO-8601 time with a zone: "2018-02-30T00:00:00Z"', text[7], "cowrie.session.closed"),
        ("a.json.2018-05-19", 9, "bad_timestamp",
         'timestamp is not an ISO-8601 time with a zone: "2018-05-19T00:00:00"', text[8], "cowrie.session.closed"),
        ("a.json.2018-05-19", 10, "invalid_utf8", "bytes that are not UTF-8 at byte 52 of the line (shown as U+FFFD)",
         text[9], None),
        ("a.json.2018-05-19", 11, "invalid_json", "NaN is not JSON", text[10], None),
        ("b.json.2018-05-19.gz", 3, "unreadable_file",
         f"truncated gzip stream: {len(cut)} compressed bytes end before the stream does (619 bytes readable)",
         '{"eventid": "cowrie.session.clo', None),
    ]
    assert text[9].endswith('"echo \ufffd"}')
    assert all((r.raw_truncated, r.raw_length) == (False, len(r.raw)) for r in got[QUARANTINE])
    assert sorted((Path(r._source_file).name, r._line_number) for r in got[EVENTS]) == [
        ("a.json.2018-05-19", 1), ("b.json.2018-05-19.gz", 1), ("b.json.2018-05-19.gz", 2)]


def _event_id(*parts: str) -> str:
    return hashlib.sha256(json.dumps(list(parts)).encode()).hexdigest()


def test_every_field_is_typed_or_rescued(spark, tmp_path):
    got = transformed_rows(spark, JOB, tmp_path, {"a.json.2018-05-19": json_line(LOGIN) + b"\r\n" + json_line(CONNECT)})
    assert got[QUARANTINE] == []
    login, connect = sorted((r.asDict() for r in got[EVENTS]), key=lambda r: r["_line_number"])
    nulls = {name: None for name in login}
    assert login == {**nulls, **{k: v for k, v in LOGIN.items() if k != "timestamp"},
                     "event_id": _event_id("920497a79896", "524e0ff18104", "cowrie.login.failed",
                                           "2018-05-19T00:03:09.084318Z"),
                     "timestamp": dt.datetime(2018, 5, 19, 0, 3, 9, 84318), "date": dt.date(2018, 5, 19),
                     "isError": False, "_source_file": login["_source_file"], "_line_number": 1}
    assert connect == {**nulls, "event_id": _event_id("h1", "s1", "cowrie.session.connect",
                                                      "2018-05-19T00:03:08.500000Z"),
                       "timestamp": dt.datetime(2018, 5, 19, 0, 3, 8, 500000), "date": dt.date(2018, 5, 19),
                       "eventid": "cowrie.session.connect", "src_ip": "1.2.3.4", "dst_ip": "172.17.0.3",
                       "dst_port": 2222, "protocol": "ssh", "session": "s1", "sensor": "h1", "isError": False,
                       "_rescued_data": '{"src_port":"50540","arch":"linux-x64-lsb"}',
                       "_source_file": connect["_source_file"], "_line_number": 2}


def test_arrays_numbers_and_downloads_keep_their_types(spark, tmp_path):
    version = {"eventid": "cowrie.client.version", "timestamp": "2018-05-19T00:03:08.860757Z", "session": "s",
               "version": "SSH-2.0-libssh2_1.7.0", "kexAlgs": ["curve25519-sha256", "ecdh-sha2-nistp256"],
               "compCS": ["none"], "macCS": "hmac-sha1"}
    closed = {"eventid": "cowrie.log.closed", "timestamp": "2018-05-19T04:31:44.871890Z", "session": "s",
              "ttylog": "log/tty/x.log", "duration": 1, "size": 4}
    download = {"eventid": "cowrie.session.file_download", "timestamp": "2018-07-01T19:17:12.743617Z", "session": "s",
                "url": "http://h/x", "shasum": "e651", "outfile": "dl/e651", "unique": True}
    lines = b"\n".join(map(json_line, (version, closed, download)))
    got = transformed_rows(spark, JOB, tmp_path, {"a.json.2018-05-19": lines})
    rows = {r.eventid: r for r in got[EVENTS]}
    v, c, d = rows["cowrie.client.version"], rows["cowrie.log.closed"], rows["cowrie.session.file_download"]
    assert (v.version, v.kexAlgs, v.compCS, v.macCS, v._rescued_data) == (
        "SSH-2.0-libssh2_1.7.0", ["curve25519-sha256", "ecdh-sha2-nistp256"], ["none"], None, '{"macCS":"hmac-sha1"}')
    assert (c.ttylog, c.duration, c.size, c._rescued_data) == ("log/tty/x.log", 1.0, 4, None)
    assert (d.url, d.shasum, d.outfile, d.unique, d.date) == ("http://h/x", "e651", "dl/e651", True,
                                                              dt.date(2018, 7, 1))


def test_an_event_delivered_again_is_one_row_the_first_delivery(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    (landing / "sensor-a").mkdir(parents=True)
    # The same event re-serialized: other key order, +00:00 for Z, one field more. Then a later batch again.
    again = {"sensor": LOGIN["sensor"], **LOGIN, "timestamp": "2018-05-19T00:03:09.084318+00:00", "extra": 1}
    (landing / "sensor-a" / "a.json.2018-05-19").write_bytes(json_line(LOGIN) + b"\n" + json_line(again) + b"\n")
    (landing / "sensor-a" / "b.json.2018-05-19").write_bytes(json_line(again) + b"\n" + json_line(CONNECT) + b"\n")
    first = run(landing, lake)
    assert first.rows == {EVENTS: 2, QUARANTINE: 0}
    (landing / "a-copy.json.2018-05-19").write_bytes(json_line(again))
    second = run(landing, lake)
    assert (second.input_files, second.rows) == (1, {EVENTS: 0, QUARANTINE: 0})
    columns = ("eventid", "_source_file", "_line_number", "_rescued_data")
    rows = read_tables(spark, lake)[EVENTS].select(*columns).collect()
    assert sorted((r.eventid, Path(r._source_file).name, r._line_number, r._rescued_data) for r in rows) == [
        ("cowrie.login.failed", "a.json.2018-05-19", 1, None),
        ("cowrie.session.connect", "b.json.2018-05-19", 2, '{"src_port":"50540","arch":"linux-x64-lsb"}')]
