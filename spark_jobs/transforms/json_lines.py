"""A JSON-lines log file to one typed row per line: the half of a JSON-lines log's parser that every such log shares.

Cowrie and Suricata's EVE write one JSON object per line, each naming what happened (Cowrie's ``eventid``,
EVE's ``event_type``) and when (``timestamp``). A log type declares what differs (:class:`JsonLinesLog`: its
typed fields, which field names the kind of event, how an event is identified); this module does the rest
the same way for each, and :meth:`JsonLinesLog.transform` is the log type's pure ``transform`` (a job
module's: ``transform = COWRIE.transform``).

**Why whole files (``binaryFile``) and not Spark's ``text`` source.** Each file is decoded here
(:meth:`JsonLinesLog.split_file`): gzip by content (:mod:`spark_jobs.transforms.gzip_stream`: a truncated
stream keeps the lines before the damage), UTF-8 per line (one bad byte quarantines its line, not the
file), blank lines skipped, and each line's number in the file known exactly (``_line_number``, 1-based,
blank lines counted, as an editor numbers them). Spark's ``text`` source would fail the batch on a damaged
gzip and knows no line numbers.

**Typing.** Python's JSON reader parses each line once (a log line is small); a field lands in its typed
column when its JSON type fits (an object or array, in a :data:`JSON` column, as its compact JSON text), else,
like every top-level key the log type does not declare, in ``_rescued_data`` (a JSON object of those fields),
so nothing of a line is lost. A column may also type a value inside an object (``alert.signature_id``): the
object stays whole in its own column.

**Quarantine reasons** (the ``reason`` column; ``detail`` says exactly what): :data:`UNREADABLE_FILE` (a damaged
gzip stream: the line it cuts, or where it ends), :data:`FILE_GONE` (listed or notified, but deleted before it
could be read: line 0), :data:`INVALID_UTF8`, :data:`INVALID_JSON` (NaN and Infinity included, or nested too
deeply), :data:`NOT_AN_OBJECT`, :data:`DUPLICATE_KEY` (a top-level key twice: which value is meant is unknown),
then ``missing_<kind>`` (no kind, or not a non-blank string), ``missing_<time>`` and ``bad_<time>`` (not an
ISO-8601 time with a zone, or not a real date and time: a time without a zone is not guessed, which would shift
events).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

from spark_jobs.model.log_types import EVENT_DATE, PARSED_SOURCE_FILE, REASON
from spark_jobs.transforms import arrow_without_pandas as without_pandas
from spark_jobs.transforms.gzip_stream import decompress

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spark_jobs.model.jobs import JobSpec

# ---- The types of a line's fields (Spark's names; JSON: an object or array as its JSON text) --------------
STRING, INT, LONG, DOUBLE, BOOLEAN, STRINGS = "string", "int", "bigint", "double", "boolean", "array<string>"
JSON, TIMESTAMP = "json", "timestamp"

UNREADABLE_FILE = "unreadable_file"
FILE_GONE = "file_gone"
INVALID_UTF8 = "invalid_utf8"
INVALID_JSON = "invalid_json"
NOT_AN_OBJECT = "not_an_object"
DUPLICATE_KEY = "duplicate_key"

# A row's line in its file (the position its quarantine row keeps as ``line_number``).
LINE_NUMBER = "_line_number"
# The columns every row has after its fields: what was not typed, where the line is, and the verdict.
_LINE_COLUMNS = (("_rescued_data", STRING), (PARSED_SOURCE_FILE, STRING), (LINE_NUMBER, INT), (REASON, STRING),
                 ("detail", STRING), ("raw", STRING))
_MAX_DETAIL = 300
_ROWS_PER_ARROW_BATCH = 10_000
_ISO_TIME = r"\A(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:%s\d\d)\Z"
_EXTENDED_ZONE, _ANY_ZONE = re.compile(_ISO_TIME % ""), re.compile(_ISO_TIME % "?")


def parse_time(value: object, compact_offsets: bool = False) -> dt.datetime | None:
    """An ISO-8601 time with a zone (``2018-05-19T00:03:08.825252Z``, ``...+02:00``; with ``compact_offsets``
    also ``...+0200``) as an aware UTC datetime (a fraction beyond microseconds is cut); ``None`` for anything
    else, a time without a zone included."""
    pattern = _ANY_ZONE if compact_offsets else _EXTENDED_ZONE
    match = pattern.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        offset = dt.timedelta(0) if zone == "Z" else (1 if zone[0] == "+" else -1) * dt.timedelta(
            hours=int(zone[1:3]), minutes=int(zone[-2:]))
        moment = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                             int((fraction or "0")[:6].ljust(6, "0")), tzinfo=dt.timezone(offset))
        return moment.astimezone(dt.timezone.utc)
    except (ValueError, OverflowError):
        return None


def utc_micros(moment: dt.datetime) -> str:
    """``moment`` as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC): one text per instant, whatever its zone or fraction."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sha256_of(parts: list) -> str:
    """The SHA-256 (hex) of ``parts`` written as a JSON array: an event key from the values that identify it."""
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


def compact_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _typed(value: object, kind: str, compact_offsets: bool) -> object:
    """``value`` as a column of ``kind`` holds it, or ``None`` when its JSON type does not fit."""
    if kind == STRING:
        return value if isinstance(value, str) else None
    if kind == BOOLEAN:
        return bool(value) if isinstance(value, bool) or (type(value) is int and value in (0, 1)) else None
    if kind in (INT, LONG):
        bits = 31 if kind == INT else 63
        return value if type(value) is int and -(2 ** bits) <= value < 2 ** bits else None
    if kind == DOUBLE:
        return float(value) if type(value) in (int, float) else None
    if kind == JSON:
        return compact_json(value) if isinstance(value, (dict, list)) else None
    if kind == TIMESTAMP:
        return parse_time(value, compact_offsets)
    return value if isinstance(value, list) and all(isinstance(item, str) for item in value) else None  # STRINGS


def _inside(record: dict, path: str) -> object:
    """The value at a dotted ``path`` of nested objects, or ``None``."""
    value: object = record
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


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


# An event's key from its typed row, its record as parsed and its time (UTC).
EventKey = Callable[[dict, dict, dt.datetime], str]


@dataclass(frozen=True)
class JsonLinesLog:
    """A JSON-lines log type: what its lines' fields become and what identifies an event.

    :param kind: the field that names what happened (``eventid``, ``event_type``): a non-blank string in every
        event; a quarantined line keeps it (its identity in the quarantine table) when it has one. One of ``fields``.
    :param fields: top-level field -> its column's type (:data:`STRING`, :data:`INT`, :data:`LONG`,
        :data:`DOUBLE`, :data:`BOOLEAN`, :data:`STRINGS`, :data:`JSON`, :data:`TIMESTAMP`), in column order.
    :param event_key: ``(typed row, record, time) -> key`` of an event (see :func:`sha256_of`).
    :param key: the key's column.
    :param time: the field of the event's time (a column of type ``timestamp``, and its UTC date ``date``).
    :param nested: column -> (dotted path inside an object field, type): values typed out of their object, which
        stays whole in its own column.
    :param compact_offsets: times may write their offset without a colon (``+0000``: EVE's ``%z``).
    """

    kind: str
    fields: Mapping[str, str]
    event_key: EventKey
    key: str = "event_id"
    time: str = "timestamp"
    nested: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    compact_offsets: bool = False

    def __post_init__(self) -> None:
        if self.fields.get(self.kind) != STRING:
            raise ValueError(f"the kind field {self.kind!r} must be a STRING field of the log type")
        names = [*self.fields, *self.nested]
        taken = sorted(set(names) & {column for column, _ in (*self._event_columns, *_LINE_COLUMNS)}
                       | {name for name in names if names.count(name) > 1})
        if taken:
            raise ValueError(f"the column {taken[0]!r} of the log type is the platform's or declared twice; name the "
                             "field's column otherwise (a nested column), or drop it")

    @property
    def missing_kind(self) -> str:
        return f"missing_{self.kind}"

    @property
    def missing_time(self) -> str:
        return f"missing_{self.time}"

    @property
    def bad_time(self) -> str:
        return f"bad_{self.time}"

    @property
    def reasons(self) -> tuple[str, ...]:
        """Every quarantine reason of the log type (see the module docstring)."""
        return (UNREADABLE_FILE, FILE_GONE, INVALID_UTF8, INVALID_JSON, NOT_AN_OBJECT, DUPLICATE_KEY,
                self.missing_kind, self.missing_time, self.bad_time)

    # ---- One line, one file (plain Python, testable without Spark) ----

    def quarantined(self, reason: str, detail: str, record: dict | None = None) -> dict:
        """A quarantined line's columns: ``reason``, ``detail`` and the kind it claimed, if a string."""
        claimed = record.get(self.kind) if record is not None else None
        claimed = claimed if isinstance(claimed, str) else None
        return {REASON: reason, "detail": detail[:_MAX_DETAIL], self.kind: claimed}

    def parse_line(self, text: str) -> dict:
        """One non-blank line to the columns of its row: the event's, or a quarantine ``reason`` and ``detail``
        (and the kind, when it has one)."""
        try:
            record = json.loads(text, object_pairs_hook=_object, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            return self.quarantined(INVALID_JSON, f"{exc.msg} at column {exc.colno}")
        except (ValueError, RecursionError) as exc:
            problem = "nested more deeply than a JSON reader allows" if isinstance(exc, RecursionError) else str(exc)
            return self.quarantined(INVALID_JSON, problem)
        if not isinstance(record, dict):
            return self.quarantined(NOT_AN_OBJECT, f"a line must be a JSON object, got a JSON {type(record).__name__}: "
                                                   f"{text.strip()[:80]}")
        if record.duplicate is not None:
            return self.quarantined(DUPLICATE_KEY, f"the key {record.duplicate!r} comes more than once", record)
        claimed = record.get(self.kind)
        if not isinstance(claimed, str) or not claimed.strip():
            return self.quarantined(self.missing_kind, f"the line has no {self.kind}" if claimed is None else
                                    f"{self.kind} is not a non-blank string: {json.dumps(claimed)[:80]}", record)
        if record.get(self.time) is None:
            return self.quarantined(self.missing_time, f"the line has no {self.time}", record)
        moment = parse_time(record[self.time], self.compact_offsets)
        if moment is None:
            return self.quarantined(self.bad_time, f"{self.time} is not an ISO-8601 time with a zone: "
                                                   f"{json.dumps(record[self.time])[:80]}", record)
        row = {name: _typed(record[name], kind, self.compact_offsets) if name in record else None
               for name, kind in self.fields.items()}
        row.update({column: _typed(_inside(record, path), kind, self.compact_offsets)
                    for column, (path, kind) in self.nested.items()})
        rescued = {key: value for key, value in record.items()
                   if key != self.time and (key not in self.fields or (value is not None and row[key] is None))}
        row.update({self.time: moment, EVENT_DATE: moment.date(), self.key: self.event_key(row, record, moment),
                    "_rescued_data": compact_json(rescued) if rescued else None})
        return row

    def split_file(self, content: bytes | None) -> Iterator[tuple[int, str, dict]]:
        """Each non-blank line of a log file: ``(line number, text, columns of its row)``.

        Gzip is found by content, not name. A damaged gzip stream keeps every whole line before the
        damage; the line it cuts (or, when it cuts between lines, the line number after the last) is one
        ``unreadable_file`` row with the text that could be read of it. A file gone when it was read
        (``content`` ``None``) is one ``file_gone`` row at line 0.
        """
        if content is None:
            yield 0, "", self.quarantined(FILE_GONE, "the file was gone when it was read (deleted after it was "
                                                     "listed, or after its notification)")
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
                yield number, text, self.quarantined(INVALID_UTF8, f"bytes that are not UTF-8 at byte {exc.start + 1} "
                                                                   "of the line (shown as U+FFFD)")
                continue
            yield number, text, self.parse_line(text)
        if cut is not None:
            yield len(lines) + 1, cut.decode("utf-8", errors="replace"), self.quarantined(UNREADABLE_FILE, damage)

    # ---- The same, inside Spark ----

    @property
    def _event_columns(self) -> tuple[tuple[str, str], ...]:
        return (self.key, STRING), (self.time, TIMESTAMP), (EVENT_DATE, "date")

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        """Every column of the parser's rows, with its Spark type: the key, the time and its date, the typed fields,
        then the columns of every line (:data:`_LINE_COLUMNS`)."""
        typed = [(name, STRING if kind == JSON else kind) for name, kind in
                 (*self.fields.items(), *((column, kind) for column, (_, kind) in self.nested.items()))]
        return (*self._event_columns, *typed, *_LINE_COLUMNS)

    @property
    def ddl(self) -> str:
        return ", ".join(f"{name} {kind}" for name, kind in self.columns)

    def arrow_schema(self):
        import pyarrow as pa

        types = {STRING: pa.string(), INT: pa.int32(), LONG: pa.int64(), DOUBLE: pa.float64(), BOOLEAN: pa.bool_(),
                 STRINGS: pa.list_(pa.string()), TIMESTAMP: pa.timestamp("us", tz="UTC"), "date": pa.date32()}
        return pa.schema([(name, types[kind]) for name, kind in self.columns])

    def split_batches(self, batches: Iterator) -> Iterator:
        """``mapInArrow`` body: ``binaryFile`` rows (path, content) to one row per non-blank line."""
        import pyarrow as pa

        without_pandas.settle()
        schema = self.arrow_schema()
        columns: dict[str, list] = {name: [] for name in schema.names}
        for batch in batches:
            for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
                for number, text, row in self.split_file(content):
                    for name in schema.names:
                        columns[name].append(row.get(name))
                    columns[PARSED_SOURCE_FILE][-1], columns[LINE_NUMBER][-1] = path, number
                    if row.get(REASON) is not None:
                        columns["raw"][-1] = text
                    if len(columns[PARSED_SOURCE_FILE]) >= _ROWS_PER_ARROW_BATCH:
                        yield pa.RecordBatch.from_pydict(columns, schema=schema)
                        columns = {name: [] for name in schema.names}
        if columns[PARSED_SOURCE_FILE]:
            yield pa.RecordBatch.from_pydict(columns, schema=schema)

    def transform(self, files: DataFrame, job: JobSpec | None = None) -> DataFrame:
        """Log files to one row per non-blank line, with every column of the events and quarantine tables.

        :param files: rows of Spark's ``binaryFile`` source (``path``, ``content``), batch or streaming.
        :param job: the registry entry (not used: a job module's ``transform`` takes it).
        :returns: ``reason`` is NULL for an event; a quarantined line has its ``reason``, ``detail`` and ``raw``.
        """
        return files.select("path", "content").mapInArrow(self.split_batches, self.ddl)
