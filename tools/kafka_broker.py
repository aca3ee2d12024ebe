"""A real single-node Kafka broker (KRaft: broker and controller in one JVM) on 127.0.0.1, for tests and trials.

Usage::

    python -m tools.kafka_broker fetch            # Maven Central -> .jars/kafka-broker-<version>/
    python -m tools.kafka_broker run [--dir D]     # a broker in the foreground; Ctrl-C stops it

It runs Apache Kafka's own broker (``kafka.Kafka``, the class ``kafka-server-start.sh`` runs) from the
``kafka_2.13`` jar and its runtime dependencies on Maven Central; there is no Kafka distribution to
download and no Docker engine here. :func:`fetch_broker_jars` resolves them with ``mvn
dependency:copy-dependencies`` into a git-ignored folder beside the Spark jars (about 46 MB, once),
checking the pinned sha256 of the broker jar itself. :class:`LocalBroker` formats a fresh log folder
(``kafka.tools.StorageTool format``, what ``kafka-storage.sh format`` runs), starts the broker on two
free loopback ports (clients, controller) in its own process group, waits until it answers a metadata
request, and stops it (SIGTERM, then SIGKILL of the group) so nothing is left in the process table.
The broker is the same Kafka release as the ``kafka-clients`` jar Spark's connector uses.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from spark_jobs.model.errors import UsageError
from spark_jobs.launch.jars import KAFKA_VERSION, MAVEN_REPO_ENV, jars_dir
from tools.ports import free_port

BROKER_ARTIFACTS = (f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
                    # the log binding the broker's slf4j 1.7 logs through (to a file, see _LOG4J)
                    "org.slf4j:slf4j-reload4j:1.7.36")
BROKER_JAR = f"kafka_2.13-{KAFKA_VERSION}.jar"
BROKER_JAR_SHA256 = "dddf49b18c931301fece0048a76d6b0956c36c8b1d1fc721bfed318aa6ee3e4f"
COMPLETE = ".complete"
START_TIMEOUT_SECONDS = 90.0
_LOG4J = """log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaRaftServer=INFO
"""


def broker_jars_dir() -> Path:
    """Where the broker's jars live: ``<jars dir>/kafka-broker-<version>`` (git-ignored)."""
    return jars_dir() / f"kafka-broker-{KAFKA_VERSION}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_broker_jars(folder: Path | None = None) -> Path:
    """The broker's jars, fetched with Maven into ``folder`` unless already complete there.

    :raises UsageError: when mvn is missing or cannot fetch them, or the broker jar's checksum differs.
    """
    folder = folder or broker_jars_dir()
    if (folder / COMPLETE).is_file():
        return folder
    if not shutil.which("mvn"):
        raise UsageError(f"the Kafka broker's jars are not in {folder} and mvn is not installed to fetch them "
                         f"({', '.join(BROKER_ARTIFACTS)} with their runtime dependencies)")
    deps = "".join(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
                   for g, a, v in (c.split(":") for c in BROKER_ARTIFACTS))
    pom = ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
           "<groupId>local.spark_jobs</groupId><artifactId>kafka-broker</artifactId><version>1</version>"
           f"<dependencies>{deps}</dependencies></project>")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-broker-", dir=folder.parent) as scratch:
        Path(scratch, "pom.xml").write_text(pom)
        out = Path(scratch, "jars")
        done = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(Path(scratch, "pom.xml")), "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={out}",
             *([f"-Dmaven.repo.local={os.environ[MAVEN_REPO_ENV]}"] if os.environ.get(MAVEN_REPO_ENV) else [])],
            capture_output=True, text=True)
        if done.returncode != 0:
            errors = " / ".join(line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line)[:400]
            raise UsageError(f"mvn could not fetch the Kafka broker ({', '.join(BROKER_ARTIFACTS)}): {errors}")
        got = _sha256(out / BROKER_JAR)
        if got != BROKER_JAR_SHA256:
            raise UsageError(f"{BROKER_JAR} from Maven has sha256 {got}, not the pinned {BROKER_JAR_SHA256}; "
                             "do not use it (check the Maven repository it came from)")
        (out / COMPLETE).write_text("\n".join(BROKER_ARTIFACTS) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        out.rename(folder)
    return folder


def cluster_id() -> str:
    """A new KRaft cluster id (a uuid in URL-safe base64, as ``kafka-storage.sh random-uuid`` prints).

    Never one starting with ``-``, as Kafka's own ``Uuid.randomUuid`` does: ``kafka-storage format``'s
    argument parser takes such an id for an option and refuses it ("--cluster-id/-t: expected one
    argument"), which failed one broker start in 64.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class LocalBroker:
    """One Kafka broker + KRaft controller on 127.0.0.1, its data in ``work_dir``.

    :param work_dir: a folder of its own (log dirs, ``server.properties``, ``broker.log``).
    :param jars: the broker's jar folder (default: :func:`fetch_broker_jars`).
    :param heap: the JVM's ``-Xmx``.
    """

    def __init__(self, work_dir: Path, jars: Path | None = None, heap: str = "512m") -> None:
        self.work_dir = Path(work_dir)
        self.jars = jars
        self.heap = heap
        self.port: int | None = None
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise RuntimeError("the broker has not been started")
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "broker.log"

    def _java(self, main: str, *args: str) -> list[str]:
        # C1 only (-XX:TieredStopAtLevel=1): a local broker lives minutes on a few thousand messages, where the
        # optimizing compiler's CPU is never paid back (idle it compiled for ~0.5 CPU-s a minute on 2 cores).
        return ["java", f"-Xmx{self.heap}", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true",
                f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
                "-cp", f"{self.jars}/*", main, *args]

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> "LocalBroker":
        """Format the log folder and start the broker; return once it answers clients.

        :raises RuntimeError: if it exits or does not answer within ``timeout`` seconds (with its log's tail).
        """
        self.jars = self.jars or fetch_broker_jars()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port, controller = free_port(), free_port()
        while controller == self.port:
            controller = free_port()
        data = self.work_dir / "data"
        properties = self.work_dir / "server.properties"
        properties.write_text("\n".join([
            "process.roles=broker,controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}", "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT", f"log.dirs={data}", "num.partitions=1",
            "auto.create.topics.enable=false", "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1", "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1", "group.initial.rebalance.delay.ms=0",
            "num.network.threads=2", "num.io.threads=2", "log.flush.interval.messages=1000000",
        ]) + "\n")
        (self.work_dir / "log4j.properties").write_text(_LOG4J.format(log=self.log_file))
        fmt = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(properties),
                                        "--ignore-formatted"), capture_output=True, text=True, timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({fmt.returncode}): {(fmt.stdout + fmt.stderr)[-800:]}")
        with (self.work_dir / "broker.out").open("w") as out:
            self.process = subprocess.Popen(self._java("kafka.Kafka", str(properties)), stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready(timeout)
        except Exception:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited with {self.process.returncode}: {self._tail()}")
            try:
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    return
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            time.sleep(0.3)
        raise RuntimeError(f"the Kafka broker did not answer on {self.bootstrap_servers} within {timeout:.0f} s: "
                           f"{self._tail()}")

    def _tail(self) -> str:
        text = ""
        for name in ("broker.out", "broker.log"):
            try:
                text += (self.work_dir / name).read_text(errors="replace")[-600:]
            except OSError:
                pass
        return text.strip().replace("\n", " / ")

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM the broker (a controlled shutdown), SIGKILL its process group after ``grace`` seconds."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        except ProcessLookupError:
            pass

    def __enter__(self) -> "LocalBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def create_topic(bootstrap_servers: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication 1) and wait until it exists."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic]
    future.result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
        if found is not None and found.error is None and len(found.partitions) == partitions:
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} did not appear with {partitions} partitions within {timeout:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.kafka_broker", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("fetch", "run"))
    parser.add_argument("--dir", help="the broker's folder (default: a new temporary one)")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch_broker_jars())
            return 0
        with LocalBroker(Path(args.dir or tempfile.mkdtemp(prefix="kafka-"))) as broker:
            print(f"Kafka {KAFKA_VERSION} on {broker.bootstrap_servers} (log {broker.log_file}); Ctrl-C stops it",
                  flush=True)
            try:
                broker.process.wait()
            except KeyboardInterrupt:
                pass
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
