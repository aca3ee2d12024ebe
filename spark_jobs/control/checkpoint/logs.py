"""Spark's checkpoint logs, read without Spark.

A checkpoint folder holds::

    metadata              {"id": "<query id>"}: the stream's identity across restarts
    offsets/N             v1 / {"batchWatermarkMs", "batchTimestampMs", "conf"} / one offset line per source
                          ("-" for a source without one): written before batch N runs (the write-ahead log)
    commits/N             v1 / {"nextBatchWatermarkMs"}: written after batch N reached every sink
    sources/<i>/N         the file source's log: v1 / one {"path", "timestamp", "batchId"} line per file
    sources/<i>/N.compact every 10th batch: the whole log up to N in one file
    state/<op>/<part>/    state store versions of stateful operators (none for a stateless job)

Spark writes each file as a hidden temp file (``.N.<uuid>.tmp``) and renames it; Hadoop's local
filesystem adds a checksum ``.N.crc`` beside each file (``crc\\0``, bytes per checksum, then one CRC32
per chunk), and verifies it on every read.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass, field

from spark_jobs.control.checkpoint.store import Location

BATCH_NAME = re.compile(r"^(\d+)(\.compact)?$")
TEMP_NAME = re.compile(r"^\..+\.tmp(\.crc)?$")
CRC_NAME = re.compile(r"^\.(.+)\.crc$")
VERSION_LINE = re.compile(r"^v(\d+)$")
MAX_OFFSETS_VERSION = 1
MAX_COMMITS_VERSION = 2


class LogDamage(Exception):
    """A log file Spark cannot read; the message says what is wrong with it."""


@dataclass
class LogDir:
    """The files of one log folder.

    :param location: the folder.
    :param batches: batch id -> file name (``N`` or ``N.compact``).
    :param temp_files: left-over temp files of interrupted writes (and their checksums).
    :param orphan_crcs: checksum files whose file is gone.
    :param crcs: file name -> its checksum file's name.
    """

    location: Location
    batches: dict[int, str] = field(default_factory=dict)
    temp_files: list[str] = field(default_factory=list)
    orphan_crcs: list[str] = field(default_factory=list)
    crcs: dict[str, str] = field(default_factory=dict)

    @property
    def latest(self) -> int | None:
        return max(self.batches) if self.batches else None

    def file(self, batch: int) -> Location:
        return self.location.child(self.batches[batch])

    def crc(self, batch: int) -> Location | None:
        name = self.crcs.get(self.batches[batch])
        return self.location.child(name) if name else None


def scan_log_dir(location: Location) -> LogDir:
    """List a log folder: its batch files, temp files and checksum files."""
    found = LogDir(location)
    names = location.names()
    present = set(names)
    for name in names:
        match = BATCH_NAME.match(name)
        if match:
            batch = int(match.group(1))
            # a compact file and a plain one of the same batch: the compact one is the log's
            if batch not in found.batches or match.group(2):
                found.batches[batch] = name
        elif TEMP_NAME.match(name):
            found.temp_files.append(name)
        elif CRC_NAME.match(name):
            target = CRC_NAME.match(name).group(1)
            if target in present:
                found.crcs[target] = name
            else:
                found.orphan_crcs.append(name)
    return found


def verify_crc(data: bytes, crc_file: bytes) -> bool | None:
    """Whether ``data`` matches a Hadoop checksum file; None if the checksum format is unknown."""
    if len(crc_file) < 8 or crc_file[:4] != b"crc\x00":
        return None
    (chunk,) = struct.unpack(">i", crc_file[4:8])
    if chunk <= 0:
        return None
    expected = crc_file[8:]
    if len(expected) != 4 * ((len(data) + chunk - 1) // chunk):
        return False
    actual = b"".join(struct.pack(">I", zlib.crc32(data[i:i + chunk]) & 0xFFFFFFFF)
                      for i in range(0, len(data), chunk))
    return actual == expected


def read_checked(log: LogDir, batch: int) -> bytes:
    """The bytes of a batch file, after checking them against its checksum (as Hadoop would).

    :raises LogDamage: the checksum does not match.
    """
    data = log.file(batch).read_bytes()
    crc = log.crc(batch)
    if crc is not None:
        verdict = verify_crc(data, crc.read_bytes())
        if verdict is False:
            raise LogDamage(f"its checksum file {crc.name} does not match its {len(data)} bytes "
                            "(Hadoop refuses to read it: 'Checksum error')")
    return data


def _lines(data: bytes, what: str) -> list[str]:
    if not data:
        raise LogDamage("it is empty (0 bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LogDamage(f"it is not UTF-8 text ({exc})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    match = VERSION_LINE.match(lines[0]) if lines else None
    if not match:
        raise LogDamage(f"its first line {lines[0][:40]!r} is not a version like 'v1' (Spark: 'Log file was "
                        f"malformed: failed to read correct log version')")
    return lines


@dataclass
class OffsetsEntry:
    """One ``offsets/N`` file.

    :param version: the log version (1).
    :param watermark_ms: ``batchWatermarkMs``.
    :param timestamp_ms: ``batchTimestampMs`` (when the batch was planned).
    :param conf: the SQL settings the stream keeps across restarts.
    :param sources: each source's offset as JSON (None for ``-``).
    """

    version: int
    watermark_ms: int
    timestamp_ms: int
    conf: dict
    sources: list[dict | None]


def parse_offsets(data: bytes) -> OffsetsEntry:
    """Parse ``offsets/N``.

    :raises LogDamage: it is empty, torn or not an offsets file.
    """
    lines = _lines(data, "offsets")
    version = int(VERSION_LINE.match(lines[0]).group(1))
    if version > MAX_OFFSETS_VERSION:
        raise LogDamage(f"its version v{version} is newer than this Spark reads (v{MAX_OFFSETS_VERSION})")
    if len(lines) < 2:
        raise LogDamage("it ends after its version line (Spark: 'Incomplete log file in the offset commit log')")
    try:
        metadata = json.loads(lines[1])
        if not isinstance(metadata, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise LogDamage(f"its metadata line is not complete JSON ({exc})") from None
    sources: list[dict | None] = []
    for number, line in enumerate(lines[2:]):
        if line == "-":
            sources.append(None)
            continue
        try:
            sources.append(json.loads(line))
        except ValueError as exc:
            raise LogDamage(f"the offset of source {number} is not complete JSON ({exc})") from None
    if not sources:
        raise LogDamage("it holds no source offset (it was cut after its metadata line)")
    return OffsetsEntry(version, int(metadata.get("batchWatermarkMs", 0)), int(metadata.get("batchTimestampMs", 0)),
                        dict(metadata.get("conf") or {}), sources)


def parse_commit(data: bytes) -> dict:
    """Parse ``commits/N`` into its JSON object.

    :raises LogDamage: it is empty or torn.
    """
    lines = _lines(data, "commits")
    version = int(VERSION_LINE.match(lines[0]).group(1))
    if version > MAX_COMMITS_VERSION:
        raise LogDamage(f"its version v{version} is newer than this Spark reads (v{MAX_COMMITS_VERSION})")
    if len(lines) < 2:
        raise LogDamage("it ends after its version line (Spark: 'Incomplete log file')")
    try:
        value = json.loads(lines[1])
    except ValueError as exc:
        raise LogDamage(f"its JSON line is not complete ({exc})") from None
    if not isinstance(value, dict):
        raise LogDamage("its JSON line is not an object")
    return value


def parse_source_entries(data: bytes) -> list[dict]:
    """Parse a file source log file (``N`` or ``N.compact``): one ``{"path", "timestamp", "batchId"}`` per file.

    :raises LogDamage: it is empty or torn.
    """
    lines = _lines(data, "sources")
    entries = []
    for line in lines[1:]:
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise LogDamage(f"a line is not complete JSON ({exc})") from None
        if not isinstance(entry, dict) or "path" not in entry:
            raise LogDamage(f"a line is not a file entry: {line[:80]!r}")
        entries.append(entry)
    return entries


def read_source_log(log: LogDir) -> list[dict]:
    """Every entry of a file source log: the newest compact file plus the plain files after it.

    :raises LogDamage: naming the file that cannot be read.
    """
    compacts = [batch for batch, name in log.batches.items() if name.endswith(".compact")]
    start = max(compacts) if compacts else -1
    entries: list[dict] = []
    for batch in sorted(log.batches):
        if batch < start:
            continue
        try:
            entries.extend(parse_source_entries(read_checked(log, batch)))
        except LogDamage as exc:
            raise LogDamage(f"{log.location.url}/{log.batches[batch]}: {exc}") from None
    return entries


def file_source_offset(offset: dict | None) -> int | None:
    """The ``logOffset`` of a file source's offset (``{"logOffset": 5}``); None for anything else."""
    if isinstance(offset, dict) and isinstance(offset.get("logOffset"), int):
        return offset["logOffset"]
    return None
