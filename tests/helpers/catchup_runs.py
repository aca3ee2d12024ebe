"""A catch-up DAG's runs by ``airflow dags test`` in a module's own Airflow home and lake (tmp_path).

Used by the catch-up, backfill and Kafka catch-up DAG tests and by the standalone cluster's: a copy of the session's
freshly migrated metadata DB (tests/helpers/airflow_fixtures.py), the Makefile's environment except for the lake,
the input and Airflow's home.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

from tests.helpers.airflow_fixtures import fresh_airflow_home, lake_sql
from tests.helpers.project import PROJECT_ROOT

DAG_ID = "cloudtrail_etl_catchup"
TABLES = ("cloudtrail_events", "cloudtrail_quarantine")


def table_files(lake: Path) -> dict[str, int]:
    """Every file of every table (data files and the Delta log) with its size."""
    return {str(p.relative_to(lake)): p.stat().st_size
            for table in TABLES for p in sorted((lake / "tables" / table).rglob("*")) if p.is_file()}


def tail(done: subprocess.CompletedProcess, lines: int = 60) -> str:
    return "\n".join((done.stdout + done.stderr).splitlines()[-lines:])


class CatchupRuns:
    """A landing folder, a lake and an Airflow home in tmp_path, and the commands run against them."""

    def __init__(self, root: Path, migrated_db: Path) -> None:
        self.landing, self.lake, self.home = root / "landing", root / "lake", root / "airflow_home"
        fresh_airflow_home(migrated_db, self.home)
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            # INFO shows the spark-submit command and the job's output in a failure's tail.
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "LAKE_ROOT": str(self.lake),
            "CLOUDTRAIL_ETL_INPUT": str(self.landing),
        }

    def run(self, *command: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(list(command), cwd=PROJECT_ROOT, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def dags_test(self) -> subprocess.CompletedProcess:
        return self.run("airflow", "dags", "test", DAG_ID)

    def query(self, spark, sql: str) -> list[dict]:
        """``sql`` over the lake as ``python -m spark_jobs sql --format json`` answers it (in ``spark``)."""
        return lake_sql(spark, self.lake, sql)

    def asset_events(self) -> list[tuple[str, str]]:
        """(asset name, source run id) of every asset event in the run's metadata DB."""
        with sqlite3.connect(self.home / "airflow.db") as db:
            return sorted(db.execute("SELECT a.name, e.source_run_id FROM asset_event e "
                                     "JOIN asset a ON a.id = e.asset_id WHERE e.source_dag_id = ?", (DAG_ID,)))

    def run_ids(self) -> list[str]:
        with sqlite3.connect(self.home / "airflow.db") as db:
            return [r[0] for r in db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id", (DAG_ID,))]
