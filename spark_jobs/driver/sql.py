"""Ad-hoc SQL over the lake: every table in the registry is a view of the same name.

Usage::

    python -m spark_jobs sql "SELECT eventName, count(*) n FROM cloudtrail_events GROUP BY 1"
    python -m spark_jobs sql --engine duckdb --format json "SELECT * FROM cloudtrail_quarantine"
    python -m spark_jobs sql --as-of 3 "SELECT count(*) FROM cloudtrail_events"          # version 3
    python -m spark_jobs sql --as-of 2026-11-23T08:00:00Z "SELECT ..."                   # as of a time
    python -m spark_jobs sql --as-of cloudtrail_events=3 "SELECT ..."                     # one table only

Two engines read the same Delta tables: ``spark`` (delta-spark, a JVM start) and ``duckdb`` (delta-rs
``deltalake`` lists the table's files from its log, DuckDB queries the Arrow dataset; no JVM and no
pyspark import, so it answers in about a second). Both print the same output: ``--format json`` is
one JSON object per row with every column (NULLs too), timestamps in UTC as
``yyyy-MM-ddTHH:mm:ss.SSSZ``; ``--format table`` is Spark's ``show`` layout.

``--as-of`` is resolved to one version per table from the table's log, the same way for both
engines: a version number, or the newest version committed at or before a time (ISO-8601, UTC unless
it names an offset). A version the log does not have, or a time before the table's first commit, is
a :class:`UsageError` naming the value and the table's valid range.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

from spark_jobs.control.lake.delta_log import AsOf, parse_as_of, resolve_version
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.object_store import delta_rs_options
from spark_jobs.registry import JOBS, PLATFORM_TABLES, table_specs

ENGINES = ("spark", "duckdb")


# --- --as-of ---------------------------------------------------------------------------------------


# --- the tables ------------------------------------------------------------------------------------

def parse_as_of_args(values: list[str] | None) -> dict[str | None, AsOf]:
    """The ``--as-of`` flags: ``VALUE`` for every table, ``TABLE=VALUE`` for one (key None: every table).

    :raises UsageError: for an unknown table or a bad value.
    """
    known = registry_tables() + list(PLATFORM_TABLES)
    chosen: dict[str | None, AsOf] = {}
    for item in values or []:
        table, sep, value = item.partition("=")
        if sep and not re.fullmatch(r"\d{4}-.*", item):
            if table not in known:
                raise UsageError(f"--as-of {item!r} names unknown table {table!r}; tables: {', '.join(known)}")
            chosen[table] = parse_as_of(value)
        else:
            chosen[None] = parse_as_of(item)
    return chosen


def registry_tables() -> list[str]:
    """Every job's table name, in registry order (the platform's own tables: ``PLATFORM_TABLES``)."""
    return [table.name for table in table_specs()]


def is_delta_table(path: Path) -> bool:
    return (path / "_delta_log").is_dir()


def _missing_note(table: str, path: Path) -> str:
    job = next(job for job in JOBS.values() if any(t.name == table for t in job.tables))
    return f"note: table {table} has no data yet at {path} (run: python -m spark_jobs run {job.name})"


def print_notes(query: str, notes: dict[str, str]) -> None:
    """The notes of the tables ``query`` names (a word of it), to stderr: a query of the tables that have data says
    nothing about the others."""
    for table, note in notes.items():
        if re.search(rf"\b{re.escape(table)}\b", query, re.IGNORECASE):
            print(note, file=sys.stderr)


def table_versions(lake: Lake, as_of: dict[str | None, AsOf]) -> dict[str, int | None]:
    """The version each existing Delta table is read at (None: the latest).

    A platform table (``ops_audit``) is read at a version only when named (``--as-of ops_audit=N``):
    ``--as-of N`` is about the jobs' tables.
    """
    versions = {}
    for name in registry_tables() + list(PLATFORM_TABLES):
        path = lake.table_path(name)
        wanted = as_of.get(name) or (as_of.get(None) if name not in PLATFORM_TABLES else None)
        if is_delta_table(path):
            versions[name] = resolve_version(name, path, wanted) if wanted else None
        elif name in as_of:
            raise UsageError(f"--as-of {as_of[name].text}: table {name} is not a Delta table at {path}")
    return versions


# --- engine: spark ---------------------------------------------------------------------------------

def read_table(spark, path, schema, version: int | None = None):
    """A table folder as a DataFrame: Delta (at ``version``, else the latest); an empty frame of ``schema``
    when the table does not exist yet (a lake in the old file-sink layout is converted by ``lake convert``)."""
    if is_delta_table(Path(path)):
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(str(path))
    return spark.createDataFrame([], schema)


def register_tables(spark, lake: Lake, as_of: dict[str | None, AsOf] | None = None) -> dict[str, str]:
    """Create a temp view per registry table; a table with no data yet is an empty view.

    :returns: notes for people about tables that have no data yet, by table.
    """
    from spark_jobs.driver.job_modules import output_schemas

    versions = table_versions(lake, as_of or {})
    notes = {}
    done = set()
    for job in JOBS.values():
        for name, schema in output_schemas(spark, job).items():
            if name in done:
                continue  # a table several jobs write (cloudtrail_events): one view
            done.add(name)
            path = lake.table_path(name)
            if name not in versions:
                notes[name] = _missing_note(name, path)
            read_table(spark, path, schema, versions.get(name)).createOrReplaceTempView(name)
    for name in PLATFORM_TABLES:  # no note while empty: nothing has been done yet
        empty = spark.createDataFrame(_platform_schema(name).empty_table()).schema
        read_table(spark, lake.table_path(name), empty, versions.get(name)).createOrReplaceTempView(name)
    return notes


def _platform_schema(table: str):
    """The Arrow schema of a platform table (its writer's, delta-rs), for its empty view before its first row."""
    from spark_jobs.control.monitoring import progress
    from spark_jobs.control.oncall import audit

    return {audit.AUDIT_TABLE: audit.arrow_schema(), progress.PROGRESS_TABLE: progress.SCHEMA}[table]


def print_result(frame, output_format: str, limit: int, out=sys.stdout) -> None:
    """Print up to ``limit`` rows; ``json`` is one object per row with every column (NULLs too).

    Values are formatted by Spark in the session time zone (UTC), not by Python.
    """
    from pyspark.sql import functions as F

    limited = frame.limit(limit)
    if output_format == "json":
        for row in limited.select(F.to_json(F.struct("*"), {"ignoreNullFields": "false"}).alias("j")).collect():
            print(row.j, file=out)
    else:
        out.write(limited._jdf.showString(limit, 0, False))


def run_spark(query: str, lake: Lake, as_of: dict[str | None, AsOf], output_format: str, limit: int) -> None:
    from pyspark.errors import PySparkException

    from spark_jobs.driver.session import build_session

    table_versions(lake, as_of)  # a bad --as-of fails here, before a JVM starts
    spark = build_session("spark_jobs_sql")
    print_notes(query, register_tables(spark, lake, as_of))
    try:
        frame = spark.sql(query)
    except PySparkException as exc:
        raise UsageError(f"bad query: {str(exc).strip().splitlines()[0]}") from None
    print_result(frame, output_format, limit)


# --- engine: duckdb (delta-rs + DuckDB, no JVM) ----------------------------------------------------

def duckdb_connection(lake: Lake, as_of: dict[str | None, AsOf] | None = None):
    """A DuckDB connection with a view per existing registry table over delta-rs's Arrow dataset.

    :returns: (connection, notes for people about tables that have no data yet, by table).
    """
    import duckdb
    from deltalake import DeltaTable

    versions = table_versions(lake, as_of or {})
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    notes = {}
    for name in registry_tables():
        path = lake.table_path(name)
        if name not in versions:
            notes[name] = _missing_note(name, path)
            continue
        dataset = DeltaTable(str(path), version=versions[name],
                             storage_options=delta_rs_options(path)).to_pyarrow_dataset()
        con.register(name, dataset)
    for name in PLATFORM_TABLES:
        path = lake.table_path(name)
        if name in versions:
            con.register(name, DeltaTable(str(path), version=versions[name],
                                          storage_options=delta_rs_options(path)).to_pyarrow_dataset())
        else:  # no note while empty: nothing has been done yet
            con.register(name, _platform_schema(name).empty_table())
    return con, notes


def _json_value(value):
    """A Python value from Arrow as Spark's ``to_json`` writes it (times in UTC with milliseconds)."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):  # an Arrow map
            return {str(k): _json_value(v) for k, v in value}
        return [_json_value(v) for v in value]
    return value


def _show_value(value) -> str:
    """A value as Spark's ``show`` prints it (UTC session time zone)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        text = value.isoformat(sep=" ")
        return text.rstrip("0").rstrip(".") if "." in text else text
    if isinstance(value, (dict, list)):
        return json.dumps(_json_value(value), separators=(",", ":"))
    return str(value)


def show_string(columns: list[str], rows: list[tuple]) -> str:
    """Spark's ``show(truncate=False)`` layout: a boxed, left-aligned grid."""
    cells = [[_show_value(v) for v in row] for row in rows]
    widths = [max([3, len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    rule = "+" + "+".join("-" * w for w in widths) + "+\n"

    def line(values):
        return "|" + "|".join(v.ljust(w) for v, w in zip(values, widths)) + "|\n"

    return rule + line(columns) + rule + "".join(line(r) for r in cells) + rule


def run_duckdb(query: str, lake: Lake, as_of: dict[str | None, AsOf], output_format: str, limit: int,
               out=sys.stdout) -> None:
    import duckdb

    con, notes = duckdb_connection(lake, as_of)
    print_notes(query, notes)
    try:
        relation = con.sql(query)
        if relation is None:  # a statement with no result (SET, CREATE VIEW ...)
            return
        result = relation.limit(limit).to_arrow_table()
    except duckdb.Error as exc:
        raise UsageError(f"bad query: {str(exc).strip().splitlines()[0]}") from None
    import pyarrow as pa

    columns = result.column_names
    rows = [tuple(row.values()) for row in result.to_pylist()] if len(set(columns)) == len(columns) else \
        list(zip(*(col.to_pylist() for col in result.columns)))
    maps = [i for i, f in enumerate(result.schema) if pa.types.is_map(f.type)]
    if maps:  # Arrow gives a map as a list of pairs; an empty one would print as [] where Spark prints {}
        rows = [tuple(dict(v) if i in maps and v is not None else v for i, v in enumerate(row)) for row in rows]
    if output_format == "json":
        for row in rows:
            print(json.dumps({c: _json_value(v) for c, v in zip(columns, row)}, separators=(",", ":"),
                             ensure_ascii=False), file=out)
    else:
        out.write(show_string(columns, rows))


# --- the command -----------------------------------------------------------------------------------

def run_query(query: str, *, lake: str | None = None, engine: str = "spark", output_format: str = "table",
              limit: int = 1000, as_of: list[str] | None = None) -> int:
    """``python -m spark_jobs sql``: run ``query`` with ``engine`` and print the result.

    :raises UsageError: an unknown engine, a bad ``--as-of``, or a query the engine rejects.
    """
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; use one of: {', '.join(ENGINES)}")
    if limit < 0:
        raise UsageError(f"--limit must be >= 0, got {limit}")
    chosen = parse_as_of_args(as_of)
    run = run_spark if engine == "spark" else run_duckdb
    run(query, Lake.at(lake), chosen, output_format, limit)
    return 0
