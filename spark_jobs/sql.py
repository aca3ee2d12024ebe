"""Ad-hoc SQL over the lake: every table in the registry is a view of the same name."""

from __future__ import annotations

import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.lake import Lake
from spark_jobs.registry import JOBS


def read_table(spark: SparkSession, path, schema) -> DataFrame:
    """A table folder as a DataFrame (Delta if it has a ``_delta_log``, else Spark's file-sink parquet).

    Spark's reader lists a file-sink table through its ``_spark_metadata`` log, so files of a batch
    that never committed are not read.
    """
    if (path / "_delta_log").is_dir():
        return spark.read.format("delta").load(str(path))
    return spark.read.schema(schema).parquet(str(path))


def register_tables(spark: SparkSession, lake: Lake) -> list[str]:
    """Create a temp view per registry table; a table with no data yet is an empty view.

    :returns: notes for people about tables that have no data yet.
    """
    from spark_jobs.runner import output_schemas

    notes = []
    for job in JOBS.values():
        for name, schema in output_schemas(spark, job).items():
            path = lake.table_path(name)
            if path.is_dir():
                frame = read_table(spark, path, schema)
            else:
                frame = spark.createDataFrame([], schema)
                notes.append(f"note: table {name} has no data yet at {path} (run: python -m spark_jobs run {job.name})")
            frame.createOrReplaceTempView(name)
    return notes


def print_result(frame: DataFrame, output_format: str, limit: int, out=sys.stdout) -> None:
    """Print up to ``limit`` rows; ``json`` is one object per row with every column (NULLs too).

    Values are formatted by Spark in the session time zone (UTC), not by Python.
    """
    limited = frame.limit(limit)
    if output_format == "json":
        for row in limited.select(F.to_json(F.struct("*"), {"ignoreNullFields": "false"}).alias("j")).collect():
            print(row.j, file=out)
    else:
        out.write(limited._jdf.showString(limit, 0, False))
