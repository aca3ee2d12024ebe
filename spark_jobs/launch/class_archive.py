"""A class-data archive of the Spark driver's JVM, made once at set-up, so that every Spark start is faster.

Usage::

    python -m spark_jobs.launch.class_archive build    # make setup runs this (after the jars): ~1 minute
    python -m spark_jobs.launch.class_archive check    # exit 0 if a driver JVM maps the archive

A Spark driver spends most of its start loading and verifying the same ~13,000 classes (Spark, Scala,
Delta, Hadoop) every time: on 2 cores a session takes ~11 s to build and its first job ~5 s more. The
JDK's own answer is a dynamic AppCDS archive (JDK 13+): one run with ``-XX:ArchiveClassesAtExit``
writes the classes it loaded, parsed and verified, and every later JVM started with
``-XX:SharedArchiveFile`` maps them instead (measured here: session 7.5 s, first job 3.1 s). Neither
Spark nor pyspark makes such an archive, hence this module. The training run is the project's own
work in little: an available-now ``cloudtrail_etl`` run on a few generated files (file source,
Python workers, JSON parsing, Delta MERGE and appends, progress history) and a Delta query. It is
set-up tooling, not product: ``tools/class_archive_training.py``, spark-submitted by its path (this
module imports neither it nor the driver).

Every Spark start of the project passes :func:`java_options` as ``spark.driver.defaultJavaOptions``
(spark-submit's ``--conf`` from :func:`spark_jobs.launch.submit.spark_submit_conf`, and the local
SparkSession builder), so a user's own ``spark.driver.extraJavaOptions`` still apply. The options
are safe without the archive: the JVM ignores an archive that is missing, or that a different JDK,
classpath or jar file made, and ``-Xlog:cds=off`` keeps that silent; such a start is only slower.
The archive is written to a temporary name, mapped once by a test JVM, then renamed into place (so
running drivers keep the one they mapped): a damaged archive makes the JDK 17 JVM that maps it crash
at start ("A fatal error has been detected", in ``crc32_z``), even without ``-Xshare:on``. If that is
ever seen, ``python -m spark_jobs.launch.class_archive check`` says so; delete the file (or build it again).

``$SPARK_JOBS_CLASS_ARCHIVE`` moves the archive (a path) or switches it off (``off``: no Spark start of
the project maps it; the benchmark's ``jvm_start`` part compares both).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spark_jobs.launch.jars import DELTA_CONF, jars_dir, spark_submit_jars
from spark_jobs.model.lake import PROJECT_ROOT

ARCHIVE_NAME = "spark-driver-classes.jsa"
ARCHIVE_ENV = "SPARK_JOBS_CLASS_ARCHIVE"
OFF = "off"
DEFAULT_JAVA_OPTIONS_CONF = "spark.driver.defaultJavaOptions"
# Without these, a JVM that cannot use the archive (another JDK, a changed jar) warns on every start.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
TRAINING_TIMEOUT_SECONDS = 900
# The training workload: set-up tooling, spark-submitted by path (``python <it> WORKDIR`` under spark-submit).
TRAINING_SCRIPT = PROJECT_ROOT / "tools" / "class_archive_training.py"


def archive_path() -> Path:
    """Where the archive lives: ``$SPARK_JOBS_CLASS_ARCHIVE`` when it names a path, else beside the pinned
    jars (git-ignored), as it is made from them."""
    setting = os.environ.get(ARCHIVE_ENV, "").strip()
    return Path(setting).expanduser() if setting and not switched_off() else jars_dir() / ARCHIVE_NAME


def switched_off() -> bool:
    """Whether ``$SPARK_JOBS_CLASS_ARCHIVE`` is ``off``: Spark starts then do not map the archive."""
    return os.environ.get(ARCHIVE_ENV, "").strip().lower() == OFF


def java_options() -> str:
    """The driver JVM options that map the archive (no I/O: safe while Airflow parses DAG files).

    Empty when the archive is switched off (:func:`switched_off`) or its path holds whitespace (Spark
    splits Java options on it).
    """
    path = archive_path()
    return "" if switched_off() or any(c.isspace() for c in str(path)) else _mapping_options(path)


def _mapping_options(path: Path) -> str:
    """The JVM options that map the archive at ``path``, quietly when it cannot be used."""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def build(timeout: float = TRAINING_TIMEOUT_SECONDS) -> Path:
    """Make the archive: one spark-submit of the training run (:data:`TRAINING_SCRIPT`), with the JVM told to
    archive at exit.

    :returns: the archive's path.
    :raises RuntimeError: naming what failed (the spark-submit's last lines), when no archive was written.
    """
    target = archive_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{ARCHIVE_NAME}.{os.getpid()}")
    spark_submit = shutil.which("spark-submit")
    if spark_submit is None:
        raise RuntimeError("spark-submit is not on PATH: run this inside the project's environment (make setup)")
    if not TRAINING_SCRIPT.is_file():
        raise RuntimeError(f"the training run {TRAINING_SCRIPT} is not there: the archive is made in a full checkout")
    with tempfile.TemporaryDirectory(prefix="class-archive-", dir=target.parent) as workdir:
        conf = [arg for key, value in DELTA_CONF.items() for arg in ("--conf", f"{key}={value}")]
        command = [spark_submit, "--master", "local[2]", "--name", "class-archive",
                   "--driver-java-options", f"-XX:ArchiveClassesAtExit={partial} {QUIET}",
                   "--jars", spark_submit_jars(), *conf, str(TRAINING_SCRIPT), workdir]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": _with_project(os.environ.get("PYTHONPATH"))})
        if done.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise RuntimeError(f"the training run for the class archive failed (exit {done.returncode}):\n{tail}")
    # A damaged archive (a dump cut short by a full disk) crashes the JVM that maps it: only one that a
    # JVM has mapped goes in place.
    problem = check(partial)
    if problem:
        partial.unlink(missing_ok=True)
        raise RuntimeError(problem)
    os.replace(partial, target)
    print(f"class archive {target}: {target.stat().st_size / 1e6:.0f} MB, made in {time.monotonic() - started:.0f} s")
    return target


def check(path: Path | None = None, timeout: float = 300) -> str | None:
    """Whether a driver JVM started as the project starts them maps the archive at ``path`` (default:
    :func:`archive_path`).

    Starts ``spark-submit`` with the archive's options and ``-Xshare:on`` (the JVM refuses to start
    when it cannot map the archive) on a script that only prints.

    :returns: None when it does, else what went wrong.
    """
    path = path or archive_path()
    if not path.is_file():
        return f"no class archive at {path}: run `python -m spark_jobs.launch.class_archive build`"
    with tempfile.TemporaryDirectory(prefix="class-archive-check-") as scratch:
        script = Path(scratch, "noop.py")
        script.write_text("print('started')\n")
        done = subprocess.run(["spark-submit", "--master", "local[1]", "--jars", spark_submit_jars(), "--conf",
                               f"{DEFAULT_JAVA_OPTIONS_CONF}={_mapping_options(path)} -Xshare:on",
                               str(script)], capture_output=True, text=True, timeout=timeout,
                              cwd=scratch)  # a JVM that crashes writes its hs_err_pid*.log there
    if done.returncode == 0 and "started" in done.stdout:
        return None
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip() and line.strip() != "#"]
    return f"a driver JVM could not map the class archive {path} (exit {done.returncode}): " + " / ".join(lines[:3])


def _with_project(pythonpath: str | None) -> str:
    """``$PYTHONPATH`` with the project first: the training run imports the project and its tools."""
    project = str(PROJECT_ROOT)
    return project if not pythonpath else f"{project}{os.pathsep}{pythonpath}"


def main(argv: list[str] | None = None) -> int:
    """``build`` or ``check`` (the default); exit 2 for anything else (argparse's usage)."""
    parser = argparse.ArgumentParser(prog="python -m spark_jobs.launch.class_archive",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", default="check", choices=("build", "check"),
                        help="build: make the archive (a failure only warns); check (default): exit 0 if a "
                             "driver JVM maps it")
    if parser.parse_args(argv).command == "build":
        try:
            build()
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            # Set-up goes on without it: every Spark start works, only slower.
            print(f"warning: no class archive, Spark starts will be slower: {exc}", file=sys.stderr)
        return 0
    problem = check()
    print(problem or f"ok: driver JVMs map {archive_path()}")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main())
