"""The fast tier's guard (tests/helpers/fast_tier.py) fails a test that imports pyspark or starts a JVM or Airflow.

A pytest run in a child process over three small tests, with the guard installed as ``pytest --fast``
installs it: the one that touches nothing passes; the one that imports pyspark (and swallows the
ImportError) and the ones that run ``java`` or ``airflow`` fail, each naming what it did.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers.project import PROJECT_ROOT

CONFTEST = """
from tests.helpers.fast_tier import install_guard


def pytest_configure(config):
    install_guard(config)
"""
TESTS = """
import subprocess


def test_plain():
    assert sum([1, 2]) == 3


def test_imports_pyspark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pass


def test_runs_java():
    subprocess.run(["java", "-version"], capture_output=True)


def test_runs_airflow():
    subprocess.run(["airflow", "version"], capture_output=True)
"""


def test_the_guard_fails_each_test_that_imports_pyspark_or_starts_a_jvm_or_airflow(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_probe.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    out = done.stdout + done.stderr
    assert "3 failed, 1 passed" in out, out[-3000:]
    assert "test_imports_pyspark is in the fast tier but did, in its call: import pyspark" in out, out[-3000:]
    assert "test_runs_java is in the fast tier but did, in its call: started: java -version" in out, out[-3000:]
    assert "test_runs_airflow is in the fast tier but did, in its call: started: airflow version" in out, out[-3000:]
