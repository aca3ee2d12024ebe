"""Rows of the job's own table schemas, for building Delta tables in the lake tests."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from spark_jobs.registry import get_job

JOB = get_job("cloudtrail_etl")
DAY = date(2024, 3, 1)


def schemas(spark) -> dict:
    """The job's table schemas with every column nullable, as the job creates its Delta tables."""
    from pyspark.sql.types import StructField, StructType

    from spark_jobs.driver.job_modules import output_schemas

    return {name: StructType([StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])
            for name, schema in output_schemas(spark, JOB).items()}


def rows_of(schema, keys: list[str], key_column: str, day_column: str) -> list[dict]:
    """One row per key with a value of the column's type in most columns and NULL in the others.

    Timestamps carry microseconds and booleans both values, so the readers' formatting is exercised.
    """
    rows = []
    for i, key in enumerate(keys):
        number = int(key.rsplit("-", 1)[-1]) if key.rsplit("-", 1)[-1].isdigit() else i
        row = {}
        for j, column in enumerate(schema.fields):
            kind = column.dataType.typeName()
            if (number + j) % 4 == 0 or kind in ("struct", "array", "map", "binary"):
                row[column.name] = None
            elif kind == "string":
                row[column.name] = f"{column.name} {key} é"
            elif kind in ("integer", "long", "short"):
                row[column.name] = number * 10 + j
            elif kind == "boolean":
                row[column.name] = (number + j) % 2 == 0
            elif kind == "timestamp":
                row[column.name] = datetime(2024, 3, 1, 8, 15, tzinfo=timezone.utc) + timedelta(
                    seconds=number * 61 + j, microseconds=123456 * (number % 2))
            elif kind == "date":
                row[column.name] = DAY + timedelta(days=number % 2)
            elif kind in ("double", "float"):
                row[column.name] = number + 0.5
            else:
                row[column.name] = None
        row[key_column] = key
        row[day_column] = DAY + timedelta(days=number % 2)
        rows.append(row)
    return rows


def events_frame(spark, keys: list[str]):
    schema = schemas(spark)["cloudtrail_events"]
    rows = rows_of(schema, keys, "eventID", "date")
    for row in rows:
        number = int(row["eventID"].rsplit("-", 1)[-1])
        row["eventTime"] = datetime(2024, 3, 1, 8, 15, tzinfo=timezone.utc) + timedelta(
            seconds=61 * number, microseconds=123456 * (number % 2))
    return spark.createDataFrame(rows, schema)


def quarantine_frame(spark, keys: list[str]):
    schema = schemas(spark)["cloudtrail_quarantine"]
    return spark.createDataFrame(rows_of(schema, keys, "source_file", "ingest_date"), schema)


def append(frame, path, partition_by: str) -> None:
    """One Delta commit (the first one creates the table)."""
    frame.write.format("delta").mode("append").partitionBy(partition_by).save(str(path))
