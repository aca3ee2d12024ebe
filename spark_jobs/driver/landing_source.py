"""The landing source: new files of a folder or bucket as a stream, found without listing the history.

Usage (the runner does this for every job whose file source declares a key layout)::

    spark.dataSource.register(LandingSource)
    files = spark.readStream.format("spark_jobs_landing").options(**settings.to_options()).load()

A PySpark 4.2 Python streaming data source (``DataSourceStreamReader`` with admission control and
``availableNow``). Its offsets are the manifests of :class:`~spark_jobs.control.discovery.planner.Discovery`
(which files each offset stands for, fixed once written); its rows are those of Spark's ``binaryFile`` source
(``path``, ``modificationTime``, ``length``, ``content``), so a job's ``transform`` reads them unchanged. The
files are read in Python (a local ``open`` or an S3 ``GetObject`` through boto3) and handed to Spark as Arrow
batches. A file gone before it could be read (deleted after its notification, or after the listing) comes
through with a NULL ``content``, and the job's parser quarantines it with a reason; the stream goes on.

Why a source of our own: Spark's file source lists every folder under its input at every trigger and keeps
every file it ever saw in its checkpoint (:mod:`spark_jobs.control.discovery`).
"""

from __future__ import annotations

import datetime as dt
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles, SupportsTriggerAvailableNow

from spark_jobs.control.discovery.listing import Candidate
from spark_jobs.control.discovery.settings import DiscoverySettings
from spark_jobs.transforms import arrow_without_pandas as without_pandas

NAME = "spark_jobs_landing"
SCHEMA = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
# Files are handed to Spark in Arrow batches of about this many bytes.
BATCH_BYTES = 16 << 20


def register(spark) -> None:
    """Make ``format("spark_jobs_landing")`` known to ``spark`` (idempotent)."""
    spark.dataSource.register(LandingSource)


class LandingSource(DataSource):
    """``spark_jobs_landing``: a job's landing folder or bucket prefix, streamed by manifest, or a file list read once."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> "LandingStreamReader":
        return LandingStreamReader(DiscoverySettings.from_options(self.options))

    def reader(self, schema) -> "FileListReader":
        return FileListReader(DiscoverySettings.from_options(self.options))


def split(files: list[Candidate], parts: int) -> list[InputPartition]:
    """``files`` in up to ``parts`` Spark partitions of about equal bytes (largest first, each to the lightest)."""
    if not files:
        return []
    count = max(1, min(parts, len(files)))
    bins: list[list] = [[] for _ in range(count)]
    weights = [0] * count
    for file in sorted(files, key=lambda f: (-f.size, f.key)):
        lightest = weights.index(min(weights))
        bins[lightest].append(file.row())
        weights[lightest] += max(file.size, 1)
    return [InputPartition(sorted(rows)) for rows in bins if rows]


class LandingStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets from :class:`~spark_jobs.control.discovery.planner.Discovery`; rows read by :func:`read_files`."""

    def __init__(self, settings: DiscoverySettings) -> None:
        self.settings = settings
        self._discovery = None

    @property
    def discovery(self):
        if self._discovery is None:  # made where Spark runs the source's planning, not where it was defined
            from spark_jobs.control.discovery.planner import Discovery

            self._discovery = Discovery(self.settings)
        return self._discovery

    def initialOffset(self) -> dict:
        return self.discovery.initial_offset()

    def getDefaultReadLimit(self):
        return ReadMaxFiles(self.settings.max_files) if self.settings.max_files else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.discovery.prepare_available_now()

    def latestOffset(self, start: dict, limit) -> dict:
        return self.discovery.latest(start, limit.max_files if isinstance(limit, ReadMaxFiles) else None)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return split(self.discovery.files(start, end), self.settings.parallelism)

    def read(self, partition: InputPartition):
        return read_files(partition.value)

    def commit(self, end: dict) -> None:
        self.discovery.committed(end)


class FileListReader(DataSourceReader):
    """A batch read of the files in ``settings.file_list`` (a JSON list of candidate rows)."""

    def __init__(self, settings: DiscoverySettings) -> None:
        self.settings = settings

    def partitions(self) -> list[InputPartition]:
        import json

        from spark_jobs.control.checkpoint.store import Location

        rows = json.loads(Location.of(self.settings.file_list).read_bytes())
        return split([Candidate.of_row(r) for r in rows], self.settings.parallelism)

    def read(self, partition: InputPartition):
        return read_files(partition.value)


def read_files(rows: list[list]) -> Iterator:
    """The files of ``rows`` (candidate rows) as Arrow batches of ``binaryFile``'s columns. A zero-byte file gives
    no row, as in Spark's ``binaryFile`` source; a file gone when it is read gives one with a NULL ``content``."""
    import pyarrow as pa

    without_pandas.settle()
    schema = pa.schema([("path", pa.string()), ("modificationTime", pa.timestamp("us", tz="UTC")),
                        ("length", pa.int64()), ("content", pa.binary())])
    columns: tuple[list, list, list, list] = ([], [], [], [])
    held = 0
    for row in rows:
        key, mtime_ms = row[0], int(row[2])
        content = read_bytes(key)
        if content == b"":
            continue
        columns[0].append(key)
        columns[1].append(dt.datetime.fromtimestamp(mtime_ms / 1000, dt.timezone.utc))
        columns[2].append(None if content is None else len(content))
        columns[3].append(content)
        held += len(content or b"")
        if held >= BATCH_BYTES:
            yield pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)
            columns, held = ([], [], [], []), 0
    if columns[0]:
        yield pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)


_S3 = {}


def read_bytes(key: str) -> bytes | None:
    """The bytes of the file named ``key`` (``file:/...`` or ``s3a://bucket/key``); ``None`` if it is gone."""
    if key.startswith("file:"):
        try:
            with open(key[len("file:"):], "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
    from urllib.parse import urlparse

    from spark_jobs.control.discovery.listing import s3_client

    parsed = urlparse(key)
    client = _S3.get("client") or _S3.setdefault("client", s3_client())
    try:
        return client.get_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"))["Body"].read()
    except client.exceptions.NoSuchKey:
        return None
