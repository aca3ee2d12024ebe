"""Which partitions ``lake optimize --changed-only`` picks: those with two or more small files, read with delta-rs.

Delta's Z-order rewrites every file of the partitions it is given, so the daily ``lake_maintenance`` run gives
it only the days appends wrote to since the last compaction
(:func:`spark_jobs.control.lake.delta_log.partitions_with_small_files`).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from spark_jobs.control.lake.delta_log import partitions_with_small_files


def _append(path, days: list[dt.date], rows_each: int = 3) -> None:
    from deltalake import write_deltalake

    column = [d for d in days for _ in range(rows_each)]
    write_deltalake(str(path), pa.table({"eventID": [f"e{i}" for i in range(len(column))], "date": column}),
                    mode="append", partition_by=["date"])


def test_only_partitions_with_two_or_more_small_files_are_changed(tmp_path):
    table = tmp_path / "events"
    day1, day2, day3 = dt.date(2024, 3, 1), dt.date(2024, 3, 2), dt.date(2024, 3, 3)
    _append(table, [day1, day2])
    _append(table, [day1, day3])
    _append(table, [day1, day2])
    assert partitions_with_small_files(table, "date", below_bytes=1 << 20) == ["2024-03-01", "2024-03-02"]
    # A file at or above the size counts as compacted: day 1's three files are all "large" at 1 byte.
    assert partitions_with_small_files(table, "date", below_bytes=1) == []


def test_an_unpartitioned_table_is_one_partition(tmp_path):
    from deltalake import write_deltalake

    table = tmp_path / "counts"
    write_deltalake(str(table), pa.table({"word": ["a"]}), mode="append")
    assert partitions_with_small_files(table, None, below_bytes=1 << 20) == []
    write_deltalake(str(table), pa.table({"word": ["b"]}), mode="append")
    assert partitions_with_small_files(table, None, below_bytes=1 << 20) == [""]


def test_an_empty_table_has_nothing_to_compact(tmp_path):
    from deltalake import write_deltalake

    table = tmp_path / "empty"
    write_deltalake(str(table), pa.table({"eventID": pa.array([], pa.string()), "date": pa.array([], pa.date32())}),
                    mode="append", partition_by=["date"])
    assert partitions_with_small_files(table, "date", below_bytes=1 << 20) == []
