"""Deterministic CloudTrail sample input: a landing folder like S3 deliveries, plus broken files.

A fresh clone has no data, so the project writes its own: realistic CloudTrail log files generated
from a seed, used by the README demo, the tests and the benchmark. The same seed gives byte-identical
files. Beside the healthy deliveries it writes one file per kind of damage the pipeline must
quarantine, and a :class:`SampleManifest` says exactly which events must land in the table and what
must land in quarantine.

Layout of the healthy files, as CloudTrail delivers them to S3::

    <out>/AWSLogs/<account>/CloudTrail/<region>/YYYY/MM/DD/
        <account>_CloudTrail_<region>_<YYYYMMDDTHHMMZ>_<16 letters and digits>.json.gz

The special files (exports, JSON lines, damaged files) use the same folders and names, with their
own extension. This module uses the standard library only (no pyspark).

Usage::

    python -m tools.sample_data --out landing/cloudtrail [--files 24] [--records-per-file 50] \\
        [--seed 7] [--no-bad-files]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import string
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Sequence

from spark_jobs.transforms.cloudtrail import reasons

# ---- Public API ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BadItem:
    """One thing the pipeline must put in quarantine.

    :param path: the file it is in.
    :param reason: a code from :mod:`spark_jobs.transforms.cloudtrail.reasons`.
    :param record_index: ``None`` for a problem of the whole file, else the 0-based position of the
        record in the file (for JSON lines: the position among the non-blank lines).
    :param good_records_in_file: how many good records of the same file must still be kept.
    """

    path: Path
    reason: str
    record_index: int | None
    good_records_in_file: int


@dataclass(frozen=True)
class SampleManifest:
    """What :func:`write_sample_landing` wrote and what the pipeline must make of it.

    :param good_event_ids: the eventIDs of every record that must land in the table, each exactly
        once (they are unique).
    :param bad: what must land in quarantine.
    :param files_written: every file the pipeline should read (absolute paths, in writing order).
    :param ignored_files: temporary and hidden files the pipeline must not read.
    """

    good_event_ids: tuple[str, ...]
    bad: tuple[BadItem, ...]
    files_written: tuple[Path, ...]
    ignored_files: tuple[Path, ...]

    def bad_counts(self) -> dict[str, int]:
        """How many bad items there are of each reason, by reason code."""
        return dict(sorted(Counter(item.reason for item in self.bad).items()))


DEFAULT_START = datetime(2024, 3, 1, tzinfo=UTC)
ACCOUNTS = ("111122223333", "444455556666")
REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-2")
# (account, region) pairs the healthy files cycle through: 2 accounts, 3 regions.
DELIVERY_TARGETS = (
    (ACCOUNTS[0], REGIONS[0]), (ACCOUNTS[1], REGIONS[1]), (ACCOUNTS[0], REGIONS[2]),
    (ACCOUNTS[1], REGIONS[0]), (ACCOUNTS[0], REGIONS[1]),
)
SPAN = timedelta(days=3)  # event times of a landing folder spread over this long
FILE_WINDOW = timedelta(minutes=5)  # the records of one file fall within its 5 minutes
SPECIAL_FILE_RECORDS = 10  # records in each special file (exports, files with a bad record)


def write_sample_landing(
    out_dir: str | os.PathLike,
    *,
    files: int = 24,
    records_per_file: int = 50,
    seed: int = 7,
    start: datetime = DEFAULT_START,
    include_bad_files: bool = True,
) -> SampleManifest:
    """Write a landing folder of CloudTrail log files and say what the pipeline must make of it.

    Files are written atomically (a hidden temporary file in the same folder, then
    :func:`os.replace`). Files already in ``out_dir`` are left alone, so give an empty folder for a
    manifest that describes the whole folder.

    :param out_dir: the landing folder; created if missing.
    :param files: how many healthy ``.json.gz`` deliveries to write.
    :param records_per_file: events in each healthy delivery.
    :param seed: the seed of every random choice; the same seed writes byte-identical files.
    :param start: no event is older; rounded up to a 5-minute boundary (UTC). Events spread over
        the three days from it.
    :param include_bad_files: also write the special files: an array export, a JSON-lines file,
        damaged files, files with bad records, and hidden/temporary files to be ignored.
    :returns: the manifest of what was written.
    :raises ValueError: for a negative ``files``, ``records_per_file`` below 1 or a naive ``start``.
    """
    if files < 0 or records_per_file < 1:
        raise ValueError(f"need files >= 0 and records_per_file >= 1, got {files} and {records_per_file}")
    writer = _LandingWriter(Path(out_dir).resolve(), random.Random(seed), _ceil_to_window(start))
    for index in range(files):
        _write_delivery(writer, index, files, records_per_file)
    if include_bad_files:
        for write_special in _SPECIAL_FILES:
            write_special(writer)
    return writer.manifest()


def generate_records(rng: random.Random, count: int, start: datetime) -> list[dict]:
    """Realistic CloudTrail records of one account and region, both picked with ``rng``.

    :param rng: the source of every random choice (eventIDs included), so a seeded ``rng`` gives
        the same records every time.
    :param count: how many records.
    :param start: the earliest event time (rounded up to a whole second); the records fall within
        the five minutes from it, in ascending order.
    :returns: dicts as they appear in the ``Records`` array of a CloudTrail log file.
    """
    account, region = rng.choice(DELIVERY_TARGETS)
    return _records_for(rng, count, _as_utc(start), account, region)


def main(argv: Sequence[str] | None = None, prog: str = "python -m tools.sample_data") -> int:
    """Command line (also ``python -m spark_jobs sample-data``): write a sample landing folder and print one summary line.

    :param argv: the arguments (without the program name); ``sys.argv[1:]`` when ``None``.
    :param prog: the program's name in usage lines.
    :returns: the exit status, 0.
    """
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="the landing folder to write into")
    parser.add_argument("--files", type=int, default=24, help="healthy .json.gz deliveries (default 24)")
    parser.add_argument("--records-per-file", type=int, default=50, help="events per delivery (default 50)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--no-bad-files", action="store_true", help="write healthy deliveries only")
    args = parser.parse_args(argv)
    manifest = write_sample_landing(args.out, files=args.files, records_per_file=args.records_per_file,
                                    seed=args.seed, include_bad_files=not args.no_bad_files)
    print(summary_line(manifest, args.out))
    return 0


def summary_line(manifest: SampleManifest, out_dir: str | os.PathLike) -> str:
    """One line for people: files written, good records, bad items by reason, ignored files."""
    by_reason = ", ".join(f"{reason}={n}" for reason, n in manifest.bad_counts().items())
    return (f"wrote {len(manifest.files_written)} files to {out_dir}: "
            f"{len(manifest.good_event_ids)} good records, {len(manifest.bad)} bad items"
            f"{f' ({by_reason})' if by_reason else ''}, {len(manifest.ignored_files)} ignored files")


# ---- Times, names and atomic writes --------------------------------------------------------------


def _as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"start must be timezone-aware (e.g. tzinfo=UTC), got {moment!r}")
    return moment.astimezone(UTC)


def _ceil_to_window(moment: datetime) -> datetime:
    """``moment`` in UTC, rounded up to the next 5-minute boundary (unchanged if on one)."""
    moment = _as_utc(moment)
    floor = moment.replace(minute=moment.minute - moment.minute % 5, second=0, microsecond=0)
    return floor if floor == moment else floor + FILE_WINDOW


def _ceil_to_second(moment: datetime) -> datetime:
    return moment if not moment.microsecond else moment.replace(microsecond=0) + timedelta(seconds=1)


def _event_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _random_token(rng: random.Random, length: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choices(alphabet, k=length))


def _random_uuid(rng: random.Random) -> str:
    """A uuid4-format string drawn from ``rng`` (deterministic for a seeded ``rng``)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _gzip(text: str | bytes) -> bytes:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return gzip.compress(data, mtime=0)  # mtime=0: same input, same bytes


def _records_document(records: list[Any]) -> str:
    """A log file's text as CloudTrail writes it: ``{"Records":[...]}`` on one line."""
    return _compact({"Records": records})


@dataclass(frozen=True)
class _Delivery:
    """Where one file goes: its account, region and 5-minute window."""

    account: str
    region: str
    stamp: datetime

    def path(self, root: Path, token: str, extension: str) -> Path:
        folder = (root / "AWSLogs" / self.account / "CloudTrail" / self.region
                  / f"{self.stamp:%Y}" / f"{self.stamp:%m}" / f"{self.stamp:%d}")
        return folder / f"{self.account}_CloudTrail_{self.region}_{self.stamp:%Y%m%dT%H%MZ}_{token}{extension}"


class _LandingWriter:
    """Writes files under one root and collects the manifest."""

    def __init__(self, root: Path, rng: random.Random, base: datetime):
        self.root, self.rng, self.base = root, rng, base
        self.slots = SPAN // FILE_WINDOW
        self.good_ids: list[str] = []
        self.bad: list[BadItem] = []
        self.written: list[Path] = []
        self.ignored: list[Path] = []

    def delivery_at(self, slot: int, target: tuple[str, str]) -> _Delivery:
        return _Delivery(target[0], target[1], self.base + slot * FILE_WINDOW)

    def random_delivery(self) -> _Delivery:
        return self.delivery_at(self.rng.randrange(self.slots), self.rng.choice(DELIVERY_TARGETS))

    def records(self, delivery: _Delivery, count: int) -> list[dict]:
        return _records_for(self.rng, count, delivery.stamp, delivery.account, delivery.region)

    def new_path(self, delivery: _Delivery, extension: str) -> Path:
        return delivery.path(self.root, _random_token(self.rng, 16), extension)

    def write(self, path: Path, data: bytes, *, ignored: bool = False) -> Path:
        """Write ``data`` atomically and list the file as to be read (or, if ``ignored``, not)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.writing")
        temporary.write_bytes(data)
        os.replace(temporary, path)
        (self.ignored if ignored else self.written).append(path)
        return path

    def keep(self, records: list[Any], *, except_indexes: Sequence[int] = ()) -> int:
        """Declare ``records`` good, except those at ``except_indexes``; returns how many are good."""
        good = [r["eventID"] for i, r in enumerate(records) if i not in except_indexes]
        self.good_ids.extend(good)
        return len(good)

    def quarantine(self, path: Path, reason: str, record_index: int | None = None, good_in_file: int = 0) -> None:
        assert reason in reasons.ALL, reason
        self.bad.append(BadItem(path, reason, record_index, good_in_file))

    def manifest(self) -> SampleManifest:
        if len(set(self.good_ids)) != len(self.good_ids):
            raise AssertionError("duplicate eventIDs among good records")
        return SampleManifest(tuple(self.good_ids), tuple(self.bad), tuple(self.written), tuple(self.ignored))


def _write_delivery(writer: _LandingWriter, index: int, files: int, records_per_file: int) -> None:
    """Healthy file ``index`` of ``files``: a gzipped ``{"Records":[...]}`` in its share of the span."""
    width = max(1, writer.slots // files)
    slot = (index * writer.slots) // files + writer.rng.randrange(width)
    delivery = writer.delivery_at(slot, DELIVERY_TARGETS[index % len(DELIVERY_TARGETS)])
    records = writer.records(delivery, records_per_file)
    writer.write(writer.new_path(delivery, ".json.gz"), _gzip(_records_document(records)))
    writer.keep(records)


# ---- Special files -------------------------------------------------------------------------------


def _write_array_export(writer: _LandingWriter) -> None:
    """A pretty-printed JSON array of events, as exports write it; all good."""
    delivery = writer.random_delivery()
    records = writer.records(delivery, SPECIAL_FILE_RECORDS)
    writer.write(writer.new_path(delivery, ".json"), (json.dumps(records, indent=2) + "\n").encode())
    writer.keep(records)


def _write_json_lines(writer: _LandingWriter) -> None:
    """One event per line; one line is cut short (invalid JSON) and a blank line precedes it."""
    delivery = writer.random_delivery()
    records = writer.records(delivery, SPECIAL_FILE_RECORDS)
    lines = [_compact(r) for r in records]
    bad_index = writer.rng.randrange(2, len(lines))
    broken = _compact(writer.records(delivery, 1)[0])
    lines.insert(bad_index, broken[: len(broken) // 2])
    lines.insert(1, "")  # blank lines do not count as records
    path = writer.write(writer.new_path(delivery, ".jsonl"), ("\n".join(lines) + "\n").encode())
    writer.quarantine(path, reasons.INVALID_JSON, bad_index, writer.keep(records))


def _write_truncated_gzip(writer: _LandingWriter) -> None:
    """A gzip stream cut short, whose readable text ends inside the first record."""
    delivery = writer.random_delivery()
    records = writer.records(delivery, 4)
    opening = '{"Records":['
    text = _records_document(records)
    prefix = text[: len(opening) + len(_compact(records[0])) // 2]
    compressed = _gzip(prefix)
    path = writer.write(writer.new_path(delivery, ".json.gz"), compressed[: len(compressed) - 12])
    writer.quarantine(path, reasons.UNREADABLE_FILE)


def _write_invalid_json(writer: _LandingWriter) -> None:
    """A gzipped Records file with a syntax error (a missing comma) inside its first record.

    The error comes before any complete record, so no record is good whether or not the pipeline
    keeps the records that precede a syntax error.
    """
    delivery = writer.random_delivery()
    records = writer.records(delivery, 4)
    first = _compact(records[0])
    assert ',"eventID":' in first
    first = first.replace(',"eventID":', ' "eventID":', 1)
    text = '{"Records":[' + ",".join([first] + [_compact(r) for r in records[1:]]) + "]}"
    path = writer.write(writer.new_path(delivery, ".json.gz"), _gzip(text))
    writer.quarantine(path, reasons.INVALID_JSON)


def _write_no_records(writer: _LandingWriter) -> None:
    """Valid JSON without a ``Records`` array."""
    path = writer.write(writer.new_path(writer.random_delivery(), ".json.gz"), _gzip('{"foo":[]}'))
    writer.quarantine(path, reasons.NO_RECORDS)


def _write_empty_file(writer: _LandingWriter) -> None:
    """A file of nothing but white space (quarantined), and one of zero bytes.

    Spark's file source lists a zero-byte file (its source log records it) but plans no read of it,
    so it gives no row: it holds nothing to lose, and the manifest lists it with the ignored files.
    """
    path = writer.write(writer.new_path(writer.random_delivery(), ".json"), b"\n  \n")
    writer.quarantine(path, reasons.EMPTY_FILE)
    writer.write(writer.new_path(writer.random_delivery(), ".json"), b"", ignored=True)


def _write_with_bad_records(
    writer: _LandingWriter, damage: Sequence[tuple[str, Callable[[dict], Any]]]
) -> None:
    """A gzipped Records file in which the record at a random index is damaged per ``damage`` entry.

    :param damage: (reason, function taking the record and returning what replaces it) pairs.
    """
    delivery = writer.random_delivery()
    records: list[Any] = writer.records(delivery, SPECIAL_FILE_RECORDS)
    indexes = writer.rng.sample(range(len(records)), len(damage))
    good = writer.keep(records, except_indexes=indexes)
    for index, (_, spoil) in zip(indexes, damage):
        records[index] = spoil(records[index])
    path = writer.write(writer.new_path(delivery, ".json.gz"), _gzip(_records_document(records)))
    for index, (reason, _) in sorted(zip(indexes, damage)):
        writer.quarantine(path, reason, index, good)


def _without(key: str) -> Callable[[dict], dict]:
    return lambda record: {k: v for k, v in record.items() if k != key}


def _write_bad_event_time(writer: _LandingWriter) -> None:
    _write_with_bad_records(writer, [(reasons.BAD_EVENT_TIME, lambda r: {**r, "eventTime": "not-a-time"})])


def _write_missing_fields(writer: _LandingWriter) -> None:
    _write_with_bad_records(writer, [(reasons.MISSING_EVENT_TIME, _without("eventTime")),
                                     (reasons.MISSING_EVENT_ID, _without("eventID"))])


def _write_not_an_object(writer: _LandingWriter) -> None:
    _write_with_bad_records(writer, [(reasons.NOT_AN_OBJECT, lambda r: 42)])


_INVALID_UTF8_MARKER = "@@invalid-utf8@@"


def _write_invalid_utf8(writer: _LandingWriter) -> None:
    """A plain ``.json`` Records file; one record's userAgent holds the bytes ``ff fe``."""
    delivery = writer.random_delivery()
    records = writer.records(delivery, SPECIAL_FILE_RECORDS)
    index = writer.rng.randrange(len(records))
    good = writer.keep(records, except_indexes=[index])
    records[index] = {**records[index], "userAgent": f"aws-cli/2.15.30 {_INVALID_UTF8_MARKER} Python/3.11.8"}
    data = _records_document(records).encode()
    assert data.count(_INVALID_UTF8_MARKER.encode()) == 1
    data = data.replace(_INVALID_UTF8_MARKER.encode(), b"\xff\xfe")
    path = writer.write(writer.new_path(delivery, ".json"), data)
    writer.quarantine(path, reasons.INVALID_UTF8, index, good)


def _write_ignored_files(writer: _LandingWriter) -> None:
    """Complete, valid files the pipeline must skip: a hidden ``.<name>`` and a ``<name>.tmp``."""
    for hide in (lambda p: p.with_name("." + p.name), lambda p: p.with_name(p.name + ".tmp")):
        delivery = writer.random_delivery()
        records = writer.records(delivery, 5)
        writer.write(hide(writer.new_path(delivery, ".json.gz")), _gzip(_records_document(records)), ignored=True)


_SPECIAL_FILES: tuple[Callable[[_LandingWriter], None], ...] = (
    _write_array_export, _write_json_lines, _write_truncated_gzip, _write_invalid_json,
    _write_no_records, _write_empty_file, _write_bad_event_time, _write_missing_fields,
    _write_invalid_utf8, _write_not_an_object, _write_ignored_files,
)


# ---- Records -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Caller:
    """Who made a call: the userIdentity block and what goes with it."""

    identity: dict
    arn: str
    service: str | None = None  # set for AWSService callers: the service host


@dataclass(frozen=True)
class _Call:
    """What a payload builder may use."""

    rng: random.Random
    account: str
    region: str
    time: datetime
    request_id: str
    caller: _Caller


@dataclass(frozen=True)
class _Payload:
    request: dict | None
    response: dict | None = None
    resources: list[dict] | None = None
    additional: dict | None = None
    host: str | None = None  # the HTTP Host header, when not <service>.<region>.amazonaws.com


@dataclass(frozen=True)
class _EventSpec:
    """One kind of API call."""

    source: str
    name: str
    read_only: bool
    weight: int
    build: Callable[[_Call], _Payload]
    service_callers: tuple[str, ...] = ()  # AWS services that make this call themselves
    global_service: bool = False  # logged in us-east-1 whatever the caller's region
    data_event: bool = False  # an S3 object-level (data) event, not a management event


_USERS = ("alice", "bob", "ci-deployer")
_ROLES = ("AdminRole", "DataPipelineRole", "ReadOnlyRole", "OrganizationAccountAccessRole")
_USER_AGENTS = (
    "aws-cli/2.15.30 Python/3.11.8 Linux/6.1.79-99.164.amzn2023.x86_64 exe/x86_64.amzn.2023 prompt/off",
    "Boto3/1.34.69 md/Botocore#1.34.69 ua/2.0 os/linux#5.10.210-201.852.amzn2.x86_64 md/arch#x86_64 "
    "lang/python#3.11.6 md/pyimpl#CPython cfg/retry-mode#legacy Botocore/1.34.69",
    "aws-sdk-java/1.12.600 Linux/5.10.205-195.807.amzn2.x86_64 OpenJDK_64-Bit_Server_VM/17.0.9+8-LTS "
    "java/17.0.9 vendor/Amazon.com_Inc. cfg/retry-mode/standard",
    "APN/1.0 HashiCorp/1.0 Terraform/1.7.4 (+https://www.terraform.io) terraform-provider-aws/5.40.0 "
    "(+https://registry.terraform.io/providers/hashicorp/aws) aws-sdk-go-v2/1.25.2 os/linux lang/go#1.22.0",
    "console.amazonaws.com",
    "AWS Internal",
)
_TLS = (("TLSv1.3", "TLS_AES_128_GCM_SHA256"), ("TLSv1.3", "TLS_AES_256_GCM_SHA384"),
        ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"))
_INSTANCE_TYPES = ("t3.micro", "t3.large", "m5.xlarge", "c6g.2xlarge")
_TABLES = ("orders", "customers", "sessions")
_UNKNOWN_KEY_RATE = 0.05  # records with a top-level key the schema does not know
_ERROR_RATE = 0.10


def _stable_token(length: int, *parts: str) -> str:
    """Upper-case letters and digits derived from ``parts``: the same user has the same id."""
    digest = hashlib.sha256("|".join(parts).encode()).digest()
    alphabet = string.ascii_uppercase + "234567"
    return "".join(alphabet[b % len(alphabet)] for b in digest)[:length]


def _stable_uuid(*parts: str) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256("|".join(parts).encode()).digest()[:16], version=4))


def _aws_date(moment: datetime) -> str:
    """Dates as IAM and STS responses write them: ``Mar 1, 2024, 10:03:12 AM``."""
    hour = moment.hour % 12 or 12
    return f"{moment:%b} {moment.day}, {moment.year}, {hour}:{moment:%M:%S} {'AM' if moment.hour < 12 else 'PM'}"


def _int_or_text(rng: random.Random, value: int) -> int | str:
    """``value`` as a number in some records and as text in others, as real events differ."""
    return value if rng.random() < 0.5 else str(value)


def _instance_id(rng: random.Random) -> str:
    return "i-" + _random_token(rng, 17, "0123456789abcdef")


def _bucket(call: _Call) -> str:
    return f"acme-{call.rng.choice(('data', 'logs', 'exports'))}-{call.account[-4:]}"


def _role_arn(account: str, role: str) -> str:
    return f"arn:aws:iam::{account}:role/{role}"


def _kms_key_arn(call: _Call) -> str:
    return f"arn:aws:kms:{call.region}:{call.account}:key/{_stable_uuid(call.account, call.region, 'kms')}"


def _resource(call: _Call, kind: str, arn: str) -> dict:
    return {"accountId": call.account, "type": kind, "ARN": arn}


def _describe_instances(call: _Call) -> _Payload:
    rng = call.rng
    items = {"items": [{"instanceId": _instance_id(rng)}]} if rng.random() < 0.5 else {}
    return _Payload({"instancesSet": items, "filterSet": {}, "maxResults": _int_or_text(rng, 1000)})


def _describe_security_groups(call: _Call) -> _Payload:
    group = "sg-" + _random_token(call.rng, 17, "0123456789abcdef")
    return _Payload({"securityGroupSet": {}, "securityGroupIdSet": {"items": [{"groupId": group}]},
                     "filterSet": {}})


def _run_instances(call: _Call) -> _Payload:
    rng = call.rng
    image = "ami-" + _random_token(rng, 17, "0123456789abcdef")
    kind = rng.choice(_INSTANCE_TYPES)
    request = {
        "instancesSet": {"items": [{"imageId": image, "minCount": 1, "maxCount": 1}]},
        "instanceType": kind if rng.random() < 0.7 else {"value": "m1.small"},
        "blockDeviceMapping": {}, "monitoring": {"enabled": False}, "disableApiTermination": False,
        "disableApiStop": False, "clientToken": _random_uuid(rng),
    }
    instance = {"instanceId": _instance_id(rng), "imageId": image, "instanceType": kind,
                "instanceState": {"code": 0, "name": "pending"},
                "launchTime": int(call.time.timestamp() * 1000),
                "placement": {"availabilityZone": call.region + "a", "tenancy": "default"}}
    response = {"requestId": call.request_id, "reservationId": "r-" + _random_token(rng, 17, "0123456789abcdef"),
                "ownerId": call.account, "groupSet": {}, "instancesSet": {"items": [instance]}}
    return _Payload(request, response)


def _s3_additional(call: _Call, bytes_out: int | float) -> dict:
    return {"SignatureVersion": "SigV4", "CipherSuite": "TLS_AES_128_GCM_SHA256", "bytesTransferredIn": 0,
            "AuthenticationMethod": "AuthHeader", "x-amz-id-2": _random_token(call.rng, 56) + "=",
            "bytesTransferredOut": bytes_out}


def _list_buckets(call: _Call) -> _Payload:
    return _Payload({"Host": "s3.amazonaws.com"}, None, None,
                    _s3_additional(call, call.rng.randint(400, 9000)), host="s3.amazonaws.com")


def _get_object(call: _Call) -> _Payload:
    rng = call.rng
    bucket = _bucket(call)
    key = f"raw/{rng.choice(_TABLES)}/{call.time:%Y/%m/%d}/part-{rng.randrange(10000):05d}.parquet"
    host = f"{bucket}.s3.{call.region}.amazonaws.com"
    size = rng.randint(1_000, 5_000_000)
    resources = [{"type": "AWS::S3::Object", "ARN": f"arn:aws:s3:::{bucket}/{key}"},
                 _resource(call, "AWS::S3::Bucket", f"arn:aws:s3:::{bucket}")]
    additional = _s3_additional(call, float(size) if rng.random() < 0.3 else size)
    return _Payload({"bucketName": bucket, "Host": host, "key": key}, None, resources, additional, host=host)


def _list_users(call: _Call) -> _Payload:
    return _Payload({"maxItems": _int_or_text(call.rng, 100)} if call.rng.random() < 0.5 else None,
                    host="iam.amazonaws.com")


def _create_user(call: _Call) -> _Payload:
    name = f"svc-{call.rng.choice(_TABLES)}-{call.rng.randrange(100)}"
    request = {"userName": name}
    if call.rng.random() < 0.5:
        request["tags"] = [{"key": "team", "value": "data-platform"}]
    user = {"path": "/", "userName": name, "userId": "AIDA" + _stable_token(17, call.account, name),
            "arn": f"arn:aws:iam::{call.account}:user/{name}", "createDate": _aws_date(call.time)}
    return _Payload(request, {"user": user}, host="iam.amazonaws.com")


def _assume_role(call: _Call) -> _Payload:
    rng = call.rng
    role = rng.choice(_ROLES)
    session = f"session-{rng.randrange(10**9)}"
    role_id = "AROA" + _stable_token(17, call.account, role)
    request = {"roleArn": _role_arn(call.account, role), "roleSessionName": session,
               "durationSeconds": _int_or_text(rng, 3600)}
    response = {
        "credentials": {"accessKeyId": "ASIA" + _random_token(rng, 16, string.ascii_uppercase + string.digits),
                        "sessionToken": "IQoJb3JpZ2luX2VjE" + _random_token(rng, 40),
                        "expiration": _aws_date(call.time + timedelta(hours=1))},
        "assumedRoleUser": {"assumedRoleId": f"{role_id}:{session}",
                            "arn": f"arn:aws:sts::{call.account}:assumed-role/{role}/{session}"},
    }
    resources = [_resource(call, "AWS::IAM::Role", _role_arn(call.account, role))]
    return _Payload(request, response, resources)


def _get_caller_identity(call: _Call) -> _Payload:
    return _Payload(None)


def _kms_decrypt(call: _Call) -> _Payload:
    request = {"encryptionAlgorithm": "SYMMETRIC_DEFAULT"}
    if call.rng.random() < 0.6:
        request["encryptionContext"] = {"aws:s3:arn": f"arn:aws:s3:::{_bucket(call)}/raw/orders"}
    return _Payload(request, None, [_resource(call, "AWS::KMS::Key", _kms_key_arn(call))])


def _kms_generate_data_key(call: _Call) -> _Payload:
    key = _kms_key_arn(call)
    request = {"keyId": key, "keySpec": "AES_256"} if call.rng.random() < 0.6 else {
        "keyId": "alias/aws/s3", "numberOfBytes": _int_or_text(call.rng, 32)}
    return _Payload(request, None, [_resource(call, "AWS::KMS::Key", key)])


def _list_functions(call: _Call) -> _Payload:
    return _Payload({"maxItems": _int_or_text(call.rng, 50)} if call.rng.random() < 0.5 else None)


def _describe_table(call: _Call) -> _Payload:
    table = call.rng.choice(_TABLES)
    arn = f"arn:aws:dynamodb:{call.region}:{call.account}:table/{table}"
    return _Payload({"tableName": table}, None, [_resource(call, "AWS::DynamoDB::Table", arn)])


def _create_log_stream(call: _Call) -> _Payload:
    stream = f"{call.time:%Y/%m/%d}/[$LATEST]{_random_token(call.rng, 32, '0123456789abcdef')}"
    return _Payload({"logGroupName": f"/aws/lambda/ingest-{call.rng.choice(_TABLES)}", "logStreamName": stream})


def _get_parameter(call: _Call) -> _Payload:
    decrypt = True if call.rng.random() < 0.5 else "true"
    return _Payload({"name": f"/prod/{call.rng.choice(_TABLES)}/db-password", "withDecryption": decrypt})


def _get_secret_value(call: _Call) -> _Payload:
    return _Payload({"secretId": f"prod/{call.rng.choice(_TABLES)}/api-key"})


def _describe_alarms(call: _Call) -> _Payload:
    if call.rng.random() < 0.5:
        return _Payload({"maxRecords": _int_or_text(call.rng, 100)})
    return _Payload({"alarmNames": [f"{call.rng.choice(_TABLES)}-lag-high"]})


_EVENTS = (
    _EventSpec("ec2.amazonaws.com", "DescribeInstances", True, 14, _describe_instances),
    _EventSpec("ec2.amazonaws.com", "DescribeSecurityGroups", True, 6, _describe_security_groups),
    _EventSpec("ec2.amazonaws.com", "RunInstances", False, 3, _run_instances),
    _EventSpec("s3.amazonaws.com", "ListBuckets", True, 5, _list_buckets),
    _EventSpec("s3.amazonaws.com", "GetObject", True, 10, _get_object, data_event=True),
    _EventSpec("iam.amazonaws.com", "ListUsers", True, 4, _list_users, global_service=True),
    _EventSpec("iam.amazonaws.com", "CreateUser", False, 2, _create_user, global_service=True),
    _EventSpec("sts.amazonaws.com", "AssumeRole", False, 10, _assume_role,
               service_callers=("lambda.amazonaws.com", "ecs-tasks.amazonaws.com")),
    _EventSpec("sts.amazonaws.com", "GetCallerIdentity", True, 5, _get_caller_identity),
    _EventSpec("kms.amazonaws.com", "Decrypt", True, 9, _kms_decrypt,
               service_callers=("s3.amazonaws.com", "secretsmanager.amazonaws.com")),
    _EventSpec("kms.amazonaws.com", "GenerateDataKey", True, 5, _kms_generate_data_key,
               service_callers=("s3.amazonaws.com",)),
    _EventSpec("lambda.amazonaws.com", "ListFunctions20150331", True, 3, _list_functions),
    _EventSpec("dynamodb.amazonaws.com", "DescribeTable", True, 4, _describe_table),
    _EventSpec("logs.amazonaws.com", "CreateLogStream", False, 5, _create_log_stream),
    _EventSpec("ssm.amazonaws.com", "GetParameter", True, 4, _get_parameter),
    _EventSpec("secretsmanager.amazonaws.com", "GetSecretValue", True, 3, _get_secret_value),
    _EventSpec("monitoring.amazonaws.com", "DescribeAlarms", True, 3, _describe_alarms),
)
_EVENT_WEIGHTS = tuple(spec.weight for spec in _EVENTS)


def _iam_user(rng: random.Random, account: str) -> _Caller:
    name = rng.choice(_USERS)
    arn = f"arn:aws:iam::{account}:user/{name}"
    return _Caller({"type": "IAMUser", "principalId": "AIDA" + _stable_token(17, account, name), "arn": arn,
                    "accountId": account, "accessKeyId": "AKIA" + _stable_token(16, account, name, "key"),
                    "userName": name}, arn)


def _assumed_role(rng: random.Random, account: str, time: datetime) -> _Caller:
    role = rng.choice(_ROLES)
    session = rng.choice((f"{rng.choice(_USERS)}@example.com", f"botocore-session-{rng.randrange(10**10)}"))
    role_id = "AROA" + _stable_token(17, account, role)
    arn = f"arn:aws:sts::{account}:assumed-role/{role}/{session}"
    issued = time - timedelta(seconds=rng.randint(5, 3500))
    issuer = {"type": "Role", "principalId": role_id, "arn": _role_arn(account, role), "accountId": account,
              "userName": role}
    return _Caller({"type": "AssumedRole", "principalId": f"{role_id}:{session}", "arn": arn,
                    "accountId": account,
                    "accessKeyId": "ASIA" + _random_token(rng, 16, string.ascii_uppercase + string.digits),
                    "sessionContext": {"sessionIssuer": issuer, "webIdFederationData": {},
                                       "attributes": {"creationDate": _event_time(issued),
                                                      "mfaAuthenticated": "false"}}}, arn)


def _root(rng: random.Random, account: str) -> _Caller:
    arn = f"arn:aws:iam::{account}:root"
    return _Caller({"type": "Root", "principalId": account, "arn": arn, "accountId": account,
                    "accessKeyId": "ASIA" + _random_token(rng, 16, string.ascii_uppercase + string.digits)}, arn)


def _caller(rng: random.Random, spec: _EventSpec, account: str, time: datetime) -> _Caller:
    """Who called: an AWS service for some calls services make, else mostly roles, some users, rarely root."""
    if spec.service_callers and rng.random() < 0.4:
        service = rng.choice(spec.service_callers)
        return _Caller({"type": "AWSService", "invokedBy": service}, service, service)
    draw = rng.random()
    if draw < 0.65:
        return _assumed_role(rng, account, time)
    if draw < 0.96:
        return _iam_user(rng, account)
    return _root(rng, account)


def _error(call: _Call, spec: _EventSpec) -> tuple[str, str]:
    """An errorCode and errorMessage as the service would write them."""
    rng = call.rng
    if spec.source == "ec2.amazonaws.com":
        return rng.choice((("Client.UnauthorizedOperation", "You are not authorized to perform this operation."),
                           ("Client.RequestLimitExceeded", "Request limit exceeded.")))
    if spec.source == "s3.amazonaws.com":
        return "AccessDenied", "Access Denied"
    if rng.random() < 0.3:
        return "ThrottlingException", "Rate exceeded"
    action = f"{spec.source.split('.')[0]}:{spec.name}"
    return "AccessDenied", (f"User: {call.caller.arn} is not authorized to perform: {action} "
                            f"because no identity-based policy allows the {action} action")


def _request_id(rng: random.Random, spec: _EventSpec) -> str:
    if spec.source == "s3.amazonaws.com":
        return _random_token(rng, 16, string.ascii_uppercase + string.digits)
    return _random_uuid(rng)


def _unknown_key(rng: random.Random, call: _Call) -> tuple[str, dict]:
    """A top-level key the pipeline's CloudTrail schema does not know (goes to rescued data)."""
    if rng.random() < 0.5:
        return "eventContext", {"requestSource": rng.choice(("console", "cli", "sdk")),
                                "clientRegion": call.region}
    return "sourceRequestContext", {"originalRequestID": call.request_id, "hops": rng.randint(1, 3)}


def _record(rng: random.Random, account: str, region: str, time: datetime) -> dict:
    """One CloudTrail record; keys in the order CloudTrail writes them."""
    spec = rng.choices(_EVENTS, weights=_EVENT_WEIGHTS)[0]
    event_region = "us-east-1" if spec.global_service else region
    caller = _caller(rng, spec, account, time)
    call = _Call(rng, account, event_region, time, _request_id(rng, spec), caller)
    payload = spec.build(call)
    error = _error(call, spec) if caller.service is None and rng.random() < _ERROR_RATE else None
    record: dict[str, Any] = {
        "eventVersion": "1.09" if rng.random() < 0.4 else "1.08",
        "userIdentity": caller.identity,
        "eventTime": _event_time(time),
        "eventSource": spec.source,
        "eventName": spec.name,
        "awsRegion": event_region,
        "sourceIPAddress": caller.service or _source_ip(rng),
        "userAgent": caller.service or rng.choice(_USER_AGENTS),
    }
    if error:
        record["errorCode"], record["errorMessage"] = error
    record["requestParameters"] = payload.request
    record["responseElements"] = None if error else payload.response
    if payload.additional is not None:
        record["additionalEventData"] = payload.additional
    record.update(requestID=call.request_id, eventID=_random_uuid(rng), readOnly=spec.read_only)
    if payload.resources:
        record["resources"] = payload.resources
    record.update(eventType="AwsApiCall", managementEvent=not spec.data_event, recipientAccountId=account,
                  eventCategory="Data" if spec.data_event else "Management")
    if caller.service is None and rng.random() < 0.95:
        host = payload.host or f"{spec.source.split('.')[0]}.{event_region}.amazonaws.com"
        version, cipher = rng.choice(_TLS)
        record["tlsDetails"] = {"tlsVersion": version, "cipherSuite": cipher, "clientProvidedHostHeader": host}
    if rng.random() < _UNKNOWN_KEY_RATE:
        key, value = _unknown_key(rng, call)
        record[key] = value
    return record


def _source_ip(rng: random.Random) -> str:
    if rng.random() < 0.03:
        return "AWS Internal"
    first = rng.choice((3, 18, 34, 52, 54, 81, 93, 185, 203))
    return f"{first}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randint(1, 254)}"


def _records_for(rng: random.Random, count: int, start: datetime, account: str, region: str) -> list[dict]:
    """``count`` records of one account and region, at ascending times within 5 minutes of ``start``."""
    first = _ceil_to_second(start)
    window = int(FILE_WINDOW.total_seconds())
    times = sorted(first + timedelta(seconds=rng.randrange(window)) for _ in range(count))
    return [_record(rng, account, region, time) for time in times]


if __name__ == "__main__":
    sys.exit(main())
