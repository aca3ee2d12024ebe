"""The keys a staged insert's table holds in the files of its bound, kept in the driver from one batch to the next.

A small batch of a staged insert (:mod:`spark_jobs.driver.write.staged`) leaves out the rows whose key the table
holds in the files within its bound. Those files change little from one live batch to the next (the batch before
added one, the bound moved by seconds), yet scanning their key column took a Spark job of 0.4-0.5 s a batch on
the 10M-event table (the live job's 30-40 small files of the last 25 minutes, and the one or two compacted files
of 250,000 events whose stretch of time holds now). A Delta data file never changes once written (a rewrite is a
new file), so a file's keys, read once, hold for as long as the file is in the table: :class:`HeldKeys` keeps
them by file name, as Arrow arrays (a key of 36 characters: about 40 bytes). A file is scanned for the batch's
keys the first time a batch needs it and read whole the second (a run of one batch reads none whole); a batch's own
files are added from the rows it collected, so the live job reads none of its own.

It applies to a table whose key is one column besides its partition columns (``cloudtrail_events``: ``eventID``
within ``date``), each file holding one value of those. Files beyond :data:`MOST_KEYS` keys in all are not
kept: the caller scans them as before. Why our own: Spark caches a query's rows, not a file's, and a
``cache()`` of a changing set of files is a new plan each batch; Delta keeps no key index (no Bloom filters in
the open-source Delta).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

# At most this many keys kept per table (about 40 bytes each): the live files of the bound and a few compacted ones.
MOST_KEYS = 2_000_000
# At most this many tables' keys kept in one process (the least recently used go first).
MOST_TABLES = 4


def file_name(path: str) -> str:
    """The name that identifies a data file of a table (Delta's names are unique: ``part-<n>-<uuid>...``)."""
    return os.path.basename(path.rstrip("/"))


@dataclass(frozen=True)
class KeyShape:
    """A key a table's files can be looked up by: ``column`` within the partition columns ``within``.

    :param column: the key's one column that is not a partition column.
    :param within: the key's partition columns (one value per file; compared with ``=``: a NULL one matches none).
    :param null_matches: whether a NULL ``column`` matches a NULL (the key compares it null-safe).
    """

    column: str
    within: tuple[str, ...]
    null_matches: bool

    @classmethod
    def of(cls, unique_key: tuple[str, ...], partition_by: tuple[str, ...],
           null_safe: tuple[str, ...]) -> "KeyShape | None":
        """The shape of ``unique_key``, or ``None`` when it is not one column besides partition columns."""
        others = [c for c in unique_key if c not in partition_by]
        within = tuple(c for c in unique_key if c in partition_by)
        if len(others) != 1 or any(c in null_safe for c in within):
            return None
        return cls(others[0], within, others[0] in null_safe)


class HeldKeys:
    """The key values of a table's files, by file name (see the module docstring).

    :param most: at most this many values kept (default :data:`MOST_KEYS`).
    """

    def __init__(self, most: int | None = None):
        self.most = MOST_KEYS if most is None else most
        self._files: dict[str, tuple[tuple, object]] = {}  # name -> (partition values, pyarrow array of keys)
        self._seen: set[str] = set()  # files scanned once: kept when a batch needs them again
        self._count = 0
        self._lock = threading.Lock()

    def known(self, names: list[str]) -> set[str]:
        """Which of ``names`` are kept."""
        return {name for name in names if name in self._files}

    def seen(self, names: list[str]) -> set[str]:
        """Which of ``names`` a batch before needed (and scanned), and marks them all as needed now: a file is kept
        from the second batch that needs it (a run of one batch, a catch-up, reads none whole)."""
        with self._lock:
            before = {name for name in names if name in self._seen}
            self._seen.update(names)
            return before

    def keep_only(self, names: set[str]) -> None:
        """Forget every file not in ``names`` (no longer in the bound: the live bound only moves forward)."""
        with self._lock:
            for name in [n for n in self._files if n not in names]:
                self._count -= len(self._files.pop(name)[1])
            self._seen &= names

    def add(self, name: str, partition: tuple, keys) -> bool:
        """Keep ``keys`` (a pyarrow array) of the file ``name`` in ``partition``; ``False`` when over :attr:`most`."""
        with self._lock:
            if name in self._files:
                return True
            if self._count + len(keys) > self.most:
                return False
            self._files[name] = (partition, keys)
            self._count += len(keys)
            return True

    def held(self, names: list[str], batch: dict[tuple, list], shape: KeyShape) -> set[tuple]:
        """The ``(partition values, key value)`` pairs of ``batch`` (partition values -> key values) that a kept file
        of ``names`` holds, compared as Spark's join would (``=``, or ``<=>`` for a null-safe key)."""
        with self._lock:
            entries = [self._files[name] for name in names if name in self._files]
        found: set[tuple] = set()
        wanted: dict[tuple, object] = {}
        for partition, keys in entries:
            found |= matches(partition, keys, batch, shape, wanted)
        return found

    @property
    def count(self) -> int:
        """Key values kept."""
        return self._count


def matches(partition: tuple, keys, batch: dict[tuple, list], shape: KeyShape, wanted: dict) -> set[tuple]:
    """The ``(partition values, key value)`` pairs of ``batch`` (partition values -> key values: a list, or a pyarrow
    array) among ``keys`` (a pyarrow array of a file's key values in ``partition``), compared as Spark's join would
    (``=``, or ``<=>`` for a null-safe key); ``wanted`` caches the batch's values of each partition as an array
    (the small side, hashed once per batch)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from spark_jobs.transforms.arrow_without_pandas import settle

    values = batch.get(partition)
    if values is None or not len(values) or None in partition or not len(keys):
        return set()
    if partition not in wanted:
        if isinstance(values, pa.Array):
            wanted[partition] = values if values.type == keys.type else values.cast(keys.type)
        else:
            settle()  # an array of Python values: pyarrow's pandas check, without pandas
            wanted[partition] = pa.array(values, type=keys.type)
    hits = pc.is_in(keys, value_set=wanted[partition], skip_nulls=not shape.null_matches)
    return {(partition, value) for value in keys.filter(hits).to_pylist()}


_TABLES: "OrderedDict[str, HeldKeys]" = OrderedDict()
_TABLES_LOCK = threading.Lock()


def keys_of_table(path: str) -> HeldKeys:
    """The process's :class:`HeldKeys` of the table at ``path`` (made on first use; :data:`MOST_TABLES` kept)."""
    with _TABLES_LOCK:
        kept = _TABLES.pop(path, None) or HeldKeys()
        _TABLES[path] = kept
        while len(_TABLES) > MOST_TABLES:
            _TABLES.popitem(last=False)
        return kept
