"""Reading Spark's checkpoint logs and listings without Spark: formats, checksums, globs, state folders."""

from __future__ import annotations

import struct
import zlib

import pytest

from spark_jobs.control.checkpoint.inspect import CheckpointReport, _state
from spark_jobs.control.checkpoint.listing import glob_to_regex, hidden, list_input, max_file_age_ms
from spark_jobs.control.checkpoint.logs import (LogDamage, parse_commit, parse_offsets, read_source_log, scan_log_dir,
                                        verify_crc)
from spark_jobs.control.checkpoint.store import Location, normalize_file_uri
from spark_jobs.registry import get_job

OFFSETS = b'v1\n{"batchWatermarkMs":5,"batchTimestampMs":1700000000000,"conf":{"a":"b"}}\n{"logOffset":3}'


def hadoop_crc(data: bytes, chunk: int = 512) -> bytes:
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i:i + chunk])) for i in range(0, len(data), chunk))
    return b"crc\x00" + struct.pack(">i", chunk) + sums


def test_offsets_are_parsed():
    entry = parse_offsets(OFFSETS)
    assert (entry.version, entry.watermark_ms, entry.timestamp_ms, entry.conf, entry.sources) == (
        1, 5, 1700000000000, {"a": "b"}, [{"logOffset": 3}])
    assert parse_offsets(b'v1\n{"batchWatermarkMs":0}\n-').sources == [None]


@pytest.mark.parametrize("data, words", [
    (b"", "empty"),
    (b"v1", "ends after its version line"),
    (b"v1\n{\"batchWatermarkMs\":", "metadata line is not complete JSON"),
    (b'v1\n{"batchWatermarkMs":0}', "holds no source offset"),
    (b'v1\n{"batchWatermarkMs":0}\n{"logOff', "source 0 is not complete JSON"),
    (b"garbage\n{}", "is not a version"),
    (b'v9\n{}\n{"logOffset":1}', "newer than this Spark reads"),
])
def test_damaged_offsets_say_what_is_wrong(data, words):
    with pytest.raises(LogDamage, match=words):
        parse_offsets(data)


def test_commits_are_parsed_and_torn_ones_refused():
    assert parse_commit(b'v1\n{"nextBatchWatermarkMs":0}') == {"nextBatchWatermarkMs": 0}
    with pytest.raises(LogDamage, match="empty"):
        parse_commit(b"")
    with pytest.raises(LogDamage, match="not complete"):
        parse_commit(b'v1\n{"next')


def test_hadoop_checksums_are_verified():
    data = OFFSETS * 20  # more than one 512-byte chunk
    assert verify_crc(data, hadoop_crc(data)) is True
    assert verify_crc(data[:-1], hadoop_crc(data)) is False
    assert verify_crc(data, b"not a crc file") is None


def test_log_folder_scan_sorts_batches_temps_and_orphan_checksums(tmp_path):
    for name in ("0", "1", "2", "9.compact", "9", ".0.crc", ".1.crc", ".5.crc", ".3.d2f1.tmp", "..3.d2f1.tmp.crc"):
        (tmp_path / name).write_bytes(b"x")
    log = scan_log_dir(Location.of(tmp_path))
    assert log.batches == {0: "0", 1: "1", 2: "2", 9: "9.compact"}
    assert sorted(log.temp_files) == ["..3.d2f1.tmp.crc", ".3.d2f1.tmp"]
    assert log.orphan_crcs == [".5.crc"]
    assert log.crcs == {"0": ".0.crc", "1": ".1.crc"}


def test_source_log_reads_the_newest_compact_file_and_what_follows(tmp_path):
    def entries(*pairs):
        return ("v1\n" + "\n".join(f'{{"path":"file:///in/{p}","timestamp":1,"batchId":{b}}}' for p, b in pairs)).encode()

    (tmp_path / "8").write_bytes(entries(("old", 8)))
    (tmp_path / "9.compact").write_bytes(entries(("a", 0), ("b", 9)))
    (tmp_path / "10").write_bytes(entries(("c", 10)))
    logged = read_source_log(scan_log_dir(Location.of(tmp_path)))
    assert [(e["path"], e["batchId"]) for e in logged] == [
        ("file:///in/a", 0), ("file:///in/b", 9), ("file:///in/c", 10)]


@pytest.mark.parametrize("name, matches", [
    ("x.json", True), ("x.json.gz", True), ("x.jsonl", True), ("x.ndjson.gz", True),
    ("x.json.gz.tmp", False), ("x.csv", False), ("x.JSON", False), ("x.jsonl.gz", True),
])
def test_the_jobs_glob_filter(name, matches):
    pattern = glob_to_regex(get_job("cloudtrail_etl").file_source_options["pathGlobFilter"])
    assert (pattern.match(name) is not None) == matches


def test_hadoop_glob_features():
    assert glob_to_regex("a?[bc]*.{x,y{1,2}}").match("aZc_anything.y2")
    assert not glob_to_regex("a?[bc]*.{x,y{1,2}}").match("aZd.x")
    assert glob_to_regex("[^a]b").match("cb") and not glob_to_regex("[^a]b").match("ab")


def test_hidden_names_are_spark_s():
    assert [n for n in ("_SUCCESS", ".x", "a._COPYING_", "date=2024", "_col=1", "x.json") if hidden(n)] == [
        "_SUCCESS", ".x", "a._COPYING_"]


def test_max_file_age():
    assert max_file_age_ms({}) == 7 * 24 * 3600 * 1000
    assert max_file_age_ms({"maxFileAge": "2h"}) == 2 * 3600 * 1000
    assert max_file_age_ms({"latestFirst": "true", "maxFilesPerTrigger": "5"}) is None


def test_listing_applies_recursion_and_filters(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "_tmp").mkdir()
    for path in ("top.json", "a/b/deep.json.gz", "a/b/.hidden.json", "a/b/x.json.gz.tmp", "_tmp/in_hidden.json",
                 "a/zero.json"):
        (tmp_path / path).write_bytes(b"" if "zero" in path else b"{}")
    options = {"pathGlobFilter": "*.{json,json.gz}"}
    recursive = sorted(f.key for f in list_input(Location.of(tmp_path), {**options, "recursiveFileLookup": "true"}))
    assert recursive == sorted(normalize_file_uri(str(tmp_path / p)) for p in ("top.json", "a/b/deep.json.gz",
                                                                                 "a/zero.json"))
    flat = [f.key for f in list_input(Location.of(tmp_path), options)]
    assert flat == [normalize_file_uri(str(tmp_path / "top.json"))]


def test_file_uris_normalize_like_spark_logs_them():
    assert normalize_file_uri("file:///a/b%20c.json") == "/a/b c.json"
    assert normalize_file_uri("file:/a/b.json") == "/a/b.json"
    assert normalize_file_uri("/a/b.json") == "/a/b.json"
    assert normalize_file_uri("s3a://bucket/k/x.json") == "s3a://bucket/k/x.json"


def test_state_folders_are_summarized(tmp_path):
    checkpoint = tmp_path / "cp"
    for op, part, files in ((0, 0, ("1.delta", "2.delta", "2.snapshot")), (0, 1, ("1.delta", "2.delta")),
                            (1, 0, ("3.zip", "3.changelog", "4.changelog"))):
        folder = checkpoint / "state" / str(op) / str(part)
        folder.mkdir(parents=True)
        for name in files:
            (folder / name).write_bytes(b"x")
    meta = checkpoint / "state" / "0" / "_metadata"
    meta.mkdir()
    (meta / "metadata").write_text('v1\n{"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},'
                                   '"stateStoreInfo":[]}')
    report = CheckpointReport(job="j", checkpoint=str(checkpoint), control="")
    _state(report, Location.of(checkpoint))
    assert report.state == {"operators": [
        {"id": 0, "names": ["stateStoreSave"], "partitions": 2, "latest_version": 2},
        {"id": 1, "names": [], "partitions": 1, "latest_version": 4}]}


def test_the_checkpoint_package_imports_no_pyspark():
    import subprocess
    import sys

    code = ("import sys, spark_jobs.control.checkpoint, spark_jobs.control.checkpoint.inspect, spark_jobs.control.checkpoint.repair, "
            "spark_jobs.cli.checkpoint; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_delta_app_ids_are_read_from_json_commits_and_parquet_checkpoints(tmp_path):
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    from spark_jobs.control.checkpoint.tables import delta_app_versions, delta_transaction_version, table_progress

    path = str(tmp_path / "events")
    for batch in range(3):
        write_deltalake(path, pa.table({"eventID": [f"e{batch}"]}), mode="append", commit_properties=CommitProperties(
            app_transactions=[Transaction("q1:events", batch)]))
    DeltaTable(path).create_checkpoint()
    write_deltalake(path, pa.table({"eventID": ["x"]}), mode="append",
                    commit_properties=CommitProperties(app_transactions=[Transaction("q2:events", 7)]))
    table = Location.of(path)
    assert any(name.endswith(".checkpoint.parquet") for name in table.child("_delta_log").names())
    assert delta_app_versions(table) == {"q1:events": 2, "q2:events": 7}
    assert delta_transaction_version(table, "q1:events") == 2
    progress = table_progress(table, "events", "q1")
    assert (progress.format, progress.batch, progress.app_id) == ("delta", 2, "q1:events")
