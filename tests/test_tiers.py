"""The fast tier is chosen by where a test lives (tests/helpers/tiers.py), and every JVM-free test module is in it.

A module outside the fast tier must show why, in its source (tests/helpers/tiers.py ``needs_of``: a Spark, Kafka or
Airflow fixture, an import that brings pyspark or starts a JVM or Airflow, a command that starts a driver), or by
importing pyspark when it is imported, or say why in ``NOT_IN_THE_FAST_TIER``. The other way round, a fast-tier test
that imports pyspark or starts a JVM or Airflow fails under ``make test-fast`` (tests/helpers/fast_tier.py, proven by
tests/test_fast_tier_guard.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.project import PLUGINS, PROJECT_ROOT
from tests.helpers.tiers import declared_not_fast, in_fast_tier, needs_of

TESTS = PROJECT_ROOT / "tests"
IMPORTS_PYSPARK = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("probe", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
print("pyspark" in sys.modules)
"""


def _imports_pyspark(path: Path) -> bool:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), str(PLUGINS)])}
    done = subprocess.run([sys.executable, "-c", IMPORTS_PYSPARK, str(path)], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip() == "True"


def jvm_free_outside_the_fast_tier(tests: Path) -> list[str]:
    """The test modules under ``tests`` outside the fast tier that show no need of a JVM or an Airflow."""
    found = []
    for path in sorted(tests.rglob("test_*.py")):
        relative = path.relative_to(tests).as_posix()
        if in_fast_tier(relative) or needs_of(path) or declared_not_fast(path):
            continue
        if not _imports_pyspark(path):
            found.append(relative)
    return found


def test_every_jvm_free_test_module_is_in_the_fast_tier():
    assert jvm_free_outside_the_fast_tier(TESTS) == [], (
        "these modules need no JVM and no Airflow: move each into a fast folder (tests/helpers/tiers.py "
        "FAST_FOLDERS) that mirrors what it tests, or say why it stays out in NOT_IN_THE_FAST_TIER")


def test_registry_tests_are_fast_and_the_fast_folders_mirror_the_tree():
    assert in_fast_tier("spark_jobs/registry/test_registry.py")
    assert in_fast_tier("test_layers.py") and in_fast_tier("spark_jobs/control/discovery/test_discovery_planner.py")
    assert not in_fast_tier("spark_jobs/driver/test_job_modules.py") and not in_fast_tier("dags/test_catchup_dag_run.py")
    from tests.helpers.tiers import FAST_FOLDERS

    for folder in FAST_FOLDERS:
        assert (TESTS / folder).is_dir(), folder


def test_the_check_names_a_jvm_free_module_outside_the_fast_tier_and_only_it(tmp_path):
    tests = tmp_path / "tests"
    for folder in ("spark_jobs/model", "spark_jobs/driver", "dags"):
        (tests / folder).mkdir(parents=True)
    (tests / "spark_jobs/model/test_fast.py").write_text("def test_a():\n    assert 1 + 1 == 2\n")
    (tests / "spark_jobs/driver/test_plain.py").write_text("def test_a():\n    assert 1 + 1 == 2\n")
    (tests / "spark_jobs/driver/test_session.py").write_text("def test_a(spark):\n    assert spark\n")
    (tests / "spark_jobs/driver/test_types.py").write_text("from pyspark.sql.types import StringType\n")
    (tests / "spark_jobs/driver/test_waits.py").write_text('NOT_IN_THE_FAST_TIER = "waits 20 s"\n')
    (tests / "dags/test_run.py").write_text('import subprocess\nsubprocess.run(["airflow", "dags", "test", "x"])\n')
    assert jvm_free_outside_the_fast_tier(tests) == ["spark_jobs/driver/test_plain.py"]
