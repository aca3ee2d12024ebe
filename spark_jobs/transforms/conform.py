"""A frame in the order and types of a table's declared schema: :func:`conformed`, :func:`table_schema`.

A table that declares a ``schema`` in the registry (:class:`~spark_jobs.model.tables.TableSpec`) gets exactly
those columns: the driver conforms each select's rows to it (:func:`spark_jobs.driver.job_modules.job_module`),
so no job does. :func:`table_schema` turns the declaration into a ``StructType`` without a JVM (a stateful
job's empty frame, the tables created before the first batch).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_jobs.model.tables import TableSpec


def conformed(frame: DataFrame, table: TableSpec) -> DataFrame:
    """``frame``'s columns in the order and types of ``table``'s declared ``schema``."""
    return conform(frame, table_schema(table.schema))


def conform(frame: DataFrame, schema: StructType) -> DataFrame:
    """``frame``'s columns in ``schema``'s order and types."""
    return frame.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


_SIMPLE_TYPES = {"STRING": "StringType", "BOOLEAN": "BooleanType", "BIGINT": "LongType", "DOUBLE": "DoubleType",
                 "DATE": "DateType", "TIMESTAMP": "TimestampType"}


def table_schema(ddl: str) -> StructType:
    """A flat schema from ``"name TYPE, ..."`` (STRING, BOOLEAN, BIGINT, DOUBLE, DATE, TIMESTAMP), made
    without a JVM (``StructType.fromDDL`` needs one)."""
    from pyspark.sql import types

    fields = []
    for part in ddl.split(","):
        name, kind = part.split()
        fields.append(types.StructField(name, getattr(types, _SIMPLE_TYPES[kind.upper()])()))
    return StructType(fields)
