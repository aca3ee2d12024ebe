"""The Airflow fixtures: the project's DAG folder parsed once, the Airflow environment, one migrated metadata DB per
test session (each module copies it into its own home: its runs stay apart, and the ~5-20 s of ``airflow db
migrate`` are paid once); and the functions the DAG tests share: SQL over a module's lake in the session's Spark,
the parse probe in a fresh interpreter.

Using ``dagbag`` or ``migrated_db`` (or a fixture built on them) is what puts a test in the airflow tier
(tests/helpers/tiers.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.project import PROJECT_ROOT

DAGS_FOLDER = PROJECT_ROOT / "dags"
PARSE_PROBE = Path(__file__).with_name("parse_probe.py")

# What the DAGs and `airflow dags test` need from the Makefile's environment.
AIRFLOW_ENV = ("AIRFLOW_HOME", "AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW_CONN_SPARK_DEFAULT", "PYTHONPATH",
               "PYSPARK_PYTHON", "SPARK_LOCAL_DIRS")


def require_airflow_env() -> None:
    """Fail with the way out when the Makefile's environment is not there."""
    missing = [name for name in AIRFLOW_ENV if not os.environ.get(name)]
    missing += [f"{tool} on PATH" for tool in ("airflow", "spark-submit") if not shutil.which(tool)]
    if missing:
        pytest.fail(f"the Airflow test environment is incomplete ({', '.join(missing)} missing): run the "
                    "tests with `make test` (options: `make test PYTEST_ARGS='tests/dags -k name'`)",
                    pytrace=False)
    if Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).resolve() != DAGS_FOLDER:
        pytest.fail(f"AIRFLOW__CORE__DAGS_FOLDER is {os.environ['AIRFLOW__CORE__DAGS_FOLDER']}, not this "
                    f"project's {DAGS_FOLDER}: run the tests with `make test`", pytrace=False)


@pytest.fixture(scope="session")
def airflow_env() -> None:
    require_airflow_env()


@pytest.fixture(scope="session")
def dagbag(airflow_env):
    """The project's DAG folder parsed in this process; every file is imported (no safe-mode skip)."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_FOLDER), safe_mode=False)


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory, airflow_env) -> Path:
    """An Airflow metadata DB (SQLite) migrated once for the whole session; see :func:`fresh_airflow_home`."""
    home = tmp_path_factory.mktemp("airflow_db_template")
    done = subprocess.run(["airflow", "db", "migrate"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "AIRFLOW_HOME": str(home),
                               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}"})
    assert done.returncode == 0, f"airflow db migrate failed:\n{(done.stdout + done.stderr)[-3000:]}"
    return home / "airflow.db"


def fresh_airflow_home(migrated_db: Path, home: Path) -> Path:
    """``home`` with a copy of the session's freshly migrated DB (no run, connection or variable in it).

    :returns: the copy, the module's own ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` file.
    """
    home.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(migrated_db, home / "airflow.db"))


def lake_sql(spark, lake: Path, sql: str) -> list[dict]:
    """``sql`` over ``lake`` as ``python -m spark_jobs sql --format json`` answers it (the same views, each row
    as its JSON object), in this process's SparkSession instead of a JVM started per query.
    """
    from pyspark.sql import functions as F

    from spark_jobs.driver.sql import register_tables
    from spark_jobs.model.lake import Lake

    register_tables(spark, Lake(Path(lake)))
    frame = spark.sql(sql)
    return [json.loads(row.j) for row in
            frame.select(F.to_json(F.struct("*"), {"ignoreNullFields": "false"}).alias("j")).collect()]


def run_parse_probe(dags_folder: Path) -> dict:
    """Parse ``dags_folder`` in a fresh interpreter with no connections or Variables in the environment.

    :returns: the report of :mod:`tests.helpers.parse_probe` (import errors, DAG ids, lookups, files
        opened, pyspark and spark_jobs modules loaded).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW_VAR_"))}
    done = subprocess.run([sys.executable, str(PARSE_PROBE), str(dags_folder)], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    lines = [line for line in done.stdout.splitlines() if line.startswith("PARSE_PROBE ")]
    assert done.returncode == 0 and lines, f"the parse probe failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("PARSE_PROBE "))
