"""Where the object store is and how each client reaches it, from the standard AWS variables only.

A lake or an input on S3 is named by a URL (``s3a://bucket/prefix``; ``s3://`` works too). Every part of
the product reaches it with the settings an AWS user already has, and with nothing else:

- the endpoint: ``$AWS_ENDPOINT_URL_S3``, else ``$AWS_ENDPOINT_URL``, else ``endpoint_url`` of the
  profile (``$AWS_PROFILE``, else ``default``) in the AWS config file (``$AWS_CONFIG_FILE``, else
  ``~/.aws/config``), else AWS itself;
- the region: ``$AWS_REGION``, else ``$AWS_DEFAULT_REGION``, else the profile's ``region``;
- the credentials: never read here. Each client finds them itself in ``$AWS_ACCESS_KEY_ID`` /
  ``$AWS_SECRET_ACCESS_KEY`` / ``$AWS_SESSION_TOKEN``, the shared credentials file, or the instance's
  role (Spark's S3A through the AWS SDK's default chain, delta-rs, s3fs through botocore). So no secret
  is ever copied into a setting, a command line, a Spark conf or a log line.

:func:`hadoop_conf` gives Spark's S3A settings (``spark.hadoop.fs.s3a.*``) and Delta's log store for
S3, :func:`delta_rs_options` delta-rs's ``storage_options``; fsspec (s3fs, and so the checkpoint tools,
the sensors and the backfill listing) reads the same variables and files through botocore. No
pyspark, no Airflow: the DAG files and the sensors read this module.
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

OBJECT_STORE_SCHEMES = ("s3a", "s3", "s3n")
# Delta's LogStore for S3 with several writers (spark_jobs/launch/java/S3ConditionalLogStore.java).
S3_LOG_STORE_CLASS = "spark_jobs.delta.S3ConditionalLogStore"


def is_url(text: str | os.PathLike) -> bool:
    """Whether ``text`` names a URL (``s3a://...``, ``memory://...``) rather than a local path."""
    return "://" in str(text)


def is_object_store(text: str | os.PathLike) -> bool:
    """Whether ``text`` is an S3 URL (``s3a://``, ``s3://``, ``s3n://``)."""
    return str(text).split("://", 1)[0].lower() in OBJECT_STORE_SCHEMES if is_url(text) else False


@dataclass(frozen=True)
class S3Settings:
    """The non-secret settings of the S3 endpoint in use.

    :param endpoint: the endpoint URL (None: AWS's own, chosen by region).
    :param region: the region (None: the client's default).
    """

    endpoint: str | None = None
    region: str | None = None

    @property
    def plain_http(self) -> bool:
        return bool(self.endpoint) and self.endpoint.lower().startswith("http://")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> "S3Settings":
        """The settings from the AWS variables, then the AWS config file's profile."""
        environ = os.environ if environ is None else environ
        profile = _profile(environ)
        endpoint = (environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
                    or profile.get("endpoint_url") or None)
        region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or profile.get("region") or None
        return cls(endpoint, region)


def _profile(environ: Mapping[str, str]) -> dict[str, str]:
    """The profile's section of the AWS config file (``[default]`` or ``[profile NAME]``); {} if none."""
    path = Path(environ.get("AWS_CONFIG_FILE") or Path.home() / ".aws" / "config").expanduser()
    name = environ.get("AWS_PROFILE") or "default"
    parser = configparser.RawConfigParser()
    try:
        parser.read(path)
    except (OSError, configparser.Error):
        return {}
    for section in (name, f"profile {name}"):
        if parser.has_section(section):
            return dict(parser.items(section))
    return {}


def hadoop_conf(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark settings for ``s3a://`` (and ``s3://``) paths: S3A's endpoint and region, the AWS SDK's default
    credential chain (environment, shared files, instance role: no key in any setting), and Delta's
    multi-writer log store for both schemes. Harmless for a run that touches no bucket."""
    settings = S3Settings.from_environment(environ)
    conf = {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.aws.credentials.provider":
            "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
        # Delta commits through S3's conditional put; S3A must not turn it off.
        "spark.hadoop.fs.s3a.create.conditional.enabled": "true",
        # The classic input stream: the analytics accelerator's stream needs more of the SDK than is fetched.
        "spark.hadoop.fs.s3a.input.stream.type": "classic",
        "spark.delta.logStore.s3a.impl": S3_LOG_STORE_CLASS,
        "spark.delta.logStore.s3.impl": S3_LOG_STORE_CLASS,
    }
    if settings.endpoint:
        # A non-AWS endpoint (a local or on-premises S3) is addressed by path, not by virtual host.
        conf["spark.hadoop.fs.s3a.endpoint"] = settings.endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(not settings.plain_http).lower()
    if settings.region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = settings.region
    return conf


def delta_rs_options(path: str | os.PathLike | None = None,
                     environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """delta-rs ``storage_options`` for ``path``: None for a local path (delta-rs's defaults, as before);
    for an S3 URL the endpoint and region (from the config file too, which delta-rs does not read for
    them) and, for a plain-http endpoint, ``AWS_ALLOW_HTTP``. delta-rs 1.x commits to S3 with a
    conditional put, the same fence as Spark's log store, so no locking provider is needed."""
    if path is not None and not is_object_store(path):
        return None
    settings = S3Settings.from_environment(environ)
    options = {}
    if settings.endpoint:
        options["AWS_ENDPOINT_URL"] = settings.endpoint
    if settings.region:
        options["AWS_REGION"] = settings.region
    if settings.plain_http:
        options["AWS_ALLOW_HTTP"] = "true"
    return options


def _fresh_listings() -> None:
    """s3fs caches folder listings for the life of a process by default; the lease, the checkpoint tools
    and the sensors must see another driver's new files at once, so fsspec's S3 gets no listings cache
    (unless a deployment configured fsspec otherwise)."""
    import fsspec.config

    fsspec.config.conf.setdefault("s3", {}).setdefault("use_listings_cache", False)


_fresh_listings()
