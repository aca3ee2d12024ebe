"""Where the project and its real sample data are, and the project's command line run as a person runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Airflow puts the plugins folder on sys.path (``import streaming.<module>``); tests/conftest.py does the same.
PLUGINS = PROJECT_ROOT / "plugins"
# The real samples beside the project (../shared/data/real); CI always has them.
REAL_DATA = PROJECT_ROOT.parent / "shared" / "data" / "real"
REAL_CLOUDTRAIL = REAL_DATA / "cloudtrail"


def run_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m spark_jobs ARGS`` in a subprocess, as a person would run it."""
    return subprocess.run([sys.executable, "-m", "spark_jobs", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})
