"""Fixtures shared by the whole suite: one real local SparkSession, the project's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
REAL_CLOUDTRAIL = PROJECT_ROOT.parent / "shared" / "data" / "real" / "cloudtrail"
REQUIRED_ENV = ("AIRFLOW_HOME", "PYSPARK_PYTHON", "SPARK_LOCAL_DIRS")


def pytest_configure(config):
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        pytest.exit(f"the test environment is not set ({', '.join(missing)} missing): run the tests "
                    "with `make test` (pass options as `make test PYTEST_ARGS='-k name'`)", returncode=4)


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession for the in-process tests (a start costs ~10 s)."""
    from spark_jobs.session import build_session

    session = build_session("tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def real_cloudtrail() -> Path:
    """The real CloudTrail samples beside the project (CI always has them)."""
    if not REAL_CLOUDTRAIL.is_dir():
        pytest.skip(f"real CloudTrail samples not found at {REAL_CLOUDTRAIL} (they sit beside the "
                    "project in ../shared/data/real; CI always has them)")
    return REAL_CLOUDTRAIL


def run_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m spark_jobs ARGS`` in a subprocess, as a person would run it."""
    return subprocess.run([sys.executable, "-m", "spark_jobs", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})
