"""Reference files joined to every micro-batch (a stream-static join), e.g. who owns each AWS account.

Usage (the ``accounts`` file of the registry, ``reference/accounts.csv`` unless ``$ACCOUNTS_PATH``)::

    account_id,account_name,owner_team,environment
    111122223333,payments-prod,payments,prod

A CSV file has a header row; a ``.json`` file holds an array of objects, a ``.jsonl``/``.ndjson`` file
one object per line. The file is read again for **every micro-batch** (on the driver: it is small),
so an update (write a new file and rename it over the old one) is used from the next micro-batch on.

Why not a static DataFrame in the streaming plan: Spark's file source lists a static file once, when
the DataFrame is made, and keeps its length; a stream-static join against it keeps reading the old
listing (a renamed-over file that grew is read only up to its old length). Reading the file in each
micro-batch and joining it there (a broadcast join of the batch with the small table) uses what the
file says now. Parsing it with the standard library gives errors that name the line; a bad update
does not stop the stream: the last good version is used and the error is logged every batch. The join
itself is a job's, in its select (:func:`spark_jobs.transforms.enrich.enrich`).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.model.errors import UsageError
from spark_jobs.model.streams import DimensionSpec

log = logging.getLogger("spark_jobs")


class DimensionError(UsageError):
    """A dimension file that cannot be used; the message names the file, the line and the way out."""


@dataclass(frozen=True)
class Dimension:
    """The rows of one dimension file, keyed.

    :param spec: its declaration.
    :param path: the file read.
    :param rows: key -> the other columns' values, in ``spec.columns`` order.
    """

    spec: DimensionSpec
    path: Path
    rows: dict[str, tuple[str | None, ...]]


def parse_dimension(spec: DimensionSpec, path: Path, data: bytes) -> Dimension:
    """Parse a dimension file's bytes (CSV, JSON array or JSON lines, by the file's extension).

    :raises DimensionError: a missing column, a bad or repeated key, or a syntax error, naming the line.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DimensionError(f"{spec.name} file {path} is not UTF-8 text ({exc}); save it as UTF-8") from None
    records = list(_records(spec, path, text))
    pattern = re.compile(spec.key_pattern)
    rows: dict[str, tuple[str | None, ...]] = {}
    for line, record in records:
        missing = [c for c in (spec.key, *spec.columns) if c not in record]
        if missing:
            raise DimensionError(f"{spec.name} file {path}, {line}: no {', '.join(missing)}; every row needs "
                                 f"{', '.join((spec.key, *spec.columns))}")
        key = str(record[spec.key]).strip()
        if not pattern.fullmatch(key):
            raise DimensionError(f"{spec.name} file {path}, {line}: {spec.key} {record[spec.key]!r} does not match "
                                 f"{spec.key_pattern}; fix or remove the row")
        if key in rows:
            raise DimensionError(f"{spec.name} file {path}, {line}: {spec.key} {key} appears twice; keep one row "
                                 "per key")
        rows[key] = tuple(None if record[c] in (None, "") else str(record[c]).strip() for c in spec.columns)
    return Dimension(spec, path, rows)


def _records(spec: DimensionSpec, path: Path, text: str):
    """``(where, record)`` pairs of the file, ``where`` naming the line for errors."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        for number, record in enumerate(csv.DictReader(io.StringIO(text)), start=2):
            yield f"line {number}", record
        return
    if suffix in (".jsonl", ".ndjson"):
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                yield f"line {number}", _object(spec, path, line, f"line {number}")
        return
    if suffix == ".json":
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise DimensionError(f"{spec.name} file {path} is not valid JSON ({exc})") from None
        if not isinstance(value, list):
            raise DimensionError(f"{spec.name} file {path} must hold a JSON array of objects, got "
                                 f"{type(value).__name__}")
        for number, item in enumerate(value):
            if not isinstance(item, dict):
                raise DimensionError(f"{spec.name} file {path}, element {number}: not an object")
            yield f"element {number}", item
        return
    raise DimensionError(f"{spec.name} file {path}: unknown format {suffix or '(no extension)'!r}; use .csv (with a "
                         "header row), .json (an array of objects) or .jsonl (one object per line)")


def _object(spec: DimensionSpec, path: Path, line: str, where: str) -> dict:
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise DimensionError(f"{spec.name} file {path}, {where}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise DimensionError(f"{spec.name} file {path}, {where}: not an object")
    return value


def read_dimension(spec: DimensionSpec, path: Path | None = None) -> Dimension:
    """Read and parse the dimension file (``spec.path()`` unless given).

    :raises DimensionError: the file is missing or cannot be parsed, naming it and the way out.
    """
    path = path or spec.path()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DimensionError(f"{spec.name} file {path} does not exist; create it (columns "
                             f"{', '.join((spec.key, *spec.columns))}) or point ${spec.env_var} at it") from None
    except OSError as exc:
        raise DimensionError(f"{spec.name} file {path} cannot be read: {exc}") from None
    return parse_dimension(spec, path, data)


class DimensionReader:
    """Reads a dimension for each micro-batch, keeping the last good version when an update is bad.

    :param spec: the declaration.
    """

    def __init__(self, spec: DimensionSpec):
        self.spec = spec
        self.last: Dimension | None = None

    def read(self) -> Dimension:
        """The file as it is now; if it cannot be used, the last good version (logged).

        :raises DimensionError: when there is no good version yet (at the job's start).
        """
        try:
            self.last = read_dimension(self.spec)
        except DimensionError as exc:
            if self.last is None:
                raise
            log.error("%s; using the version read before (%d rows)", exc, len(self.last.rows))
        return self.last


def dimension_frame(spark, dimension: Dimension):
    """The dimension as a small DataFrame: the key column, then ``spec.columns`` (all strings)."""
    from pyspark.sql.types import StringType, StructField, StructType

    spec = dimension.spec
    schema = StructType([StructField(c, StringType()) for c in (spec.key, *spec.columns)])
    return spark.createDataFrame([(key, *values) for key, values in sorted(dimension.rows.items())], schema)

