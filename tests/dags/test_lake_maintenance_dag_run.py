"""lake_maintenance run for real by ``airflow dags test``: per table, spark-submit of ``lake optimize``
then ``lake vacuum``.

The cloudtrail_etl tables are small Delta tables of three appends each (written with delta-rs, so no
JVM is needed to set up) in a lake in tmp_path; the analytics jobs' tables do not exist yet, so their
tasks are skipped without a spark-submit. Airflow's home holds a copy of the session's freshly
migrated metadata DB in tmp_path, as in test_catchup_dag_run.py. The run spark-submits four times (the JVM starts dominate).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers.airflow_fixtures import fresh_airflow_home, require_airflow_env
from tests.helpers.project import PROJECT_ROOT

DAG_ID = "lake_maintenance"
TABLES = {"cloudtrail_events": ("eventID", "date"), "cloudtrail_quarantine": ("source_file", "ingest_date")}


def tail(done: subprocess.CompletedProcess, lines: int = 60) -> str:
    return "\n".join((done.stdout + done.stderr).splitlines()[-lines:])


@pytest.fixture(scope="module")
def maintained(tmp_path_factory, migrated_db):
    """The lake before and after one ``airflow dags test lake_maintenance``."""
    import datetime

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    require_airflow_env()
    root = tmp_path_factory.mktemp("lake_maintenance_dag")
    lake, home = root / "lake", root / "airflow_home"
    fresh_airflow_home(migrated_db, home)
    keys = {}
    for table, (key, day) in TABLES.items():
        keys[table] = []
        for batch in range(3):  # three commits of two files each (one per day), the first also one of a third day
            rows = 5 if batch == 0 else 4
            ids = [f"{table}-{batch}-{i}" for i in range(rows)]
            days = [datetime.date(2024, 3, 1 + i % 2 if i < 4 else 3) for i in range(rows)]
            columns = {key: ids, day: days}
            if table == "cloudtrail_events":  # the column lake optimize Z-orders it by (the registry's zorder_by)
                columns["eventTime"] = [datetime.datetime.combine(d, datetime.time(10, batch, i), datetime.UTC)
                                        for i, d in enumerate(days)]
            write_deltalake(str(lake / "tables" / table), pa.table(columns), mode="append", partition_by=[day])
            keys[table] += ids
    before = {t: sorted(DeltaTable(str(lake / "tables" / t)).file_uris()) for t in TABLES}

    env = {**os.environ, "AIRFLOW_HOME": str(home),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
           "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO", "LAKE_ROOT": str(lake)}
    done = subprocess.run(["airflow", "dags", "test", DAG_ID], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, f"airflow dags test {DAG_ID} failed (exit {done.returncode}):\n{tail(done)}"
    return {"lake": lake, "keys": keys, "before": before, "output": done.stdout + done.stderr, "home": home}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_each_table_is_compacted_then_vacuumed_with_its_rows_unchanged(maintained, table):
    from deltalake import DeltaTable

    path = str(maintained["lake"] / "tables" / table)
    delta = DeltaTable(path)
    operations = [c["operation"] for c in reversed(delta.history())]
    assert operations == ["WRITE", "WRITE", "WRITE", "OPTIMIZE", "VACUUM START", "VACUUM END"]
    # `lake optimize --changed-only`: the two days with three small files each become one file each; the day
    # with one file is left as it was (Delta's Z-order would rewrite it too).
    before, after = maintained["before"][table], delta.file_uris()
    assert (len(before), len(after)) == (7, 3)
    untouched = [uri for uri in before if "=2024-03-03" in uri]
    assert len(untouched) == 1 and untouched[0] in after
    key = TABLES[table][0]
    assert sorted(delta.to_pyarrow_table(columns=[key]).column(0).to_pylist()) == sorted(maintained["keys"][table])
    # The registry's 168-hour retention: the compacted files are kept, version 0 still reads.
    assert DeltaTable(path, version=0).to_pyarrow_table().num_rows == 5


def test_the_tables_no_job_has_written_are_skipped_without_a_spark_submit(maintained):
    import sqlite3

    from spark_jobs.registry import JOBS

    with sqlite3.connect(maintained["home"] / "airflow.db") as db:
        states = dict(db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = ?", (DAG_ID,)))
    tables = [table.name for job in JOBS.values() for table in job.tables]
    assert states == {f"{step}_{table}": "success" if table in TABLES else "skipped"
                      for table in tables for step in ("optimize", "vacuum")}
    assert not (maintained["lake"] / "tables" / "word_counts").exists()
