"""Turn the bytes of one log file into text, and salvage what can be saved from a damaged file.

Why this is Python and not Spark's JSON reader: Spark's reader fails the whole batch on a truncated
gzip stream, ``ignoreCorruptFiles`` drops such a file silently, and one invalid UTF-8 byte turns a
whole single-line file into one corrupt record. Here every file gives either its text or a reason,
and the records before any damage are kept. The heavy JSON parsing of healthy files stays in the JVM
(``from_json``); :func:`salvage` runs only for files Spark could not split.

These are plain functions over ``bytes``/``str`` so they are unit-tested without Spark; the
``*_batches`` adapters run them inside Spark over Arrow batches.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from dataclasses import dataclass, field
from typing import Iterator

from spark_jobs.transforms import arrow_without_pandas as without_pandas
from spark_jobs.transforms.cloudtrail import reasons
from spark_jobs.transforms.gzip_stream import decompress as _decompress
from spark_jobs.transforms.gzip_stream import gunzip  # noqa: F401 - its tests import it from here

_RECORDS_OPENING = re.compile(r'\A\s*\{\s*"Records"\s*:\s*\[')
_MAX_DETAIL = 300
# A first line holding one of these is a CloudTrail event, so the file is JSON lines of events.
_EVENT_KEYS = frozenset({"eventTime", "eventID", "eventName", "eventSource", "eventVersion"})

# Shapes of a file's text, decided from its first characters.
RECORDS = "records"  # {"Records":[...]} as CloudTrail delivers to S3
ARRAY = "array"  # [ {...}, ... ] as exports write it
LINES = "lines"  # one JSON event per line
DOCUMENT = "document"  # anything else: parsed whole by salvage()


@dataclass(frozen=True)
class DecodedFile:
    """The text of one file and what went wrong reading it.

    :param text: the decoded text (invalid UTF-8 sequences replaced by U+FFFD); the readable prefix
        of a damaged gzip stream; ``""`` for an empty file.
    :param shape: one of :data:`RECORDS`, :data:`ARRAY`, :data:`LINES`, :data:`DOCUMENT`.
    :param reason: a file-level reason code when the file is damaged or empty, else ``None``.
    :param detail: what exactly was wrong, for people.
    :param bad_utf8: whether the bytes held invalid UTF-8 (records with U+FFFD are quarantined).
    """

    text: str
    shape: str
    reason: str | None = None
    detail: str | None = None
    bad_utf8: bool = False


def shape_of(text: str) -> str:
    """Which of the shapes CloudTrail data comes in ``text`` has, from its first line."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        return ARRAY
    if _RECORDS_OPENING.match(stripped):
        return RECORDS
    first_line = stripped.split("\n", 1)[0].strip()
    if first_line.startswith("{"):
        try:
            first = json.loads(first_line)
        except (ValueError, RecursionError):
            return DOCUMENT
        if isinstance(first, dict) and _EVENT_KEYS.intersection(first):
            return LINES
    return DOCUMENT


def decode_file(content: bytes) -> DecodedFile:
    """Bytes of a log file (gzipped or plain, detected by content, not name) to text."""
    return _decoded(*_decompress(content))


def _decoded(data: bytes, damage: str | None) -> DecodedFile:
    """Decompressed bytes (and the gzip damage, if any) to text, noting invalid UTF-8 and emptiness."""
    reason, detail = (reasons.UNREADABLE_FILE, damage) if damage else (None, None)
    bad_utf8 = False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        bad_utf8 = True
        text = data.decode("utf-8", errors="replace")
    if reason is None and not text.strip():
        reason, detail = reasons.EMPTY_FILE, f"the file has no content ({len(data)} bytes)"
    return DecodedFile(text, shape_of(text), reason, detail, bad_utf8)


@dataclass(frozen=True)
class Piece:
    """A record, or a damaged stretch of a file, found by :func:`salvage`.

    :param record_index: position of the record in the file; ``None`` for a file-level problem.
    :param raw: the JSON text of the record, or the damaged text.
    :param reason: ``None`` for a good record, else a reason code.
    :param detail: what was wrong.
    """

    record_index: int | None
    raw: str
    reason: str | None = None
    detail: str | None = None


def _json_problem(exc: Exception) -> str:
    """What Python's JSON reader found wrong, in words (a record nested too deeply is no ValueError)."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, RecursionError):
        return "nested more deeply than a JSON reader allows (about 1,000 levels)"
    return str(exc)


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line} column {column} (char {pos})"


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _salvage_array(text: str, pos: int, damage: tuple[str, str] | None) -> list[Piece]:
    """Records of the JSON array starting at ``text[pos]`` (just after ``[``), up to any damage."""
    decoder = json.JSONDecoder()
    pieces: list[Piece] = []
    index = 0
    while True:
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == "]":
            break
        if index > 0:
            if pos < len(text) and text[pos] == ",":
                pos = _skip_ws(text, pos + 1)
            else:
                problem = "expected ',' or ']'" if pos < len(text) else "the text ends inside the array"
                return pieces + [_damage_piece(text, pos, problem, damage)]
        try:
            _, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            return pieces + [_damage_piece(text, pos, _json_problem(exc), damage)]
        pieces.append(Piece(index, text[pos:end]))
        index, pos = index + 1, end
    if damage:  # the array closed, but the stream was damaged after it
        pieces.append(Piece(None, text[pos:], damage[0], damage[1]))
    return pieces


def _damage_piece(text: str, pos: int, problem: str, damage: tuple[str, str] | None) -> Piece:
    """The rest of a file from ``pos`` on, as one quarantine entry."""
    if damage:
        return Piece(None, text[pos:], damage[0], f"{damage[1]}; {problem} at {_where(text, pos)}")
    return Piece(None, text[pos:], reasons.INVALID_JSON, f"{problem} at {_where(text, pos)}")


def salvage(text: str, reason: str | None = None, detail: str | None = None) -> list[Piece]:
    """Everything that can be saved from a file Spark could not split, and what could not.

    Records that come before the first damage (a syntax error, the end of a truncated stream) are
    kept; from the damage on, the rest of the file is one quarantine entry with the reason, where it
    is and the text. A file that parses but has no ``Records`` array is one ``no_records`` entry.
    """
    damage = (reason, detail) if reason else None
    if reason in (reasons.EMPTY_FILE, reasons.INVALID_UTF8):
        return [Piece(None, text, reason, detail)]
    start = _skip_ws(text, 0)
    opening = _RECORDS_OPENING.match(text)
    if opening:
        return _salvage_array(text, opening.end(), damage)
    if text.startswith("[", start):
        return _salvage_array(text, start + 1, damage)
    if shape_of(text) == LINES:
        return salvage_lines(text, damage)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several JSON documents: JSON lines whose first line is odd
            return salvage_lines(text, damage)
        return [_damage_piece(text, exc.pos, exc.msg, damage)]
    except (ValueError, RecursionError) as exc:
        pos = getattr(exc, "pos", 0)
        return [_damage_piece(text, start if pos is None else pos, _json_problem(exc), damage)]
    if isinstance(document, dict) and "Records" in document:
        records = document["Records"]
        if isinstance(records, list):
            return [Piece(i, json.dumps(r, ensure_ascii=False)) for i, r in enumerate(records)]
        return [Piece(None, text, reasons.NO_RECORDS,
                      f"'Records' is a JSON {type(records).__name__}, not an array of events")]
    if isinstance(document, dict) and "eventTime" in document:  # one pretty-printed event
        return [Piece(0, text.strip())]
    keys = f" (top-level keys: {', '.join(list(document)[:5])})" if isinstance(document, dict) else ""
    return [Piece(None, text, reasons.NO_RECORDS,
                  f"valid JSON {type(document).__name__} without a 'Records' array of events{keys}")]


def salvage_lines(text: str, damage: tuple[str, str] | None = None) -> list[Piece]:
    """Records of a JSON-lines file; an invalid line is one record-level ``invalid_json`` entry."""
    pieces = []
    lines = [line for line in text.split("\n") if line.strip()]
    for index, line in enumerate(lines):
        last = index == len(lines) - 1
        try:
            json.loads(line)
            pieces.append(Piece(index, line.strip()))
        except (ValueError, RecursionError) as exc:
            if last and damage:
                pieces.append(Piece(None, line, damage[0], damage[1]))
            else:
                pieces.append(Piece(index, line, reasons.INVALID_JSON,
                                    f"line {index + 1}: {exc if isinstance(exc, ValueError) else _json_problem(exc)}"))
    if damage and (not lines or pieces[-1].reason is None):
        pieces.append(Piece(None, "", damage[0], damage[1]))
    return pieces


# ---- One file, split for the JVM ----------------------------------------------------------------
#
# A healthy file (gzip intact, valid UTF-8 and JSON, every element of Records an object) goes back to
# the JVM as its text, which Spark's JSON reader parses straight into the record struct, the fastest
# parse Spark has. Python checks it with simdjson (validation and a walk over each record's keys, at
# several hundred MB/s) and notes the little the JVM cannot see cheaply: each record's top-level keys
# the schema does not know (the rescued data), and the JSON of records whose eventTime or eventID
# may send them to quarantine (which keeps the raw text). Every other file is salvaged here and goes
# back as pieces, one per record or damaged stretch, each with its reason.

# eventTime as CloudTrail writes it; a day past the 28th is checked against the calendar too.
_ISO_UTC = re.compile(r"\A\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?Z\Z")


@dataclass(frozen=True)
class SplitFile:
    """One file as the JVM gets it: the text of a healthy file, or the pieces of a salvaged one.

    :param text: the UTF-8 text of a healthy file (``None`` when salvaged).
    :param shape: :data:`RECORDS` or :data:`ARRAY` for a healthy file, else ``None``.
    :param rescued: record index -> JSON object of its top-level fields the schema does not know.
    :param raw: record index -> the record's JSON, for records whose eventTime or eventID is not
        plainly valid (the JVM decides; quarantine keeps this text).
    :param pieces: the pieces of a salvaged file (``None`` when healthy).
    """

    text: bytes | None
    shape: str | None = None
    rescued: dict[int, str] = field(default_factory=dict)
    raw: dict[int, str] = field(default_factory=dict)
    pieces: list[dict] | None = None


def plain_event_time(text: object) -> bool:
    """Whether ``text`` is an eventTime as CloudTrail writes it (``2024-03-01T12:34:56Z``), a real date.

    Everything Spark cannot read as a timestamp fails this; some odd but readable times fail it too.
    """
    if not isinstance(text, str) or _ISO_UTC.match(text) is None:
        return False
    if text[8:10] <= "28":
        return True
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _plainly_valid(record, known: frozenset) -> tuple[bool, bool]:
    """(has unknown top-level keys, eventTime and eventID are plainly valid) of a simdjson object.

    A record with a top-level key twice is not plain: simdjson reads the first value of such a key,
    Spark's JSON reader the last, so only Spark may say what its eventID is.
    """
    event_id = record.get("eventID")
    keys = set(record)
    return (not known.issuperset(keys),
            isinstance(event_id, str) and bool(event_id.strip()) and plain_event_time(record.get("eventTime"))
            and len(keys) == len(record))


def rescued_json(record: dict, known: frozenset) -> str | None:
    """The JSON object of ``record``'s top-level fields that are not in ``known`` (``None`` if none)."""
    extra = {key: value for key, value in record.items() if key not in known}
    return json.dumps(extra, ensure_ascii=False, separators=(",", ":")) if extra else None


def _healthy(data: bytes, parser, known: frozenset) -> SplitFile | None:
    """The :class:`SplitFile` of a healthy S3 delivery or JSON array; ``None`` if it needs salvage."""
    import simdjson

    try:
        document = parser.parse(data)
    except ValueError:  # invalid JSON or UTF-8 (UnicodeDecodeError is a ValueError), or JSON lines
        return None
    except RuntimeError:  # simdjson's own limits, e.g. DEPTH_ERROR: nested more than 1,024 levels
        return None
    try:
        if isinstance(document, simdjson.Object):
            records, shape = document.get("Records"), RECORDS
        else:
            records, shape = document, ARRAY
        if not isinstance(records, simdjson.Array):
            return None
        rescued, raw = {}, {}
        for index, record in enumerate(records):
            if not isinstance(record, simdjson.Object):
                return None
            unknown, plain = _plainly_valid(record, known)
            if unknown or not plain:
                text = record.mini.decode()
                if unknown:
                    try:
                        rescued[index] = rescued_json(json.loads(text), known)
                    except RecursionError:  # deeper than Python's reader goes: salvage says so
                        return None
                if not plain:
                    raw[index] = text
        return SplitFile(data, shape, rescued, raw)
    finally:
        del document  # simdjson reuses the parser only once no object of the last parse is alive
        records = record = None


def _piece_row(piece: Piece, bad_utf8: bool, known: frozenset) -> dict:
    """A salvaged piece as a row for the JVM, with the record-level checks only Python can make."""
    reason, detail, rescued = piece.reason, piece.detail, None
    if reason is None:
        value = json.loads(piece.raw)
        if bad_utf8 and "\ufffd" in piece.raw:
            reason, detail = reasons.INVALID_UTF8, "the record holds bytes that are not UTF-8 (shown here as U+FFFD)"
        elif not isinstance(value, dict):
            reason, detail = reasons.NOT_AN_OBJECT, f"a record must be a JSON object, got: {piece.raw[:80]}"
        else:
            rescued = rescued_json(value, known)
    return {"record_index": piece.record_index, "raw": piece.raw, "reason": reason,
            "detail": None if detail is None else detail[:_MAX_DETAIL], "rescued": rescued}


FILE_GONE_DETAIL = "the file was gone when it was read (deleted after it was listed, or after its notification)"


def split_file(content: bytes | None, known: frozenset, parser=None) -> SplitFile:
    """Bytes of a log file (gzipped or plain, detected by content) to what the JVM parses.

    :param content: the bytes; ``None`` for a file that was gone when it was read (a ``file_gone`` row).
    :param known: the top-level keys the schema knows (others are rescued).
    :param parser: a ``simdjson.Parser`` to reuse (one is made if not given).
    """
    import simdjson

    if content is None:
        return SplitFile(None, pieces=[_piece_row(Piece(None, "", reasons.FILE_GONE, FILE_GONE_DETAIL), False, known)])

    data, damage = _decompress(content)
    if damage is None:
        healthy = _healthy(data, parser or simdjson.Parser(), known)
        if healthy is not None:
            return healthy
    decoded = _decoded(data, damage)
    if decoded.reason == reasons.EMPTY_FILE:
        pieces = [Piece(None, decoded.text, decoded.reason, decoded.detail)]
    else:
        pieces = salvage(decoded.text, decoded.reason, decoded.detail)
    return SplitFile(None, pieces=[_piece_row(p, decoded.bad_utf8, known) for p in pieces])


# ---- Arrow adapter, run inside Spark ------------------------------------------------------------

SPLIT_DDL = ("source_file string, text string, shape string, rescued map<int, string>, raw map<int, string>, "
             "pieces array<struct<record_index: int, raw: string, reason: string, detail: string, rescued: string>>")
_MAX_TEXT_PER_ARROW_BATCH = 64 * 1024 * 1024


def _split_arrow_schema():
    import pyarrow as pa

    piece = pa.struct([("record_index", pa.int32()), ("raw", pa.string()), ("reason", pa.string()),
                       ("detail", pa.string()), ("rescued", pa.string())])
    return pa.schema([("source_file", pa.string()), ("text", pa.string()), ("shape", pa.string()),
                      ("rescued", pa.map_(pa.int32(), pa.string())), ("raw", pa.map_(pa.int32(), pa.string())),
                      ("pieces", pa.list_(piece))])


def whole_text(content: bytes) -> str:
    """All of ``content`` as text (gunzipped if gzip, invalid UTF-8 replaced by U+FFFD)."""
    return _decompress(content)[0].decode("utf-8", errors="replace")


def split_batches(batches: Iterator, known: tuple[str, ...], whole_raw: bool = False) -> Iterator:
    """``mapInArrow`` body: binaryFile rows (path, content) to one :class:`SplitFile` row per file.

    :param whole_raw: a file-level problem keeps the whole text as its raw text, not the text from the
        damage on (for inputs of one record each, like Kafka messages, where the whole is the record).
    """
    import pyarrow as pa
    import simdjson

    without_pandas.settle()
    known_keys, parser, schema = frozenset(known), simdjson.Parser(), _split_arrow_schema()
    columns: dict[str, list] = {name: [] for name in schema.names}
    size = 0
    for batch in batches:
        for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
            split = split_file(content, known_keys, parser)
            if whole_raw and split.pieces and any(p["record_index"] is None for p in split.pieces):
                text = whole_text(content or b"")
                for piece in split.pieces:
                    if piece["record_index"] is None:
                        piece["raw"] = text
            for name, value in (("source_file", path), ("text", split.text), ("shape", split.shape),
                                ("rescued", list(split.rescued.items())), ("raw", list(split.raw.items())),
                                ("pieces", split.pieces)):
                columns[name].append(value)
            size += len(split.text or b"") + sum(len(p["raw"]) for p in split.pieces or ())
            if size >= _MAX_TEXT_PER_ARROW_BATCH:
                yield pa.RecordBatch.from_pydict(columns, schema=schema)
                columns, size = {name: [] for name in schema.names}, 0
    if columns["source_file"]:
        yield pa.RecordBatch.from_pydict(columns, schema=schema)
