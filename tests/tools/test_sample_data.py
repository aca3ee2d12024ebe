"""Tests of :mod:`tools.sample_data`: determinism, layout, and a manifest that matches the files.

The manifest is checked against an independent reader written here from the reason codes' meaning,
so a file that is not bad in the declared way (or a good id that is not in any file) fails a test.
"""

from __future__ import annotations

import ast
import gzip
import json
import random
import re
import sys
import zlib
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tools import sample_data
from spark_jobs.transforms.cloudtrail import reasons
from tools.sample_data import BadItem, SampleManifest, generate_records, main, write_sample_landing

START = datetime(2024, 3, 1, tzinfo=UTC)
# Good records in the special files: array export 10, JSON lines 10, and 9 + 8 + 9 + 9 in the
# files with one or two bad records.
EXTRA_GOOD = 10 + 10 + 9 + 8 + 9 + 9
LAYOUT = re.compile(
    r"AWSLogs/(?P<account>\d{12})/CloudTrail/(?P<region>[a-z]{2}-[a-z]+-\d)/(?P<y>\d{4})/(?P<m>\d{2})/(?P<d>\d{2})/"
    r"(?P=account)_CloudTrail_(?P=region)_(?P<stamp>(?P=y)(?P=m)(?P=d)T\d{4}Z)_[A-Za-z0-9]{16}"
    r"(?P<ext>\.json\.gz|\.json|\.jsonl)$"
)
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
EVENT_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> tuple[Path, SampleManifest]:
    """The default landing folder, written once for the module."""
    root = tmp_path_factory.mktemp("landing")
    return root, write_sample_landing(root)


def _all_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _records(path: Path) -> list:
    """The Records array of a healthy gzipped delivery."""
    return json.loads(gzip.decompress(path.read_bytes()))["Records"]


# ---- An independent reader of the reason codes --------------------------------------------------


def _classify_record(record, index: int, good: list[str], bad: list[tuple[str, int | None]]) -> None:
    if not isinstance(record, dict):
        bad.append((reasons.NOT_AN_OBJECT, index))
    elif any("\udc80" <= ch <= "\udcff" for ch in json.dumps(record, ensure_ascii=False)):
        bad.append((reasons.INVALID_UTF8, index))
    elif "eventTime" not in record:
        bad.append((reasons.MISSING_EVENT_TIME, index))
    elif not EVENT_TIME.match(str(record["eventTime"])):
        bad.append((reasons.BAD_EVENT_TIME, index))
    elif "eventID" not in record:
        bad.append((reasons.MISSING_EVENT_ID, index))
    else:
        good.append(record["eventID"])


def _reference_read(path: Path) -> tuple[list[str], list[tuple[str, int | None]]]:
    """(good eventIDs, bad (reason, record_index) pairs) of one file, decided strictly."""
    good: list[str] = []
    bad: list[tuple[str, int | None]] = []
    data = path.read_bytes()
    if not data.strip():
        return good, [(reasons.EMPTY_FILE, None)]
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error):
            return good, [(reasons.UNREADABLE_FILE, None)]
    if path.suffix == ".jsonl":
        for index, line in enumerate(l for l in data.splitlines() if l.strip()):
            try:
                record = json.loads(line.decode("utf-8", "surrogateescape"))
            except ValueError:
                bad.append((reasons.INVALID_JSON, index))
                continue
            _classify_record(record, index, good, bad)
        return good, bad
    try:
        document = json.loads(data.decode("utf-8", "surrogateescape"))
    except ValueError:
        return good, [(reasons.INVALID_JSON, None)]
    if isinstance(document, dict) and isinstance(document.get("Records"), list):
        document = document["Records"]
    if not isinstance(document, list):
        return good, [(reasons.NO_RECORDS, None)]
    for index, record in enumerate(document):
        _classify_record(record, index, good, bad)
    return good, bad


# ---- Determinism ---------------------------------------------------------------------------------


def test_same_seed_writes_identical_bytes(tmp_path):
    first = write_sample_landing(tmp_path / "a", files=4, records_per_file=5, seed=11)
    second = write_sample_landing(tmp_path / "b", files=4, records_per_file=5, seed=11)
    assert _all_files(tmp_path / "a") == _all_files(tmp_path / "b")
    assert first.good_event_ids == second.good_event_ids
    assert [(b.reason, b.record_index, b.good_records_in_file) for b in first.bad] == \
        [(b.reason, b.record_index, b.good_records_in_file) for b in second.bad]


def test_different_seed_writes_different_files(tmp_path):
    first = write_sample_landing(tmp_path / "a", files=4, records_per_file=5, seed=1)
    second = write_sample_landing(tmp_path / "b", files=4, records_per_file=5, seed=2)
    assert _all_files(tmp_path / "a") != _all_files(tmp_path / "b")
    assert not set(first.good_event_ids) & set(second.good_event_ids)


def test_generate_records_is_deterministic():
    assert generate_records(random.Random(3), 20, START) == generate_records(random.Random(3), 20, START)
    assert generate_records(random.Random(3), 20, START) != generate_records(random.Random(4), 20, START)


# ---- The manifest matches the files --------------------------------------------------------------


def test_default_counts(landing):
    _, manifest = landing
    assert len(manifest.good_event_ids) == 24 * 50 + EXTRA_GOOD == 1255
    assert len(set(manifest.good_event_ids)) == len(manifest.good_event_ids)
    assert all(UUID4.match(event_id) for event_id in manifest.good_event_ids)
    assert manifest.bad_counts() == {
        reasons.BAD_EVENT_TIME: 1, reasons.EMPTY_FILE: 1, reasons.INVALID_JSON: 2, reasons.INVALID_UTF8: 1,
        reasons.MISSING_EVENT_ID: 1, reasons.MISSING_EVENT_TIME: 1, reasons.NO_RECORDS: 1,
        reasons.NOT_AN_OBJECT: 1, reasons.UNREADABLE_FILE: 1,
    }
    assert len(manifest.files_written) == 24 + 10
    assert len(manifest.ignored_files) == 3  # a dot file, a .tmp file and a zero-byte file


def test_healthy_deliveries_hold_the_declared_records(landing):
    _, manifest = landing
    bad_paths = {item.path for item in manifest.bad}
    healthy = [p for p in manifest.files_written if p.name.endswith(".json.gz") and p not in bad_paths]
    assert len(healthy) == 24
    ids = [r["eventID"] for path in healthy for r in _records(path)]
    assert len(ids) == 24 * 50
    assert set(ids) <= set(manifest.good_event_ids)


def test_every_file_is_exactly_as_the_manifest_says(landing):
    _, manifest = landing
    declared = {(item.path, item.reason, item.record_index) for item in manifest.bad}
    found_bad: set = set()
    found_good: list[str] = []
    for path in manifest.files_written:
        good, bad = _reference_read(path)
        found_good += good
        found_bad |= {(path, reason, index) for reason, index in bad}
        for item in (i for i in manifest.bad if i.path == path):
            assert item.good_records_in_file == len(good), item
    assert found_bad == declared
    assert sorted(found_good) == sorted(manifest.good_event_ids)
    assert all(item.reason in reasons.ALL for item in manifest.bad)
    assert all(isinstance(item, BadItem) and item.path.is_file() for item in manifest.bad)


def _bad_file(manifest: SampleManifest, reason: str) -> BadItem:
    (item,) = [i for i in manifest.bad if i.reason == reason and i.path.suffix != ".jsonl"]
    return item


def test_truncated_gzip_is_unreadable_and_keeps_no_whole_record(landing):
    _, manifest = landing
    item = _bad_file(manifest, reasons.UNREADABLE_FILE)
    assert (item.record_index, item.good_records_in_file) == (None, 0)
    data = item.path.read_bytes()
    with pytest.raises((EOFError, OSError)):
        gzip.decompress(data)
    readable = zlib.decompressobj(wbits=31).decompress(data).decode()
    assert readable.startswith('{"Records":[{')
    with pytest.raises(json.JSONDecodeError):  # not even the first record is complete
        json.JSONDecoder().raw_decode(readable, len('{"Records":['))


def test_invalid_json_files(landing):
    _, manifest = landing
    whole_file = _bad_file(manifest, reasons.INVALID_JSON)
    assert whole_file.path.name.endswith(".json.gz")
    assert (whole_file.record_index, whole_file.good_records_in_file) == (None, 0)
    text = gzip.decompress(whole_file.path.read_bytes()).decode()
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):  # the error is inside the first record
        json.JSONDecoder().raw_decode(text, len('{"Records":['))

    (line_item,) = [i for i in manifest.bad if i.path.suffix == ".jsonl"]
    lines = [l for l in line_item.path.read_text().splitlines() if l.strip()]
    assert len(lines) == 11 and line_item.good_records_in_file == 10
    assert "" in line_item.path.read_text().splitlines()[: line_item.record_index + 1]  # a blank line before it
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[line_item.record_index])
    assert all(isinstance(json.loads(l), dict) for i, l in enumerate(lines) if i != line_item.record_index)


def test_invalid_utf8_is_inside_one_user_agent(landing):
    _, manifest = landing
    item = _bad_file(manifest, reasons.INVALID_UTF8)
    data = item.path.read_bytes()
    assert item.path.name.endswith(".json") and data.count(b"\xff\xfe") == 1
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    records = json.loads(data.decode("utf-8", "surrogateescape"))["Records"]
    assert "\udcff\udcfe" in records[item.record_index]["userAgent"]
    assert item.good_records_in_file == len(records) - 1


def test_record_level_problems(landing):
    _, manifest = landing
    bad_time = _bad_file(manifest, reasons.BAD_EVENT_TIME)
    assert _records(bad_time.path)[bad_time.record_index]["eventTime"] == "not-a-time"
    not_object = _bad_file(manifest, reasons.NOT_AN_OBJECT)
    assert _records(not_object.path)[not_object.record_index] == 42
    no_time, no_id = _bad_file(manifest, reasons.MISSING_EVENT_TIME), _bad_file(manifest, reasons.MISSING_EVENT_ID)
    assert no_time.path == no_id.path and no_time.record_index != no_id.record_index
    records = _records(no_time.path)
    assert "eventTime" not in records[no_time.record_index] and "eventID" in records[no_time.record_index]
    assert "eventID" not in records[no_id.record_index] and "eventTime" in records[no_id.record_index]
    assert no_time.good_records_in_file == no_id.good_records_in_file == len(records) - 2


def test_empty_and_no_records_files(landing):
    _, manifest = landing
    empty = _bad_file(manifest, reasons.EMPTY_FILE)
    assert empty.path.suffix == ".json" and empty.path.read_bytes().strip() == b""
    assert [p for p in manifest.ignored_files if p.stat().st_size == 0]
    no_records = _bad_file(manifest, reasons.NO_RECORDS)
    assert json.loads(gzip.decompress(no_records.path.read_bytes())) == {"foo": []}


def test_array_export_is_pretty_printed(landing):
    _, manifest = landing
    (export,) = [p for p in manifest.files_written if p.suffix == ".json" and p.read_bytes().startswith(b"[")]
    records = json.loads(export.read_text())
    assert len(records) == 10 and export.read_text().count("\n") > 10
    assert {r["eventID"] for r in records} <= set(manifest.good_event_ids)


def test_ignored_files_are_valid_but_not_listed(landing):
    root, manifest = landing
    hidden = [p for p in manifest.ignored_files if p.name.startswith(".") or p.name.endswith(".tmp")]
    zero_bytes = [p for p in manifest.ignored_files if p.stat().st_size == 0]
    assert len(hidden) == 2 and len(zero_bytes) == 1
    assert not set(manifest.ignored_files) & set(manifest.files_written)
    for path in hidden:
        ids = {r["eventID"] for r in _records(path)}
        assert ids and not ids & set(manifest.good_event_ids)
    on_disk = {p for p in root.rglob("*") if p.is_file()}
    assert on_disk == set(manifest.files_written) | set(manifest.ignored_files)  # no temp files left


# ---- Layout and records --------------------------------------------------------------------------


def test_layout_matches_s3_deliveries(landing):
    root, manifest = landing
    dates = set()
    for path in manifest.files_written:
        match = LAYOUT.search(path.relative_to(root).as_posix())
        assert match, path
        assert path.relative_to(root).parts[0] == "AWSLogs"
        dates.add((match["y"], match["m"], match["d"]))
    assert len(dates) >= 3
    accounts = {p.relative_to(root).parts[1] for p in manifest.files_written}
    regions = {p.relative_to(root).parts[3] for p in manifest.files_written}
    assert len(accounts) == 2 and 2 <= len(regions) <= 3


def test_healthy_files_are_compact_and_hold_their_window(landing):
    root, manifest = landing
    bad_paths = {item.path for item in manifest.bad}
    for path in (p for p in manifest.files_written if p.name.endswith(".json.gz") and p not in bad_paths):
        text = gzip.decompress(path.read_bytes()).decode()
        assert text.startswith('{"Records":[{') and "\n" not in text
        match = LAYOUT.search(path.relative_to(root).as_posix())
        stamp = datetime.strptime(match["stamp"], "%Y%m%dT%H%MZ").replace(tzinfo=UTC)
        for record in json.loads(text)["Records"]:
            moment = datetime.strptime(record["eventTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            assert stamp <= moment < stamp + timedelta(minutes=5)
            assert record["recipientAccountId"] == match["account"]
            assert record["awsRegion"] in (match["region"], "us-east-1")


def test_records_look_like_cloudtrail():
    records = generate_records(random.Random(5), 1000, START)
    required = {"eventVersion", "userIdentity", "eventTime", "eventSource", "eventName", "awsRegion",
                "sourceIPAddress", "userAgent", "requestParameters", "responseElements", "requestID",
                "eventID", "readOnly", "eventType", "managementEvent", "recipientAccountId", "eventCategory"}
    for record in records:
        assert required <= record.keys(), required - record.keys()
        assert record["eventVersion"] in ("1.08", "1.09") and record["eventType"] == "AwsApiCall"
        assert EVENT_TIME.match(record["eventTime"]) and UUID4.match(record["eventID"])
        assert isinstance(record["readOnly"], bool)
        assert record["requestParameters"] is None or isinstance(record["requestParameters"], dict)
        assert record["responseElements"] is None or isinstance(record["responseElements"], dict)
    assert len({(r["eventSource"], r["eventName"]) for r in records}) >= 15
    assert {r["userIdentity"]["type"] for r in records} == {"IAMUser", "AssumedRole", "Root", "AWSService"}
    assert 0.7 < sum("tlsDetails" in r for r in records) / len(records) < 0.97  # not on AWSService calls
    assert 0.05 < sum("errorCode" in r for r in records) / len(records) < 0.15
    assert any("resources" in r for r in records) and any("additionalEventData" in r for r in records)


def test_identity_variants_have_their_fields():
    records = generate_records(random.Random(6), 600, START)
    by_type = {r["userIdentity"]["type"]: r["userIdentity"] for r in records}
    assert {"userName", "accessKeyId"} <= by_type["IAMUser"].keys()
    context = by_type["AssumedRole"]["sessionContext"]
    assert set(context["sessionIssuer"]) == {"type", "principalId", "arn", "accountId", "userName"}
    assert set(context["attributes"]) == {"creationDate", "mfaAuthenticated"}
    assert context["attributes"]["mfaAuthenticated"] == "false"
    assert "invokedBy" in by_type["AWSService"]


def test_field_types_vary_between_records():
    records = generate_records(random.Random(8), 2000, START)
    params = [r["requestParameters"] for r in records if r["requestParameters"]]
    assert {type(p["maxResults"]) for p in params if "maxResults" in p} == {int, str}
    assert {type(p["instanceType"]) for p in params if "instanceType" in p} == {str, dict}


def test_some_records_have_keys_the_schema_does_not_know():
    records = generate_records(random.Random(9), 2000, START)
    known = {"eventVersion", "userIdentity", "eventTime", "eventSource", "eventName", "awsRegion",
             "sourceIPAddress", "userAgent", "errorCode", "errorMessage", "requestParameters",
             "responseElements", "additionalEventData", "requestID", "eventID", "readOnly", "resources",
             "eventType", "managementEvent", "recipientAccountId", "eventCategory", "tlsDetails"}
    unknown = sum(bool(r.keys() - known) for r in records)
    assert 0.02 < unknown / len(records) < 0.08


def test_generate_records_times_are_ascending_within_five_minutes():
    start = datetime(2024, 3, 1, 10, 0, 0, 500_000, tzinfo=UTC)
    times = [datetime.strptime(r["eventTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
             for r in generate_records(random.Random(1), 200, start)]
    assert times == sorted(times)
    assert start <= times[0] and times[-1] < start + timedelta(minutes=5)


# ---- Options, errors and the command line --------------------------------------------------------


def test_without_bad_files(tmp_path):
    manifest = write_sample_landing(tmp_path, files=3, records_per_file=4, include_bad_files=False)
    assert len(manifest.good_event_ids) == 12 and manifest.bad == () and manifest.ignored_files == ()
    assert len(manifest.files_written) == 3


def test_start_is_rounded_up_to_a_five_minute_boundary(tmp_path):
    start = datetime(2024, 5, 31, 23, 57, 10, tzinfo=UTC)
    manifest = write_sample_landing(tmp_path, files=2, records_per_file=3, start=start, include_bad_files=False)
    times = [r["eventTime"] for p in manifest.files_written for r in _records(p)]
    assert min(times) >= "2024-06-01T00:00:00Z"


@pytest.mark.parametrize("kwargs", [{"files": -1}, {"records_per_file": 0}, {"start": datetime(2024, 3, 1)}])
def test_bad_arguments_raise(tmp_path, kwargs):
    with pytest.raises(ValueError):
        write_sample_landing(tmp_path, **kwargs)


def test_main_prints_one_summary_line(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--files", "2", "--records-per-file", "3", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert f"wrote 12 files to {tmp_path}: {6 + EXTRA_GOOD} good records, 10 bad items" in out


def test_main_without_bad_files(tmp_path, capsys):
    main(["--out", str(tmp_path), "--files", "1", "--records-per-file", "2", "--no-bad-files"])
    assert capsys.readouterr().out.startswith(f"wrote 1 files to {tmp_path}: 2 good records, 0 bad items")


def test_module_uses_the_standard_library_only():
    tree = ast.parse(Path(sample_data.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert imported - {"spark_jobs", "__future__"} <= set(sys.stdlib_module_names)


def test_generated_sizes_are_counted_as_claimed(landing):
    """EXTRA_GOOD above is what the special files hold."""
    _, manifest = landing
    counted = Counter()
    for path in manifest.files_written:
        counted[path.suffix] += len(_reference_read(path)[0])
    assert sum(counted.values()) == len(manifest.good_event_ids)
