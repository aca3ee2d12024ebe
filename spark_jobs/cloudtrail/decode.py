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
import zlib
from dataclasses import dataclass
from typing import Iterator

from spark_jobs.cloudtrail import reasons

GZIP_MAGIC = b"\x1f\x8b"
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


def gunzip(data: bytes) -> tuple[bytes, str | None]:
    """Decompress every member of a gzip stream.

    :returns: the bytes decompressed and ``None``, or the bytes readable before the damage and a
        description of the damage.
    """
    out: list[bytes] = []
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits=31)
        try:
            out.append(inflater.decompress(rest))
        except zlib.error as exc:
            return b"".join(out), f"corrupt gzip stream: {exc}"
        if not inflater.eof:
            out.append(inflater.flush())
            done = sum(map(len, out))
            return b"".join(out), (
                f"truncated gzip stream: {len(data)} compressed bytes end before the stream does "
                f"({done} bytes readable)"
            )
        rest = inflater.unused_data.lstrip(b"\x00")
        if rest and not rest.startswith(GZIP_MAGIC):
            return b"".join(out), f"{len(rest)} bytes of garbage after the gzip stream"
    return b"".join(out), None


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
        except ValueError:
            return DOCUMENT
        if isinstance(first, dict) and _EVENT_KEYS.intersection(first):
            return LINES
    return DOCUMENT


def decode_file(content: bytes) -> DecodedFile:
    """Bytes of a log file (gzipped or plain, detected by content, not name) to text."""
    reason = detail = None
    if content[:2] == GZIP_MAGIC:
        content, damage = gunzip(content)
        if damage:
            reason, detail = reasons.UNREADABLE_FILE, damage
    if content.startswith(b"\xef\xbb\xbf"):
        content = content[3:]
    bad_utf8 = False
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        bad_utf8 = True
        text = content.decode("utf-8", errors="replace")
    if reason is None and not text.strip():
        reason, detail = reasons.EMPTY_FILE, f"the file has no content ({len(content)} bytes)"
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
        except ValueError as exc:
            problem = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            return pieces + [_damage_piece(text, pos, problem, damage)]
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
    except ValueError as exc:
        pos = getattr(exc, "pos", 0)
        return [_damage_piece(text, start if pos is None else pos, getattr(exc, "msg", str(exc)), damage)]
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
        except ValueError as exc:
            if last and damage:
                pieces.append(Piece(None, line, damage[0], damage[1]))
            else:
                pieces.append(Piece(index, line, reasons.INVALID_JSON, f"line {index + 1}: {exc}"))
    if damage and (not lines or pieces[-1].reason is None):
        pieces.append(Piece(None, "", damage[0], damage[1]))
    return pieces


# ---- Arrow adapters, run inside Spark -----------------------------------------------------------

_MAX_TEXT_PER_ARROW_BATCH = 64 * 1024 * 1024


def decode_batches(batches: Iterator) -> Iterator:
    """``mapInArrow`` function: binaryFile rows (path, content) to decoded rows (see DECODED_DDL)."""
    import pyarrow as pa

    columns: dict[str, list] = {k: [] for k in ("source_file", "text", "shape", "reason", "detail", "bad_utf8")}
    size = 0
    for batch in batches:
        for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
            decoded = decode_file(content or b"")
            for key, value in (("source_file", path), ("text", decoded.text), ("shape", decoded.shape),
                               ("reason", decoded.reason), ("detail", decoded.detail),
                               ("bad_utf8", decoded.bad_utf8)):
                columns[key].append(value)
            size += len(decoded.text)
            if size >= _MAX_TEXT_PER_ARROW_BATCH:
                yield pa.RecordBatch.from_pydict(columns, schema=_decoded_arrow_schema())
                columns = {k: [] for k in columns}
                size = 0
    if columns["source_file"]:
        yield pa.RecordBatch.from_pydict(columns, schema=_decoded_arrow_schema())


DECODED_DDL = "source_file string, text string, shape string, reason string, detail string, bad_utf8 boolean"


def _decoded_arrow_schema():
    import pyarrow as pa

    return pa.schema([("source_file", pa.string()), ("text", pa.string()), ("shape", pa.string()),
                      ("reason", pa.string()), ("detail", pa.string()), ("bad_utf8", pa.bool_())])


PIECES_DDL = "array<struct<record_index: int, raw: string, reason: string, detail: string>>"


def salvage_row(text: str | None, reason: str | None, detail: str | None) -> list[dict] | None:
    """UDF body: :func:`salvage` for the files that need it (``text`` is NULL for the others)."""
    if text is None:
        return None
    return [
        {"record_index": p.record_index, "raw": p.raw, "reason": p.reason,
         "detail": None if p.detail is None else p.detail[:_MAX_DETAIL]}
        for p in salvage(text, reason, detail)
    ]
