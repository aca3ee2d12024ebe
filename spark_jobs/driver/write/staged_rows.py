"""A staged insert's reads of local Parquet files in the driver, without a Spark job: its own rows, the keys held.

The staged insert (:mod:`spark_jobs.driver.write.staged`) reads back the key and ``first_by`` columns of the files
it wrote, uncommitted, to find the rows to leave out; a live batch writes one small file, and a Spark job to read
it is a large share of a live batch's time. For files on a local disk whose columns are strings and integers,
:func:`read_locally` reads them with pyarrow in this process instead, giving the same values Spark's read would:
the partition columns from the files' Delta ``add``
actions, typed as the table types them. ``None`` otherwise (an object store, another type, or only partition
columns asked for: pyarrow would read no column, hence no row): Spark reads them.

The table's files in the batch's bound are read the same way for their keys (:func:`keys_read_locally`: a file's
key column whole, to keep between batches; :func:`keys_found_locally`: only which of the batch's keys it holds,
read a record batch at a time): a Spark job to read them costs every batch a job, and a new driver's first batch
the Parquet reader's and the join's classes and code generation besides; pyarrow reads a file's key column in a
fraction of that.

A large batch (a catch-up's or a backfill's, up to :data:`MOST_ROWS_CHECKED_LOCALLY` rows) is checked the same way
(:func:`suspects_read_locally`): only its key column is read whole, its repeated keys are counted and the held files
scanned for its keys in Arrow, and the key and ``first_by`` columns are read only of the rows with such a key,
where Spark takes three jobs (a ranking by key, a semi join, a distinct with a limit's collects). The
measurements are in docs/benchmarks.md.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from spark_jobs.driver.write.held_keys import matches

if TYPE_CHECKING:
    from spark_jobs.driver.write.held_keys import KeyShape

# Rows of a held file read at a time when only the batch's keys are looked for in it.
_KEY_BATCH_ROWS = 65_536
# At most this many staged rows checked in the driver: their key column is held in memory twice, by file and by
# partition (about 90 bytes a row for a key of 36 characters: 180 MB at the limit); a larger batch is checked by Spark.
MOST_ROWS_CHECKED_LOCALLY = 2_000_000

# Spark types whose values pyarrow hands back as Spark's Row would (a partition value parsed from its text).
_READ_AS_IS = {"string", "int", "bigint", "smallint", "tinyint"}
_PARTITION_TYPES = {"string": str, "int": int, "bigint": int, "smallint": int, "tinyint": int,
                    "date": dt.date.fromisoformat}


def read_locally(paths: list[str], partition_values: list[dict], columns: list[str], types: dict[str, str],
                 partition_by: tuple[str, ...], file_column: str) -> list[dict] | None:
    """The rows of the local Parquet files at ``paths`` (``file:`` URIs or paths) as dicts of ``columns`` and
    ``file_column`` (the file's path as given), or ``None`` when Spark must read them (see the module docstring).

    :param partition_values: each file's Delta partition values (column -> text, or ``None`` for NULL).
    :param types: the table's column types (Spark's simple names: ``string``, ``date``, ...).
    """
    stored = _stored_columns(columns, types, partition_by)
    if stored is None:
        return None
    rows: list[dict] = []
    for path, values in zip(paths, partition_values):
        local = _local_path(path)
        if local is None:
            return None
        rows += _file_rows(local, path, values, columns, stored, types, partition_by, file_column)
    return rows


def _stored_columns(columns: list[str], types: dict[str, str], partition_by: tuple[str, ...]) -> list[str] | None:
    """The columns of ``columns`` a table's Parquet files store (not ``partition_by``), or ``None`` when pyarrow would
    not read them (and their partition values would not be typed) as Spark does, or none is stored (pyarrow would
    read no column, hence no row)."""
    stored = [c for c in columns if c not in partition_by]
    if not stored or any(types.get(c) not in _READ_AS_IS for c in stored) or \
            any(types.get(c) not in _PARTITION_TYPES for c in columns if c in partition_by):
        return None
    return stored


def _file_rows(local: str, path: str, values: dict, columns: list[str], stored: list[str], types: dict[str, str],
               partition_by: tuple[str, ...], file_column: str, where=None) -> list[dict]:
    """The rows of the local Parquet file at ``local`` (``where``: only those of this boolean mask) as dicts of
    ``columns`` (the partition columns' from ``values``, the file's Delta partition values) and ``file_column``
    (``path``)."""
    import pyarrow.parquet as pq

    read = pq.read_table(local, columns=stored)
    fixed = {c: _partition_value(values, c, types) for c in columns if c in partition_by}
    rows = (read if where is None else read.filter(where)).to_pylist()
    for row in rows:
        row.update(fixed)
        row[file_column] = path
    return rows


def keys_read_locally(paths: list[str], partition_values: list[dict | None], shape: "KeyShape",
                      types: dict[str, str]) -> list[tuple[tuple, object]] | None:
    """Each local Parquet file's values of ``shape.within`` (typed as the table types them) and its key column
    ``shape.column`` whole (a pyarrow array), or ``None`` when Spark must read them (see the module docstring).

    :param partition_values: each file's Delta partition values (column -> text; ``None``: not known).
    """
    import pyarrow.parquet as pq

    local = _local_files(paths, partition_values, shape, types)
    if local is None:
        return None
    return [(partition, pq.read_table(path, columns=[shape.column]).column(shape.column).combine_chunks())
            for path, partition in local]


def keys_found_locally(paths: list[str], partition_values: list[dict | None], shape: "KeyShape",
                       types: dict[str, str], batch: dict[tuple, list]) -> set[tuple] | None:
    """The ``(partition values, key value)`` pairs of ``batch`` (partition values -> key values) that the local
    Parquet files at ``paths`` hold, read :data:`_KEY_BATCH_ROWS` rows at a time and compared as Spark's join
    would (:func:`~spark_jobs.driver.write.held_keys.matches`); ``None`` when Spark must read them."""
    import pyarrow.parquet as pq

    local = _local_files(paths, partition_values, shape, types)
    if local is None:
        return None
    found: set[tuple] = set()
    wanted: dict = {}
    for path, partition in local:
        if partition not in batch or not len(batch[partition]):
            continue
        with pq.ParquetFile(path) as parquet:
            for chunk in parquet.iter_batches(batch_size=_KEY_BATCH_ROWS, columns=[shape.column]):
                found |= matches(partition, chunk.column(0), batch, shape, wanted)
    return found


def suspects_read_locally(paths: list[str], partition_values: list[dict], columns: list[str], types: dict[str, str],
                          partition_by: tuple[str, ...], file_column: str, shape: "KeyShape", held: list[str],
                          held_values: list[dict | None]) -> tuple[list[dict], set[tuple]] | None:
    """The staged rows at ``paths`` whose key another staged row repeats or a held file at ``held`` holds (as
    :func:`read_locally` gives rows: ``columns`` and ``file_column``), and the ``(partition values, key value)`` pairs
    the held files hold; ``None`` when Spark must read them (see the module docstring).

    :param partition_values: each staged file's Delta partition values (column -> text, or ``None`` for NULL).
    :param held_values: each held file's (``None``: not known).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    stored = _stored_columns(columns, types, partition_by)
    staged = _local_files(paths, partition_values, shape, types)
    if staged is None or stored is None or shape.column not in stored:
        return None
    keys = [pq.read_table(path, columns=[shape.column]).column(0) for path, _ in staged]
    by_partition: dict[tuple, list] = {}
    for (_, partition), values in zip(staged, keys):
        by_partition.setdefault(partition, []).extend(values.chunks)
    batch = {partition: pa.chunked_array(chunks, type=keys[0].type).combine_chunks()
             for partition, chunks in by_partition.items()}
    suspects: dict[tuple, list] = {}
    for partition, values in batch.items():  # a key twice in the batch (NULL counted as one value, as Spark ranks)
        counted = pc.value_counts(values)
        repeated = counted.field("values").filter(pc.greater(counted.field("counts"), 1))
        if len(repeated):
            suspects[partition] = [repeated]
    found = keys_found_locally(held, held_values, shape, types, batch) if held else set()
    if found is None:
        return None
    for partition, value in found:
        suspects.setdefault(partition, []).append(pa.array([value], type=batch[partition].type))
    rows: list[dict] = []
    for (path, partition), values, uri, fixed_values in zip(staged, keys, paths, partition_values):
        if partition not in suspects:
            continue
        wanted = pa.chunked_array(suspects[partition]).combine_chunks()
        hits = pc.is_in(values, value_set=wanted, skip_nulls=False)
        if pc.any(hits).as_py():
            rows += _file_rows(path, uri, fixed_values, columns, stored, types, partition_by, file_column, hits)
    return rows, found


def _local_files(paths: list[str], partition_values: list[dict | None], shape: "KeyShape",
                 types: dict[str, str]) -> list[tuple[str, tuple]] | None:
    """Each file's local path and its typed values of ``shape.within``; ``None`` when a file is not local, its
    partition values are not known, or a column's type is not one read here as Spark would."""
    if types.get(shape.column) not in _READ_AS_IS or any(types.get(c) not in _PARTITION_TYPES for c in shape.within):
        return None
    found = []
    for path, values in zip(paths, partition_values):
        local = _local_path(path)
        if local is None or values is None:
            return None
        found.append((local, tuple(_partition_value(values, c, types) for c in shape.within)))
    return found


def _partition_value(values: dict, column: str, types: dict[str, str]):
    """``column``'s value in a file's Delta partition values (text), typed as the table types it (``None``: NULL)."""
    text = values.get(column)
    return None if text is None else _PARTITION_TYPES[types[column]](text)


def _local_path(path: str) -> str | None:
    """The file system path of a ``file:`` URI or a plain path; ``None`` for any other scheme."""
    if "://" not in path and not path.startswith("file:"):
        return path
    parsed = urlparse(path)
    return unquote(parsed.path) if parsed.scheme == "file" else None
