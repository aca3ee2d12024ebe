"""Fixtures shared by the whole suite: one real local SparkSession, one real Kafka broker, the project's environment.

Also the suite's tiers: a test's tier is where it lives (tests/helpers/tiers.py: the folders that mirror the
parts which start no JVM and no Airflow are the fast tier, marked ``fast``); ``pytest --fast`` (``make test-fast``)
runs only them, under a guard that fails any of their tests which imports pyspark or starts a JVM, spark-submit or
Airflow (:mod:`tests.helpers.fast_tier`). ``make test`` runs everything, on two pytest-xdist workers
(``--dist loadfile``): a test module's tests run on one worker, so its module fixtures are built once; each worker
is one test session with its own SparkSession (and its own Kafka broker when its modules need one).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from spark_jobs.launch.jit import SHORT_LIVED_OPTIONS
from tests.helpers import cpu_report
from tests.helpers.project import PLUGINS, REAL_CLOUDTRAIL
from tests.helpers.tiers import in_fast_tier

# The suite's fixtures, by what they start: tests/helpers/<part>_fixtures.py.
pytest_plugins = ("tests.helpers.spark_fixtures", "tests.helpers.kafka_fixtures", "tests.helpers.s3_fixtures",
                  "tests.helpers.airflow_fixtures")
# The plugins folder on sys.path, as Airflow puts it there (``import streaming.<module>``).
if str(PLUGINS) not in sys.path:
    sys.path.insert(0, str(PLUGINS))
REQUIRED_ENV = ("AIRFLOW_HOME", "PYSPARK_PYTHON", "SPARK_LOCAL_DIRS")
# Every Spark driver JVM the suite starts (its own SparkSession, every spark-submit of a test, of Airflow's tasks
# and of the supervisor) reads $SPARK_SUBMIT_OPTS. A test's JVM lives for seconds to a few minutes on kilobytes
# of data, where the JIT's optimizing compiler (C2) costs CPU it never pays back, and the suite is CPU-bound on
# 2 cores. C1 only, measured on a quiet machine: a small catch-up run (7 batches) 81-93 -> 58 CPU-seconds;
# the on-disk kill -9 module of the time (now in live_path/test_random_kills.py) 190 -> 120 CPU-seconds,
# 103 -> 87 s; the whole suite 38 -> 33 min. The one JVM where it costs time is a session's own on heavy
# in-process queries (test_time_bound.py + test_one_pass.py: 142 -> 130 CPU-seconds but 78 -> 94 s), a wash on a
# busy machine. The code and the plans are the same; only how the JVM compiles them differs; the options are the
# project's short-lived drivers' own (spark_jobs/launch/jit.py), with the code cache C1 alone would shrink to 48 MB
# kept at 240 MB (a session JVM of the suite lives for half an hour). (The serial collector
# was tried too: it changes the memory the JVM reports, which a test of Spark's own message reads, for no clear
# gain.) A value already set is kept.
# The same JVMs evaluate Spark SQL's expressions interpreted (whole-stage code generation off, expressions without
# generated classes: `spark.*` system properties are SparkConf defaults, so a job's --conf still wins): profiled
# with JFR, a third of a session JVM's CPU on tests/spark_jobs/driver/write/test_delta_tables.py went to generating and
# compiling (Janino) a class per plan for batches of a few rows. Measured on a quiet machine: that module's JVM
# 145 -> 89 CPU-seconds (109 -> 74 s); that kill -9 module 136 -> 114; the 30,481 real records
# (test_real_cloudtrail_samples.py) the same. Both modes are Spark's own and give the same rows (Spark falls back
# to the interpreted one whenever generated code fails to compile); `make demo`, `make airflow` and the benchmark
# keep Spark's defaults.
TEST_JVM_OPTIONS = (f"{SHORT_LIVED_OPTIONS} -Dspark.sql.codegen.wholeStage=false"
                    " -Dspark.sql.codegen.factoryMode=NO_CODEGEN")


TESTS = Path(__file__).resolve().parent
# The modules that take 40 s or more, longest first (their wall times in a full run on 2 workers, 2026-11-28; the
# `--cpu-report` lines have them): `make test` hands modules to its two workers in collection order
# (--no-loadscope-reorder), and these go first, so that no long module starts last while the other worker idles.
# A module missing here only runs later; a stale list only costs time.
LONGEST_FIRST = (
    "dags/test_rollout_under_airflow.py",  # three rollouts under a real scheduler: 8.5-12 min at load 16-21
    "spark_jobs/supervision/test_rollout.py",  # four rollouts, real drivers: 5.6-7.3 min at load 4-12
    "dags/test_standby_take_over.py",
    "spark_jobs/supervision/test_standby.py",
    "dags/test_continuous_supervision.py",
    "dags/test_continuous_from_s3.py",
    "spark_jobs/live_path/test_random_kills.py",
    "dags/test_backfill_dag_run.py",
    "spark_jobs/supervision/test_supervised_spark.py",
    "dags/test_oncall_dag_run.py",
    "dags/test_catchup_on_data.py",
    "spark_jobs/object_store/test_writers_on_s3.py",
    "dags/test_standalone_cluster.py",
    "spark_jobs/driver/write/test_delta_tables.py",
    "spark_jobs/driver/write/test_one_pass.py",
    "spark_jobs/jobs/test_real_cowrie_samples.py",
    "spark_jobs/jobs/test_ocsf_real_samples.py",  # ~90 s and ~50 s alone on a quiet machine
    "spark_jobs/jobs/test_ocsf_kill.py",
    "dags/test_oncall_approval_run.py",
    "spark_jobs/supervision/test_take_over.py",
    "dags/test_backfill_form.py",
    "spark_jobs/object_store/test_queue_kills_on_s3.py",
    "spark_jobs/driver/test_lake_tools.py",
    "spark_jobs/object_store/test_crash_recovery_on_s3.py",
    "spark_jobs/driver/test_preflight.py",  # 117 s at load ~10
    "spark_jobs/cli/test_cli.py",
    "spark_jobs/test_benchmark.py",
    "dags/test_catchup_airflow_backfill.py",
    "spark_jobs/supervision/test_lease_in_the_runner.py",
    "spark_jobs/object_store/test_real_samples_on_s3.py",
    "spark_jobs/cli/test_backfill_overlap.py",
    "spark_jobs/object_store/test_notifications_on_s3.py",
    "spark_jobs/jobs/test_alerts_crash_recovery.py",
    "spark_jobs/jobs/test_cloudtrail_activity.py",
    "spark_jobs/live_path/test_time_bound.py",
    "spark_jobs/jobs/test_cloudtrail_etl_end_to_end.py",
    "dags/test_lake_maintenance_dag_run.py",
    "spark_jobs/kafka/test_cloudtrail_kafka_stream.py",
    "dags/test_catchup_dag_run.py",
    "spark_jobs/object_store/test_lake_commands_on_s3.py",
    "dags/test_kafka_catchup_dag_run.py",
    "spark_jobs/jobs/test_real_cloudtrail_samples.py",
    "spark_jobs/driver/test_landing_source.py",
    "spark_jobs/driver/test_sql_engines.py",
    "spark_jobs/jobs/test_cloudtrail_alerts.py",
    "plugins/test_health_page.py",
    "spark_jobs/driver/test_progress_history.py",
)


def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true",
                     help="run only the fast tier (the folders of tests/helpers/tiers.py: no JVM, no Airflow), guarded")
    cpu_report.add_option(parser)


def pytest_configure(config):
    os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)
    if config.getoption("--fast"):
        from tests.helpers.fast_tier import install_guard

        install_guard(config)
    cpu_report.install(config)
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        pytest.exit(f"the test environment is not set ({', '.join(missing)} missing): run the tests "
                    "with `make test` (pass options as `make test PYTEST_ARGS='-k name'`)", returncode=4)


def _under_tests(path: Path) -> str:
    """``path`` relative to tests/ (as tests/helpers/tiers.py and LONGEST_FIRST name modules), or "" outside it."""
    path = path.resolve()
    return path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else ""


def _in_fast_tier(path: Path) -> bool:
    """The fast tier is where a test lives (tests/helpers/tiers.py FAST_FOLDERS)."""
    relative = _under_tests(path)
    return bool(relative) and in_fast_tier(relative)


def pytest_ignore_collect(collection_path, config):
    """Under ``--fast``, other test modules are not even imported (their imports may start pyspark)."""
    if config.getoption("--fast") and collection_path.name.startswith("test_") and collection_path.suffix == ".py":
        return not _in_fast_tier(collection_path) or None
    return None


def _module_rank(item) -> int:
    name = _under_tests(item.path)
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    """The longest modules first (:data:`LONGEST_FIRST`; the order within a module is kept); mark the fast tier's
    tests ``fast``; under ``--fast``, deselect every other test."""
    items.sort(key=_module_rank)  # stable
    fast, other = [], []
    for item in items:
        in_tier = _in_fast_tier(item.path)
        if in_tier:
            item.add_marker(pytest.mark.fast)
        (fast if in_tier else other).append(item)
    if config.getoption("--fast") and other:
        config.hook.pytest_deselected(items=other)
        items[:] = fast


@pytest.fixture(scope="session")
def real_cloudtrail() -> Path:
    """The real CloudTrail samples beside the project (CI always has them)."""
    if not REAL_CLOUDTRAIL.is_dir():
        pytest.skip(f"real CloudTrail samples not found at {REAL_CLOUDTRAIL} (they sit beside the "
                    "project in ../shared/data/real; CI always has them)")
    return REAL_CLOUDTRAIL
