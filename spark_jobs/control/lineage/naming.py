"""OpenLineage names of what a job reads and writes, and of the job itself.

Datasets are named by the OpenLineage naming conventions, through the client's own naming classes
(``openlineage.client.naming.dataset``), so that the names match those the openlineage-spark listener and other
integrations give the same data, and a lineage backend merges them:

- a local folder or table: namespace ``file``, name the absolute path;
- an ``s3://``/``s3a://`` URL: namespace ``s3://<bucket>``, name the key (no leading slash);
- a Kafka topic: namespace ``kafka://<first bootstrap server>``, name the topic;
- an SQS queue (not in the conventions): namespace ``arn:aws:sqs:<region>:<account>`` and the queue's name for an
  AWS queue URL, else ``sqs://<host:port>`` and the URL's path.

A job's namespace is ``$OPENLINEAGE_NAMESPACE`` (the variable OpenLineage's integrations read), else
:data:`DEFAULT_JOB_NAMESPACE`; its name is the registry entry's name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from openlineage.client.naming.dataset import S3, Kafka, LocalFileSystem

JOB_NAMESPACE_ENV = "OPENLINEAGE_NAMESPACE"
DEFAULT_JOB_NAMESPACE = "spark_jobs"
_AWS_QUEUE = re.compile(r"^sqs\.([a-z0-9-]+)\.amazonaws\.com$")


@dataclass(frozen=True, order=True)
class DatasetName:
    """One dataset's OpenLineage identity.

    :param namespace: where it lives (``file``, ``s3://bucket``, ``kafka://host:9092``).
    :param name: what it is there (a path, a key, a topic).
    """

    namespace: str
    name: str


def job_namespace(environ: Mapping[str, str] | None = None) -> str:
    """The namespace of every job of this deployment: ``$OPENLINEAGE_NAMESPACE``, else ``spark_jobs``."""
    environ = os.environ if environ is None else environ
    return environ.get(JOB_NAMESPACE_ENV) or DEFAULT_JOB_NAMESPACE


def path_dataset(path: str | os.PathLike) -> DatasetName:
    """A folder or a table by its path: local (absolute) or an ``s3://``/``s3a://`` URL."""
    text = str(path)
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme in {"s3", "s3a", "s3n"}:
            naming = S3(bucket_name=parts.netloc, object_key=parts.path.strip("/") or "/")
            return DatasetName(naming.get_namespace(), naming.get_name())
        return DatasetName(f"{parts.scheme}://{parts.netloc}", parts.path or "/")
    naming = LocalFileSystem(path=os.path.abspath(text))
    return DatasetName(naming.get_namespace(), naming.get_name())


def kafka_datasets(bootstrap_servers: str, topics: str) -> list[DatasetName]:
    """The topics of a Kafka subscription (``a,b``, or ``pattern:<regex>``, named as it is) on the first broker."""
    first = bootstrap_servers.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    host, port = (host, port) if host else (first, "9092")
    names = [topics] if topics.startswith("pattern:") else [t.strip() for t in topics.split(",") if t.strip()]
    namings = [Kafka(bootstrap_server_host=host, port=port, topic=topic) for topic in names]
    return [DatasetName(naming.get_namespace(), naming.get_name()) for naming in namings]


def sqs_dataset(queue_url: str) -> DatasetName:
    """An SQS queue by its URL (``https://sqs.<region>.amazonaws.com/<account>/<name>``)."""
    parts = urlsplit(queue_url)
    aws = _AWS_QUEUE.match(parts.hostname or "")
    segments = [s for s in parts.path.split("/") if s]
    if aws and len(segments) == 2:
        return DatasetName(f"arn:aws:sqs:{aws.group(1)}:{segments[0]}", segments[1])
    return DatasetName(f"sqs://{parts.netloc}", parts.path or "/")
