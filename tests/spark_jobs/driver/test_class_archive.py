"""The driver JVM's class archive: made at set-up, mapped by every Spark start, harmless when unusable."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from spark_jobs.launch.class_archive import (ARCHIVE_ENV, DEFAULT_JAVA_OPTIONS_CONF, QUIET, archive_path, check,
                                     java_options)
from spark_jobs.launch.jars import DELTA_CONF
from spark_jobs.launch.jit import SHORT_LIVED_OPTIONS
from spark_jobs.launch.submit import SparkConnection, Submission, spark_submit_conf
from tests.helpers.project import PROJECT_ROOT


def test_every_spark_submit_of_the_project_carries_the_archive_options():
    assert java_options() == f"-XX:SharedArchiveFile={archive_path()} {QUIET}"
    assert spark_submit_conf() == {**DELTA_CONF, DEFAULT_JAVA_OPTIONS_CONF: f"{java_options()} {SHORT_LIVED_OPTIONS}"}
    assert spark_submit_conf(long_running=True) == {**DELTA_CONF, DEFAULT_JAVA_OPTIONS_CONF: java_options()}
    options = Submission.of(["list"], name="list").argv(SparkConnection("local[1]"))
    assert options[options.index(f"{DEFAULT_JAVA_OPTIONS_CONF}={java_options()} {SHORT_LIVED_OPTIONS}") - 1] == "--conf"


def test_the_archive_made_at_set_up_is_mapped_by_a_driver_jvm():
    # -Xshare:on: the JVM refuses to start unless it maps the archive.
    assert check() is None


def test_the_test_sessions_driver_jvm_was_started_with_the_archive(spark):
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive_path()}" in arguments


def test_a_damaged_archive_is_refused_by_the_check(tmp_path):
    damaged = tmp_path / "cut.jsa"
    with archive_path().open("rb") as source, damaged.open("wb") as out:
        out.write(source.read(20_000_000))  # as a dump cut short by a full disk would leave it
    problem = check(damaged)
    assert problem is not None and problem.startswith(f"a driver JVM could not map the class archive {damaged}")


@pytest.mark.parametrize("archive", ["missing", "another classpath"])
def test_a_jvm_that_cannot_use_the_archive_starts_silently(tmp_path, archive):
    java = shutil.which("java")
    path = tmp_path / "missing.jsa" if archive == "missing" else archive_path()
    done = subprocess.run([java, f"-XX:SharedArchiveFile={path}", *QUIET.split(), "-version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "archive" not in (done.stdout + done.stderr).lower()
    assert (done.stdout + done.stderr).lstrip().startswith("openjdk version")


def test_the_archive_can_be_switched_off_or_moved(monkeypatch, tmp_path):
    default = archive_path()
    monkeypatch.setenv(ARCHIVE_ENV, "off")
    assert java_options() == "" and archive_path() == default
    assert spark_submit_conf(long_running=True) == DELTA_CONF  # no option for the archive at all
    assert spark_submit_conf() == {**DELTA_CONF, DEFAULT_JAVA_OPTIONS_CONF: SHORT_LIVED_OPTIONS}  # the JIT's only
    moved = tmp_path / "elsewhere.jsa"
    monkeypatch.setenv(ARCHIVE_ENV, str(moved))
    assert java_options() == f"-XX:SharedArchiveFile={moved} {QUIET}"
    assert check() == f"no class archive at {moved}: run `python -m spark_jobs.launch.class_archive build`"
    monkeypatch.setenv(ARCHIVE_ENV, str(tmp_path / "with space" / "a.jsa"))
    assert java_options() == ""  # Spark splits Java options on whitespace


def test_an_unknown_command_is_the_usage_and_exit_2():
    done = subprocess.run([sys.executable, "-m", "spark_jobs.launch.class_archive", "nope"], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("usage: python -m spark_jobs.launch.class_archive [-h] [{build,check}]")
