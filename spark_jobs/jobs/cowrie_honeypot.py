"""cowrie_honeypot: the Cowrie SSH honeypot's JSON log becomes one typed row per event; bad lines go to quarantine.

Usage::

    python -m spark_jobs run cowrie_honeypot --input landing/cowrie --trigger available-now
    spark-submit --master 'local[2]' spark_jobs/__main__.py run cowrie_honeypot --input landing/cowrie

Cowrie writes one JSON object per line to ``cowrie.json`` and rotates it daily to
``cowrie.json.YYYY-MM-DD``; the landing folder receives the rotated files (gzipped or not, one
sub-folder per sensor if several), never the live ``cowrie.json``, which is still being written.
The ``eventid`` picks the shape of a line (``cowrie.session.connect``, ``cowrie.login.failed``,
``cowrie.command.input``, ``cowrie.session.file_download``, ...), and each shape has its own keys.

Tables: ``cowrie_events``, one row per event with the fields of every shape typed (:data:`FIELDS`),
partitioned by the UTC date of its ``timestamp``; ``cowrie_quarantine``, one row per line that
could not become an event, with a reason code (:data:`REASONS`), a detail and the raw line.

**What identifies an event.** Cowrie writes no event id. An event is identified by where and when
it happened: its ``sensor`` (the honeypot), ``session`` (the connection), ``eventid`` (what
happened) and ``timestamp`` (UTC, to the microsecond, as Cowrie writes it). ``event_id`` is the
SHA-256 (hex) of the JSON array ``[sensor, session, eventid, timestamp]``, the timestamp written
back as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (so ``Z`` and ``+00:00``, or a shorter fraction, give the
same id; a missing sensor or session is ``null`` in it). A line delivered again (a file landing
again under a new name, a copy in two sensors' folders, a backfill beside the live stream) is the
same event and adds nothing, even when re-serialized with other key order or extra fields. Two
distinct events would share an id only if one session logged the same ``eventid`` twice in the same
microsecond; each event is a separate log call stamped with its own clock reading, so this is not
expected (and the first line of such a pair would win). Measured on the real log
(``../shared/data/real/applogs/kareiva_cowrie-logs``, 2 files, 4,148 non-blank lines): 4,148
distinct ids, so no two lines share one; no exact duplicate line and
no two lines equal as JSON objects; even ``timestamp`` alone is unique there. A hash of the whole
record was rejected: a shipper that adds or reorders a field would make the same event two rows.

**Why whole files (``binaryFile``) and not Spark's ``text`` source.** The job decodes each file
itself (:func:`split_file`): gzip by content (:mod:`spark_jobs.transforms.gzip_stream`: a truncated
stream keeps the lines before the damage), UTF-8 per line (one bad byte quarantines its line, not
the file), blank lines skipped, and each line's number in the file known exactly (``_line_number``,
1-based, blank lines counted, as an editor numbers them). Spark's ``text`` source would fail the
batch on a damaged gzip and knows no line numbers. The runner's stateless path reads ``binaryFile``
as it is: nothing outside this module changes for it.

**Typing.** Python's JSON reader parses each line once (a Cowrie line is flat and small); a field
lands in its typed column when its JSON type fits (:data:`FIELDS`), else, like every key no shape
declares, in ``_rescued_data`` (a JSON object of those fields), so nothing of a line is lost. Every
field of the 14 real shapes has a column: ``_rescued_data`` is NULL for all real lines.

:func:`transform` is pure: the same function runs on ``spark.read`` and ``spark.readStream`` of
Spark's ``binaryFile`` source; :data:`OUTPUTS` picks each table's columns from the rows its route
(registry: ``reason IS NULL`` for events) takes. The keys, the first delivery kept and the source-file
columns are declared in the registry (:mod:`spark_jobs.registry`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from typing import TYPE_CHECKING, Iterator

from pyspark.sql import DataFrame

from spark_jobs.model.jobs import JobSpec
from spark_jobs.transforms.gzip_stream import decompress
from spark_jobs.transforms.quarantine import event_columns, quarantine_columns

if TYPE_CHECKING:
    from spark_jobs.driver.job_contract import BatchContext

# ---- What a line's fields become ------------------------------------------------------------------
#
# name -> the Spark type of its column. A value of another JSON type goes to _rescued_data.
STRING, INT, LONG, DOUBLE, BOOLEAN, STRINGS = "string", "int", "bigint", "double", "boolean", "array<string>"
FIELDS = {
    # every shape
    "eventid": STRING, "session": STRING, "sensor": STRING, "src_ip": STRING, "message": STRING,
    "system": STRING, "isError": BOOLEAN,
    # session.connect, direct-tcpip.request / .data
    "src_port": INT, "dst_ip": STRING, "dst_port": INT, "protocol": STRING, "data": STRING,
    # login.success / .failed
    "username": STRING, "password": STRING,
    # command.input / .failed
    "input": STRING,
    # session.closed, log.open / .closed
    "duration": DOUBLE, "ttylog": STRING, "size": LONG,
    # client.version (and Cowrie 2's client.kex), client.size
    "version": STRING, "hassh": STRING, "hasshAlgorithms": STRING, "kexAlgs": STRINGS, "keyAlgs": STRINGS,
    "encCS": STRINGS, "macCS": STRINGS, "compCS": STRINGS, "langCS": STRINGS, "width": INT, "height": INT,
    # session.file_download (.failed)
    "url": STRING, "shasum": STRING, "outfile": STRING, "unique": BOOLEAN,
}
# Read separately: the event time (-> timestamp, date) and the identity (-> event_id).
TIMESTAMP = "timestamp"

# ---- Why a line is quarantined (the ``reason`` column; ``detail`` says exactly what) --------------
UNREADABLE_FILE = "unreadable_file"  # a damaged gzip stream: the line it cuts, or where it ends
FILE_GONE = "file_gone"  # listed or notified, but deleted before it could be read (line 0)
INVALID_UTF8 = "invalid_utf8"  # the line holds bytes that are not UTF-8 (raw shows them as U+FFFD)
INVALID_JSON = "invalid_json"  # not JSON (NaN and Infinity included), or nested too deeply
NOT_AN_OBJECT = "not_an_object"  # valid JSON, but not an object
DUPLICATE_KEY = "duplicate_key"  # a top-level key twice: which value is meant is unknown
MISSING_EVENTID = "missing_eventid"  # no eventid, or not a non-blank string
MISSING_TIMESTAMP = "missing_timestamp"  # no timestamp (or null)
BAD_TIMESTAMP = "bad_timestamp"  # not an ISO-8601 time with a zone, or not a real date and time
REASONS = (UNREADABLE_FILE, FILE_GONE, INVALID_UTF8, INVALID_JSON, NOT_AN_OBJECT, DUPLICATE_KEY, MISSING_EVENTID,
           MISSING_TIMESTAMP, BAD_TIMESTAMP)

# The part of a quarantined line's text that is kept (characters).
MAX_RAW_CHARS = 64 * 1024
_MAX_DETAIL = 300
_ROWS_PER_ARROW_BATCH = 10_000
_ISO_TIME = re.compile(r"\A(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)\Z")

# ---- One file -> one row per line (plain Python, unit-testable without Spark) ---------------------


def parse_time(value: object) -> dt.datetime | None:
    """An ISO-8601 time with a zone (``2018-05-19T00:03:08.825252Z``, ``...+02:00``) as an aware UTC
    datetime (a fraction beyond microseconds is cut); ``None`` for anything else, a time without a zone
    included (Cowrie always writes one; guessing it would shift events)."""
    match = _ISO_TIME.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        offset = dt.timedelta(0) if zone == "Z" else (1 if zone[0] == "+" else -1) * dt.timedelta(
            hours=int(zone[1:3]), minutes=int(zone[4:6]))
        moment = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                             int((fraction or "0")[:6].ljust(6, "0")), tzinfo=dt.timezone(offset))
        return moment.astimezone(dt.timezone.utc)
    except (ValueError, OverflowError):
        return None


def event_id(sensor: str | None, session: str | None, eventid: str, moment: dt.datetime) -> str:
    """The id of an event (see the module docstring): SHA-256 of ``[sensor, session, eventid, UTC time]``."""
    identity = [sensor, session, eventid, moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")]
    return hashlib.sha256(json.dumps(identity, ensure_ascii=False).encode()).hexdigest()


def _fits(value: object, kind: str) -> bool:
    """Whether a JSON value belongs in a column of Spark type ``kind``."""
    if kind == STRING:
        return isinstance(value, str)
    if kind == BOOLEAN:
        return isinstance(value, bool) or (type(value) is int and value in (0, 1))
    if kind in (INT, LONG):
        bits = 31 if kind == INT else 63
        return type(value) is int and -(2 ** bits) <= value < 2 ** bits
    if kind == DOUBLE:
        return type(value) in (int, float)
    return isinstance(value, list) and all(isinstance(item, str) for item in value)  # STRINGS


class _Object(dict):
    """A JSON object that remembers whether a key came twice (Python's reader keeps the last)."""

    duplicate: str | None = None


def _object(pairs: list) -> _Object:
    found = _Object(pairs)
    if len(found) < len(pairs):
        seen: set = set()
        found.duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))
    return found


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _quarantined(reason: str, detail: str, record: dict | None = None) -> dict:
    eventid = record.get("eventid") if record is not None else None
    return {"reason": reason, "detail": detail[:_MAX_DETAIL], "eventid": eventid if isinstance(eventid, str) else None}


def parse_line(text: str) -> dict:
    """One non-blank line of a Cowrie log to the columns of its row: the event's, or a quarantine
    ``reason`` and ``detail`` (and the ``eventid`` when it has one)."""
    try:
        record = json.loads(text, object_pairs_hook=_object, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return _quarantined(INVALID_JSON, f"{exc.msg} at column {exc.colno}")
    except (ValueError, RecursionError) as exc:
        problem = "nested more deeply than a JSON reader allows" if isinstance(exc, RecursionError) else str(exc)
        return _quarantined(INVALID_JSON, problem)
    if not isinstance(record, dict):
        return _quarantined(NOT_AN_OBJECT, f"a line must be a JSON object, got a JSON {type(record).__name__}: "
                                           f"{text.strip()[:80]}")
    if record.duplicate is not None:
        return _quarantined(DUPLICATE_KEY, f"the key {record.duplicate!r} comes more than once", record)
    eventid = record.get("eventid")
    if not isinstance(eventid, str) or not eventid.strip():
        return _quarantined(MISSING_EVENTID, "the line has no eventid" if eventid is None else
                            f"eventid is not a non-blank string: {json.dumps(eventid)[:80]}", record)
    if record.get(TIMESTAMP) is None:
        return _quarantined(MISSING_TIMESTAMP, "the line has no timestamp", record)
    moment = parse_time(record[TIMESTAMP])
    if moment is None:
        return _quarantined(BAD_TIMESTAMP, "timestamp is not an ISO-8601 time with a zone: "
                                           f"{json.dumps(record[TIMESTAMP])[:80]}", record)
    row = {name: record[name] if name in record and _fits(record[name], kind) else None
           for name, kind in FIELDS.items()}
    rescued = {key: value for key, value in record.items()
               if key != TIMESTAMP and (key not in FIELDS or (value is not None and row[key] is None))}
    row.update({TIMESTAMP: moment, "date": moment.date(),
                "event_id": event_id(row["sensor"], row["session"], eventid, moment),
                "_rescued_data": json.dumps(rescued, ensure_ascii=False, separators=(",", ":")) if rescued else None})
    for name, kind in FIELDS.items():
        if kind == BOOLEAN and row[name] is not None:
            row[name] = bool(row[name])
        elif kind == DOUBLE and row[name] is not None:
            row[name] = float(row[name])
    return row


def split_file(content: bytes | None) -> Iterator[tuple[int, str, dict]]:
    """Each non-blank line of a Cowrie log file: ``(line number, text, columns of its row)``.

    Gzip is found by content, not name. A damaged gzip stream keeps every whole line before the
    damage; the line it cuts (or, when it cuts between lines, the line number after the last) is one
    ``unreadable_file`` row with the text that could be read of it. A file gone when it was read
    (``content`` ``None``) is one ``file_gone`` row at line 0.
    """
    if content is None:
        yield 0, "", _quarantined(FILE_GONE, "the file was gone when it was read (deleted after it was listed, or "
                                             "after its notification)")
        return
    data, damage = decompress(content)
    lines = data.split(b"\n")
    cut = lines.pop() if damage is not None else None  # never trusted: the stream ended inside it or after it
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix(b"\r")
        if not line.strip():
            continue  # blank lines are not records
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = line.decode("utf-8", errors="replace")
            yield number, text, _quarantined(INVALID_UTF8, f"bytes that are not UTF-8 at byte {exc.start + 1} of "
                                                           "the line (shown as U+FFFD)")
            continue
        yield number, text, parse_line(text)
    if cut is not None:
        yield len(lines) + 1, cut.decode("utf-8", errors="replace"), _quarantined(UNREADABLE_FILE, damage)


# ---- The same, inside Spark ------------------------------------------------------------------------

_COLUMNS = (("event_id", STRING), (TIMESTAMP, "timestamp"), ("date", "date"), *FIELDS.items(),
            ("_rescued_data", STRING), ("_source_file", STRING), ("_line_number", INT), ("reason", STRING),
            ("detail", STRING), ("raw", STRING))
SPLIT_COLUMNS = ", ".join(f"{name} {kind}" for name, kind in _COLUMNS)


def _arrow_schema():
    import pyarrow as pa

    types = {STRING: pa.string(), INT: pa.int32(), LONG: pa.int64(), DOUBLE: pa.float64(), BOOLEAN: pa.bool_(),
             STRINGS: pa.list_(pa.string()), "timestamp": pa.timestamp("us", tz="UTC"), "date": pa.date32()}
    return pa.schema([(name, types[kind]) for name, kind in _COLUMNS])


def split_batches(batches: Iterator) -> Iterator:
    """``mapInArrow`` body: ``binaryFile`` rows (path, content) to one row per non-blank line."""
    import pyarrow as pa

    schema = _arrow_schema()
    columns: dict[str, list] = {name: [] for name in schema.names}
    for batch in batches:
        for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
            for number, text, row in split_file(content):
                for name in schema.names:
                    columns[name].append(row.get(name))
                columns["_source_file"][-1], columns["_line_number"][-1] = path, number
                if row.get("reason") is not None:
                    columns["raw"][-1] = text
                if len(columns["_source_file"]) >= _ROWS_PER_ARROW_BATCH:
                    yield pa.RecordBatch.from_pydict(columns, schema=schema)
                    columns = {name: [] for name in schema.names}
    if columns["_source_file"]:
        yield pa.RecordBatch.from_pydict(columns, schema=schema)


def transform(files: DataFrame, job: JobSpec) -> DataFrame:
    """Cowrie log files to one row per non-blank line, with every column of both output tables.

    :param files: rows of Spark's ``binaryFile`` source (``path``, ``content``), batch or streaming.
    :param job: the registry entry (not used).
    :returns: ``reason`` is NULL for an event; a quarantined line has its ``reason``, ``detail`` and ``raw``.
    """
    return files.select("path", "content").mapInArrow(split_batches, SPLIT_COLUMNS)


def events(parsed: DataFrame, context: BatchContext | None = None) -> DataFrame:
    """Columns of ``cowrie_events`` (of the rows its route, ``reason IS NULL``, takes)."""
    return event_columns(parsed)


def quarantine(parsed: DataFrame, context: BatchContext | None = None) -> DataFrame:
    """Columns of ``cowrie_quarantine`` (of the rows its route, ``reason IS NOT NULL``, takes)."""
    return quarantine_columns(parsed, source_file="_source_file", position=("_line_number", "line_number"),
                              identity="eventid", max_raw_chars=MAX_RAW_CHARS)


OUTPUTS = {"cowrie_events": events, "cowrie_quarantine": quarantine}
