"""The JVM jars every Spark start needs beyond pip's pyspark, pinned, checksummed, fetched once at set-up.

Usage::

    python -m spark_jobs.launch.jars fetch     # make setup runs this: Maven Central -> .jars/, sha256-checked
    python -m spark_jobs.launch.jars check     # exit 0 if every pinned jar is in .jars/ with its checksum
    python -m spark_jobs.launch.jars paths     # the comma-separated list for spark-submit --jars

pip's ``pyspark`` has no Delta Lake, and pip's ``delta-spark`` is only its Python half. Spark's own
``--packages`` resolves through Ivy at every start (a download at run time), and on these machines
Ivy does not get through: it also asks repos.spark-packages.org, which is not reachable, and fails
on pom-only BOM artifacts. So set-up asks Maven (``mvn dependency:copy-dependencies`` on a pom made
from :data:`JARS`, no transitive jars: Spark already ships them) and this module checks each jar's
sha256 before any Spark start uses it. :func:`spark_jars` is what the SparkSession builder uses and
:func:`spark_submit_jars` what every spark-submit's ``--jars`` carries (:mod:`spark_jobs.launch.submit`); a missing jar is a one-line :class:`UsageError` naming the
artifact and the way to provide it.

The pins match pyspark 4.2 and the pip ``delta-spark`` (4.4.0: Maven Central has no 4.4.1 jar); the
Kafka connector (``spark-sql-kafka-0-10``) is Spark's own 4.2.0 with the kafka-clients it was built
against. ``.jars/`` also holds the test broker's jars (:mod:`tools.kafka_broker`), fetched there
by Maven with their dependencies, never passed to Spark.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import PROJECT_ROOT

JARS_DIR_ENV = "SPARK_JOBS_JARS_DIR"
# Maven's local repository for fetch (default: Maven's own, ~/.m2/repository); a fresh folder
# proves a set-up from an empty cache.
MAVEN_REPO_ENV = "SPARK_JOBS_MAVEN_REPO"


@dataclass(frozen=True)
class Jar:
    """One pinned Maven artifact.

    :param group: Maven group id.
    :param artifact: Maven artifact id.
    :param version: the pinned version.
    :param sha256: the jar's checksum; a file that does not match is refused.
    """

    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"


DELTA_VERSION = "4.4.0"
SPARK_VERSION = "4.2.0"
# The kafka-clients version spark-sql-kafka-0-10 4.2.0 is built against; the test broker
# (tools.kafka_broker) runs the same Kafka release.
KAFKA_VERSION = "3.9.2"
JARS: tuple[Jar, ...] = (
    Jar("io.delta", "delta-spark_4.2_2.13", DELTA_VERSION,
        "27d4fd8b1f879535c573ed1c718177d6a27f24d3e626ba02e216369725721ead"),
    Jar("io.delta", "delta-storage", DELTA_VERSION,
        "c46735481fa8e326b0957be02b4420cbcab4b325bb08009b7f2045a95133f1cc"),
    # Spark's Kafka source and sink for Spark 4.2 / Scala 2.13, and the jars it needs that pyspark lacks
    # (scala-parallel-collections, jsr305, spark-tags and the Hadoop client it also names ship with pyspark).
    Jar("org.apache.spark", "spark-sql-kafka-0-10_2.13", SPARK_VERSION,
        "64539c45e5d39f7ddb747312c239f38f5208d08c1a0ddf7d70beb2fbd9373705"),
    Jar("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", SPARK_VERSION,
        "641c7947afc8aa1189e433b7c2d305293993c8691bc1c2062d6d4f513b12518c"),
    Jar("org.apache.kafka", "kafka-clients", KAFKA_VERSION,
        "014b4ef36884478a932641818b080c36a8f8e2e92dc771e800c9d2694f4f83d8"),
    Jar("org.apache.commons", "commons-pool2", "2.13.1",
        "f77a5060d6936a9144023584232f9de3f2248f1abfe156e9d31795f18770674f"),
)

# Spark settings that turn the Delta jars on (with the jars on the classpath).
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def spark_submit_jars() -> str:
    """The ``--jars`` every spark-submit of a job carries (paths only: nothing is read)."""
    return ",".join(str(path) for path in jar_paths())


def jars_dir() -> Path:
    """Where the jars live: ``$SPARK_JOBS_JARS_DIR``, else ``<project>/.jars`` (git-ignored)."""
    return Path(os.environ.get(JARS_DIR_ENV) or PROJECT_ROOT / ".jars").resolve()


def jar_paths(folder: Path | None = None) -> list[Path]:
    """The pinned jars' paths (no I/O: safe while Airflow parses DAG files)."""
    folder = folder or jars_dir()
    return [folder / jar.file_name for jar in JARS]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def problems(folder: Path | None = None, *, verify: bool = True) -> list[str]:
    """One line per pinned jar that is missing or whose checksum differs (empty: all good)."""
    folder = folder or jars_dir()
    found = []
    for jar in JARS:
        path = folder / jar.file_name
        if not path.is_file():
            found.append(f"the jar {jar.coordinates} is missing ({path} does not exist)")
        elif verify and _sha256(path) != jar.sha256:
            found.append(f"the jar {jar.coordinates} at {path} does not match its pinned sha256 {jar.sha256}")
    return found


def spark_jars(folder: Path | None = None) -> str:
    """The jars as Spark's ``spark.jars`` / ``--jars`` value, after checking they are all there.

    :raises UsageError: one line naming the first missing artifact and how to provide it.
    """
    folder = folder or jars_dir()
    missing = problems(folder, verify=False)
    if missing:
        raise UsageError(f"{missing[0]}: run `make setup` (or `python -m spark_jobs.launch.jars fetch`) where Maven "
                         f"Central is reachable, or copy {', '.join(j.file_name for j in JARS)} into {folder} "
                         f"(or point ${JARS_DIR_ENV} at a folder that has them)")
    return ",".join(str(path) for path in jar_paths(folder))


def _pom(jars: tuple[Jar, ...]) -> str:
    deps = "".join(f"<dependency><groupId>{j.group}</groupId><artifactId>{j.artifact}</artifactId>"
                   f"<version>{j.version}</version></dependency>" for j in jars)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>local.spark_jobs</groupId><artifactId>jars</artifactId><version>1</version>"
            f"<dependencies>{deps}</dependencies></project>")


def fetch(folder: Path | None = None) -> list[str]:
    """Fetch every pinned jar that is missing or wrong into ``folder`` with Maven, then verify all.

    :returns: the problems left (empty on success).
    """
    folder = folder or jars_dir()
    if not problems(folder):
        return []
    if not shutil.which("mvn"):
        return [f"{line} and mvn is not installed to fetch it" for line in problems(folder)]
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jars-") as scratch:
        Path(scratch, "pom.xml").write_text(_pom(JARS))
        done = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(Path(scratch, "pom.xml")), "dependency:copy-dependencies",
             "-DexcludeTransitive=true", f"-DoutputDirectory={folder}",
             *([f"-Dmaven.repo.local={os.environ[MAVEN_REPO_ENV]}"] if os.environ.get(MAVEN_REPO_ENV) else [])],
            capture_output=True, text=True)
        if done.returncode != 0:
            tail = " / ".join(line for line in (done.stdout + done.stderr).splitlines()
                              if "ERROR" in line)[:400]
            return [f"{line}; mvn could not fetch it: {tail}" for line in problems(folder)]
    return problems(folder)


def main(argv: list[str] | None = None) -> int:
    command = (argv or sys.argv[1:] or ["check"])[0]
    if command == "paths":
        try:
            print(spark_jars())
        except UsageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if command not in ("fetch", "check"):
        print("usage: python -m spark_jobs.launch.jars fetch|check|paths", file=sys.stderr)
        return 2
    left = fetch() if command == "fetch" else problems()
    for line in left:
        print(f"error: {line}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
