"""DuckDB doing the job's work on one machine: the alternative a user with one box might weigh.

Parse every gzipped CloudTrail delivery, one row per record, keep one row per ``eventID``, and write
``date``-partitioned Parquet, in two ways:

- ``explicit``: the ``Records`` array read with an explicit schema of the 13 columns most queries use
  (what the issue's 4.3 s figure measured);
- ``detected``: the schema detected by DuckDB from every record of every file (a sample misses keys that
  only some records carry, and DuckDB then refuses the file), every field kept (nested fields as structs,
  not flattened as the job flattens them).

Neither writes Delta, quarantines a bad record or commits exactly once; like bare Spark, it is a
yardstick, not an equivalent.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

EXPLICIT_FIELDS = {
    "eventID": "VARCHAR", "eventTime": "VARCHAR", "eventSource": "VARCHAR", "eventName": "VARCHAR",
    "awsRegion": "VARCHAR", "sourceIPAddress": "VARCHAR", "userAgent": "VARCHAR", "errorCode": "VARCHAR",
    "errorMessage": "VARCHAR", "recipientAccountId": "VARCHAR", "readOnly": "BOOLEAN", "eventType": "VARCHAR",
}
MAX_OBJECT_BYTES = 256 << 20  # one delivery is one JSON object: {"Records": [...]}


def _files(landing: Path) -> str:
    return str(landing / "**" / "*.json.gz")


def _explicit_sql(landing: Path, out: Path) -> str:
    record = ", ".join(f"{name} {kind}" for name, kind in EXPLICIT_FIELDS.items())
    columns = ", ".join(f"r.{name}" for name in EXPLICIT_FIELDS if name != "eventTime")
    return f"""
        COPY (
            SELECT DISTINCT ON (eventID) * FROM (
                SELECT CAST(r.eventTime AS TIMESTAMP) AS eventTime, {columns}, CAST(r.eventTime AS DATE) AS date
                FROM (SELECT unnest(Records) AS r FROM read_json('{_files(landing)}',
                      columns = {{'Records': 'STRUCT({record})[]'}}, format = 'auto',
                      maximum_object_size = {MAX_OBJECT_BYTES}))))
        TO '{out}' (FORMAT parquet, PARTITION_BY (date))"""


def _detected_sql(landing: Path, out: Path) -> str:
    return f"""
        COPY (
            SELECT DISTINCT ON (r.eventID) unnest(r), CAST(r.eventTime AS DATE) AS date
            FROM (SELECT unnest(Records) AS r FROM read_json('{_files(landing)}', format = 'auto',
                  maximum_object_size = {MAX_OBJECT_BYTES}, sample_size = -1, maximum_sample_files = -1)))
        TO '{out}' (FORMAT parquet, PARTITION_BY (date))"""


def run_duckdb(landing: Path, out: Path, way: str, threads: int) -> dict:
    """One run of ``way`` (``explicit`` or ``detected``); its seconds, rows and columns written.

    :param threads: DuckDB's threads (the cores Spark has).
    """
    import duckdb

    shutil.rmtree(out, ignore_errors=True)
    sql = (_explicit_sql if way == "explicit" else _detected_sql)(landing, out)
    with duckdb.connect() as con:
        con.execute(f"SET threads = {threads}")
        con.execute("SET enable_progress_bar = false")  # the benchmark's report is on stdout
        started = time.monotonic()
        con.execute(sql)
        seconds = time.monotonic() - started
        counted = con.execute(f"SELECT count(*), count(DISTINCT eventID) FROM read_parquet('{out}/**/*.parquet', "
                              "hive_partitioning = true)").fetchone()
        columns = len(con.execute(f"SELECT * FROM read_parquet('{out}/**/*.parquet', hive_partitioning = true) "
                                  "LIMIT 0").description)
    return {"seconds": round(seconds, 3), "rows": counted[0], "distinct_event_ids": counted[1], "columns": columns}
