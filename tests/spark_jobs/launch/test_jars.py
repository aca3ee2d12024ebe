"""``python -m spark_jobs.launch.jars``'s command line: ``fetch``, ``check`` (the default) and ``paths``, their
outputs and exit codes. (A fetch from Maven Central: ``tests/spark_jobs/driver/test_lake_tools.py``.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spark_jobs.launch.jars import JARS, JARS_DIR_ENV, PINNED, problems, spark_jars
from tests.helpers.project import PROJECT_ROOT


def jars(*args: str, jars_dir=None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({JARS_DIR_ENV: str(jars_dir)} if jars_dir else {})}
    return subprocess.run([sys.executable, "-m", "spark_jobs.launch.jars", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_paths_prints_the_jars_for_spark_submit():
    done = jars("paths")
    assert (done.returncode, done.stdout, done.stderr) == (0, spark_jars() + "\n", "")


@pytest.mark.parametrize("args", [["check"], []], ids=["check", "no_command"])
def test_check_names_each_missing_jar_and_exits_1(tmp_path, args):
    done = jars(*args, jars_dir=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines == [f"error: {line}" for line in problems(tmp_path)] and len(lines) == len(PINNED) + 1  # + the log store
    assert lines[0] == f"error: the jar {JARS[0].coordinates} is missing ({tmp_path / JARS[0].file_name} does not exist)"


def test_paths_without_the_jars_is_one_error_line_and_exit_2(tmp_path):
    done = jars("paths", jars_dir=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"error: the jar {JARS[0].coordinates} is missing") and done.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [["nope"], ["check", "extra"]], ids=["unknown_command", "extra_argument"])
def test_anything_else_is_the_usage_and_exit_2(args):
    done = jars(*args)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("usage: python -m spark_jobs.launch.jars [-h] [{fetch,check,paths}]")
