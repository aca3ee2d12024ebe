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

One jar is built here rather than fetched: Delta's log store for S3 with several writers
(``java/S3ConditionalLogStore.java``, compiled by ``fetch`` with the JDK's ``javac`` against pyspark's
Hadoop and the pinned delta-storage; the jar records its source's sha256, which ``check`` compares).
Why the project has its own is in that file and in docs/object-store.md.

Every run carries the S3 jars, whether or not it touches a bucket: the input and the lake root are
URLs known only after each command has parsed its arguments (and the DAGs' spark-submits are built
before), while the jars cost a Spark start nothing measurable (they are opened when an ``s3a://``
path is first used), see docs/object-store.md.

The pins match pyspark 4.2 and the pip ``delta-spark`` (4.4.0: Maven Central has no 4.4.1 jar); the
Kafka connector (``spark-sql-kafka-0-10``) is Spark's own 4.2.0 with the kafka-clients it was built
against. ``.jars/`` also holds the test broker's jars (:mod:`tools.kafka_broker`), fetched there
by Maven with their dependencies, never passed to Spark.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
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
# The Hadoop inside pip's pyspark 4.2 (hadoop-client-api-3.5.0.jar) and the AWS SDK v2 its hadoop-aws is built on.
HADOOP_VERSION = "3.5.0"
AWS_SDK_VERSION = "2.35.4"
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
    # S3 (``s3a://``): Hadoop's S3A for the Hadoop inside pyspark, and the modules of the AWS SDK v2 it
    # uses (about 9 MB; the SDK's ``bundle``, which hadoop-aws names, is several hundred MB). The SDK's
    # Apache HTTP client, Netty, SLF4J and Jackson ship with pyspark.
    Jar("org.apache.hadoop", "hadoop-aws", HADOOP_VERSION,
        "66bd9eefb938b1a1657487324b63c13df2d8b17164a1dd24e0ef37b905bc5baa"),
    Jar("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", "1.3.1",
        "4959a9747cbb479c73c3ffbcd479bee5b014f8b2880994585a8693fb9d24675e"),
    Jar("software.amazon.awssdk", "annotations", AWS_SDK_VERSION,
        "6f36bd87155d1dd85d6efbdd29e532e3759a022211feb71affebee1aa34f04b8"),
    Jar("software.amazon.awssdk", "apache-client", AWS_SDK_VERSION,
        "6eade21b482724ed0a4613eaa95d20e47e7a81304bd28538ac427fece94a7740"),
    Jar("software.amazon.awssdk", "arns", AWS_SDK_VERSION,
        "c63cc29f76a8527e9e10b621703163df541dc5cb315508dc2898518602c75380"),
    Jar("software.amazon.awssdk", "auth", AWS_SDK_VERSION,
        "6b601323004833fb4a857ffc95db4795e0e6320eb93e64b1246c655c9ff04994"),
    Jar("software.amazon.awssdk", "aws-core", AWS_SDK_VERSION,
        "fdb5fc8f1a48d97fa7d04d3460fb42f6973c7b1bbe1b9d317871ef0162bcb623"),
    Jar("software.amazon.awssdk", "aws-query-protocol", AWS_SDK_VERSION,
        "9b4cf9b78977cc9f5b4ceae9c435dedbde6a055a0f8d9e053eaca945715e2a9f"),
    Jar("software.amazon.awssdk", "aws-xml-protocol", AWS_SDK_VERSION,
        "4f59176da2522c357b1993e4a890fde529f12f365795ef86269bde4a3984cd0d"),
    Jar("software.amazon.awssdk", "checksums", AWS_SDK_VERSION,
        "94464af4374d08ecf33ca06ed4d03e1615529e547726e26b56abacefbeee7948"),
    Jar("software.amazon.awssdk", "checksums-spi", AWS_SDK_VERSION,
        "88b5af85ac2d3c862be8856be4e683ab31932e4a5a3c1c45af864d2671ac7cec"),
    Jar("software.amazon.awssdk", "crt-core", AWS_SDK_VERSION,
        "2c6aaa17bf9ccbb9d962dded4351e73decb197e3c5519970e0dae17e05d3df62"),
    Jar("software.amazon.awssdk", "endpoints-spi", AWS_SDK_VERSION,
        "ef02441bda916959b8341290b49c68cc35538e1ad6f8629b75d8334dc6653e00"),
    Jar("software.amazon.eventstream", "eventstream", "1.0.1",
        "0c37d8e696117f02c302191b8110b0d0eb20fa412fce34c3a269ec73c16ce822"),
    Jar("software.amazon.awssdk", "http-auth", AWS_SDK_VERSION,
        "3ec933a06e751a05e195eb3589209e23c44e1897263b6fcae34ef4cc63cd4491"),
    Jar("software.amazon.awssdk", "http-auth-aws", AWS_SDK_VERSION,
        "c4acb92fdec90bfd9b67bfab8e41b69cd152c03cacc10281a8ab464791856e01"),
    Jar("software.amazon.awssdk", "http-auth-aws-eventstream", AWS_SDK_VERSION,
        "709107552f302be3fa9e05969a3779f5c0f07fb809e6fa1fa571a6f0c61326dd"),
    Jar("software.amazon.awssdk", "http-auth-spi", AWS_SDK_VERSION,
        "4495463406bb98eb136f2c3f3604ed5f08ec9974ebc3f34f2121b20679f61d5c"),
    Jar("software.amazon.awssdk", "http-client-spi", AWS_SDK_VERSION,
        "728be89b2a07b595edb0adee3a2cbbbdd4cb1f4caddde0d08c3979fe2620dedb"),
    Jar("software.amazon.awssdk", "identity-spi", AWS_SDK_VERSION,
        "188d73db7d4e2361654bc3c5a1b3eaeb445d0500fb012cc46c5d67975adf97bf"),
    Jar("software.amazon.awssdk", "json-utils", AWS_SDK_VERSION,
        "80d67a6bb3e7eb49c7d4b6e4ba4c1463ed7da0192b795158328602dc131c5ecc"),
    Jar("software.amazon.awssdk", "metrics-spi", AWS_SDK_VERSION,
        "c2a4ee90a21081317e2e6eba0c414d05d3d518aed2f86b1c1710a7367b450487"),
    Jar("software.amazon.awssdk", "netty-nio-client", AWS_SDK_VERSION,
        "b82f8b33e5c85273a47da45ede884d7ccb31c9c2f69e6910a76c5c48fa1275dc"),
    Jar("software.amazon.awssdk", "profiles", AWS_SDK_VERSION,
        "0f4ef7ca72ccd80dd49ebeaf7f3ce60a7d7a00da59a91aeeae6e91052bbacbd8"),
    Jar("software.amazon.awssdk", "protocol-core", AWS_SDK_VERSION,
        "f2532eca6ba2142fe4821d5decb03c83a3e15dc8bfae2240e7f2efa75f9868b5"),
    Jar("org.reactivestreams", "reactive-streams", "1.0.4",
        "f75ca597789b3dac58f61857b9ac2e1034a68fa672db35055a8fb4509e325f28"),
    Jar("software.amazon.awssdk", "regions", AWS_SDK_VERSION,
        "77eae87b34ce96ecdf916a9bc06684dbeafcb6d38ef0513285fa5d5d6d41f5ca"),
    Jar("software.amazon.awssdk", "retries", AWS_SDK_VERSION,
        "f99fb2f8c66d7e859955b3542d3af8f9de8f23a21d5e3250f0f2c5f18487e469"),
    Jar("software.amazon.awssdk", "retries-spi", AWS_SDK_VERSION,
        "668638751d059c527ddd41ffa4dcebe36a7c14860ed56776df09b861c14dc7dd"),
    Jar("software.amazon.awssdk", "s3", AWS_SDK_VERSION,
        "f23532c5223be9b0bfec0d72837ed09ed34dbdf8022818ba145b20076a78b4bc"),
    Jar("software.amazon.awssdk", "s3-transfer-manager", AWS_SDK_VERSION,
        "0eec78870b3d0abc509a847072cf963cb2ae6e360dc6161a9449b3398c470476"),
    Jar("software.amazon.awssdk", "sdk-core", AWS_SDK_VERSION,
        "fa559a4ce598852f3519c8f3b36250f583b0858a7611eedc4a81997778c617f4"),
    Jar("software.amazon.awssdk", "third-party-jackson-core", AWS_SDK_VERSION,
        "32f4252c6c2df8f3a4aff885e6dc77024ad6b4cb48455d07b461ec30c41643ea"),
    Jar("software.amazon.awssdk", "utils", AWS_SDK_VERSION,
        "642aeef536a071668f0b772f05f9d21573abf6955e7b6fb5fdb893760cca10e8"),
    Jar("software.amazon.awssdk", "utils-lite", AWS_SDK_VERSION,
        "e004806def5e22ec98edc48a133ff3317166255e1ba29d93d129e9fdfa64a7be"),
)

# The OpenLineage Spark listener (Spark 4.2 needs >= 1.53), fetched and checked with the others but on no Spark
# start's classpath unless the listener is turned on (spark_jobs/launch/lineage_listener.py; docs/lineage.md says
# why it is off by default).
OPENLINEAGE_SPARK = Jar("io.openlineage", "openlineage-spark_2.13", "1.53.0",
                        "5d84b0ae7e72909b5aae7ed87df878bf06b28d9ac3005765c3529d0a66dbae6f")
# Every jar set-up fetches and checks.
PINNED: tuple[Jar, ...] = (*JARS, OPENLINEAGE_SPARK)

# Delta's log store for S3, built from the project's source by fetch (no Maven artifact).
LOG_STORE_SOURCE = Path(__file__).resolve().parent / "java" / "S3ConditionalLogStore.java"
LOG_STORE_JAR = "spark-jobs-s3-logstore.jar"
BUILT_DIR = "built"  # beside the fetched jars, apart from them: what set-up compiles
_LOG_STORE_STAMP = "META-INF/spark-jobs-source.sha256"

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
    return [folder / jar.file_name for jar in JARS] + [folder / BUILT_DIR / LOG_STORE_JAR]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def problems(folder: Path | None = None, *, verify: bool = True, only_maven: bool = False) -> list[str]:
    """One line per pinned jar that is missing or whose checksum differs, then the built log store's
    line if it is missing or built from another source (empty: all good).

    :param only_maven: leave the built log store out."""
    folder = folder or jars_dir()
    found = []
    for jar in PINNED:
        path = folder / jar.file_name
        if not path.is_file():
            found.append(f"the jar {jar.coordinates} is missing ({path} does not exist)")
        elif verify and _sha256(path) != jar.sha256:
            found.append(f"the jar {jar.coordinates} at {path} does not match its pinned sha256 {jar.sha256}")
    built = folder / BUILT_DIR / LOG_STORE_JAR
    if only_maven:
        return found
    if not built.is_file():
        found.append(f"the jar {LOG_STORE_JAR} (Delta's S3 log store, built from {LOG_STORE_SOURCE.name}) is missing "
                     f"({built} does not exist)")
    elif verify and _stamp(built) != _sha256(LOG_STORE_SOURCE):
        found.append(f"the jar {LOG_STORE_JAR} at {built} was built from another {LOG_STORE_SOURCE.name}")
    return found


def _stamp(jar: Path) -> str | None:
    try:
        with zipfile.ZipFile(jar) as archive:
            return archive.read(_LOG_STORE_STAMP).decode("ascii").strip()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def build_log_store(folder: Path) -> list[str]:
    """Compile :data:`LOG_STORE_SOURCE` against pyspark's Hadoop and the pinned delta-storage into
    ``folder/built/`` :data:`LOG_STORE_JAR` (entries dated 1980: the same source gives the same bytes).

    :returns: the problems (empty on success).
    """
    javac = shutil.which("javac")
    if not javac:
        return [f"the jar {LOG_STORE_JAR} cannot be built: javac (a JDK 17) is not installed"]
    spec = importlib.util.find_spec("pyspark")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return [f"the jar {LOG_STORE_JAR} cannot be built: pyspark is not installed"]
    spark_jars_dir = Path(list(spec.submodule_search_locations)[0]) / "jars"
    storage = next(folder / j.file_name for j in JARS if j.artifact == "delta-storage")
    with tempfile.TemporaryDirectory(prefix="logstore-") as scratch:
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", f"{spark_jars_dir}/*{os.pathsep}{storage}",
                               "-d", scratch, str(LOG_STORE_SOURCE)], capture_output=True, text=True)
        if done.returncode != 0:
            return [f"the jar {LOG_STORE_JAR} did not compile: {(done.stdout + done.stderr).strip()[:400]}"]
        (folder / BUILT_DIR).mkdir(parents=True, exist_ok=True)
        temp = folder / BUILT_DIR / f".{LOG_STORE_JAR}.{os.getpid()}.tmp"
        with zipfile.ZipFile(temp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(Path(scratch).rglob("*.class")):
                archive.writestr(zipfile.ZipInfo(path.relative_to(scratch).as_posix()), path.read_bytes())
            archive.writestr(zipfile.ZipInfo(_LOG_STORE_STAMP), _sha256(LOG_STORE_SOURCE))
        os.replace(temp, folder / BUILT_DIR / LOG_STORE_JAR)
    return []


def spark_jars(folder: Path | None = None) -> str:
    """The jars as Spark's ``spark.jars`` / ``--jars`` value, after checking they are all there.

    :raises UsageError: one line naming the first missing artifact and how to provide it.
    """
    folder = folder or jars_dir()
    missing = problems(folder, verify=False)
    if missing:
        raise UsageError(f"{missing[0]}: run `make setup` (or `python -m spark_jobs.launch.jars fetch`) where Maven "
                         f"Central is reachable, or copy {', '.join(j.file_name for j in JARS)} and {BUILT_DIR}/{LOG_STORE_JAR} "
                         f"into {folder} "
                         f"(or point ${JARS_DIR_ENV} at a folder that has them)")
    return ",".join(str(path) for path in jar_paths(folder))


def _pom(jars: tuple[Jar, ...]) -> str:
    deps = "".join(f"<dependency><groupId>{j.group}</groupId><artifactId>{j.artifact}</artifactId>"
                   f"<version>{j.version}</version></dependency>" for j in jars)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>local.spark_jobs</groupId><artifactId>jars</artifactId><version>1</version>"
            f"<dependencies>{deps}</dependencies></project>")


def fetch(folder: Path | None = None) -> list[str]:
    """Fetch every pinned jar that is missing or wrong into ``folder`` with Maven, build the S3 log store's
    jar when it is missing or stale, then verify all.

    :returns: the problems left (empty on success).
    """
    folder = folder or jars_dir()
    if not problems(folder):
        return []
    if problems(folder, only_maven=True):
        left = _fetch_with_maven(folder)
        if left:
            return left
    return build_log_store(folder) or problems(folder)


def _fetch_with_maven(folder: Path) -> list[str]:
    if not shutil.which("mvn"):
        return [f"{line} and mvn is not installed to fetch it" for line in problems(folder, only_maven=True)]
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jars-") as scratch:
        Path(scratch, "pom.xml").write_text(_pom(PINNED))
        done = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(Path(scratch, "pom.xml")), "dependency:copy-dependencies",
             "-DexcludeTransitive=true", f"-DoutputDirectory={folder}",
             *([f"-Dmaven.repo.local={os.environ[MAVEN_REPO_ENV]}"] if os.environ.get(MAVEN_REPO_ENV) else [])],
            capture_output=True, text=True)
        if done.returncode != 0:
            tail = " / ".join(line for line in (done.stdout + done.stderr).splitlines()
                              if "ERROR" in line)[:400]
            return [f"{line}; mvn could not fetch it: {tail}" for line in problems(folder, only_maven=True)]
    return problems(folder, only_maven=True)


def main(argv: list[str] | None = None) -> int:
    """``fetch``, ``check`` (the default) or ``paths``; exit 2 for anything else (argparse's usage)."""
    parser = argparse.ArgumentParser(prog="python -m spark_jobs.launch.jars", description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", default="check", choices=("fetch", "check", "paths"),
                        help="fetch: Maven Central -> .jars/, sha256-checked; check (default): exit 0 if every "
                             "pinned jar is there with its checksum; paths: the comma-separated list for --jars")
    command = parser.parse_args(argv).command
    if command == "paths":
        try:
            print(spark_jars())
        except UsageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    left = fetch() if command == "fetch" else problems()
    for line in left:
        print(f"error: {line}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
