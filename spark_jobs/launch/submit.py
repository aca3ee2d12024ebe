"""One spark-submit of the project's application, declared once, for Airflow and for the places that run it alone.

Every Spark run of a job goes through ``spark-submit <project>/spark_jobs/__main__.py <args>`` with the
same pinned jars (:mod:`spark_jobs.launch.jars`), Delta's extension and catalog and the driver JVM's class
archive (:mod:`spark_jobs.launch.class_archive`). A :class:`Submission` holds that as plain data, and gives

- :meth:`Submission.operator_kwargs` / :meth:`Submission.hook_kwargs`: the keyword arguments of the
  Spark provider's public ``SparkSubmitOperator`` / ``SparkSubmitHook`` constructors, for the DAGs and
  the on-call operator (the provider resolves the connection :data:`SPARK_CONN_ID` when the task runs);
- :meth:`Submission.argv`: the command as a list, for a :class:`SparkConnection`, for the places that own
  the driver's process themselves (the supervisor, ``python -m spark_jobs supervise --spark-submit``,
  the benchmark). It is the command the provider's hook builds for the same connection (the
  arguments in the hook's order; ``tests/spark_jobs/launch/test_submit.py`` compares both on a local and
  a standalone master).

The code reaches the executors from the driver itself, as a zip of the code it runs
(:mod:`spark_jobs.launch.code_zip`, shipped by the driver's session): a path of this machine on the
executors' ``PYTHONPATH`` means nothing on a cluster's workers, so no ``--py-files`` is needed.
No pyspark and no Airflow here: nothing is read while Airflow parses a DAG file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
from urllib.parse import parse_qsl, unquote, urlsplit

from spark_jobs.launch import jit
from spark_jobs.launch.class_archive import DEFAULT_JAVA_OPTIONS_CONF, java_options
from spark_jobs.launch.jars import DELTA_CONF, spark_submit_jars
from spark_jobs.launch.lineage_listener import with_listener
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import PROJECT_ROOT

# The Airflow connection every spark-submit of the project uses (the master, the deploy mode).
SPARK_CONN_ID = "spark_default"
# The application every spark-submit of a job runs: ``python -m spark_jobs`` as a file.
APPLICATION = str(PROJECT_ROOT / "spark_jobs" / "__main__.py")
# The master of a driver started without Airflow (``supervise --spark-submit``), as for a local session.
SPARK_MASTER_ENV = "SPARK_MASTER"
DEFAULT_MASTER = "local[2]"
SPARK_BINARY = "spark-submit"
# The connection extras the plain command models; the provider's others (keytab, queue, ...) need Airflow.
_MODELLED_EXTRAS = {"deploy-mode", "spark-binary", "rest-scheme", "rest-port"}


def driver_java_options(long_running: bool = False) -> str:
    """A driver JVM's options: its class archive (:mod:`~spark_jobs.launch.class_archive`) and its JIT
    (:mod:`~spark_jobs.launch.jit`: C1 only unless ``long_running``)."""
    return " ".join(part for part in (java_options(), jit.java_options(long_running)) if part)


def spark_submit_conf(long_running: bool = False) -> dict[str, str]:
    """The ``--conf`` every spark-submit of a job carries: Delta's extension and catalog, and the driver
    JVM's options (:func:`driver_java_options`; a missing archive only makes the start slower)."""
    options = driver_java_options(long_running)
    return {**DELTA_CONF, **({DEFAULT_JAVA_OPTIONS_CONF: options} if options else {})}


@dataclass(frozen=True)
class SparkConnection:
    """The parts of an Airflow Spark connection that shape a spark-submit command, resolved as the Spark
    provider's ``SparkSubmitHook`` resolves them.

    :param master: ``--master`` (``local[2]``, ``spark://host:7077``).
    :param deploy_mode: ``--deploy-mode`` (``client``, ``cluster``), or None (spark-submit's default, client).
    :param spark_binary: the spark-submit binary, found on ``PATH``.
    """

    master: str
    deploy_mode: str | None = None
    spark_binary: str = SPARK_BINARY

    @classmethod
    def from_fields(cls, conn_type: str | None, host: str | None, port: int | None,
                    extra: Mapping[str, Any] | None = None) -> "SparkConnection":
        """From a connection's fields, with the provider's rules: a ``spark`` connection whose host holds a
        URL (or has no port) is the master as it is, else ``<conn_type>://<host>``; a port is appended.

        :raises UsageError: an extra the plain command does not model (keytab, principal, queue,
            namespace: submit through Airflow's provider), or a spark-binary other than spark-submit.
        """
        extra = dict(extra or {})
        unmodelled = sorted(set(extra) - _MODELLED_EXTRAS)
        if unmodelled:
            raise UsageError(f"the Spark connection's extra {', '.join(unmodelled)} is only understood by Airflow's "
                             "Spark provider: run this spark-submit through it (a DAG), or drop the extra")
        if conn_type == "spark" and host and ("://" in host or not port):
            master = host
        else:
            master = f"{conn_type}://{host or ''}"
        master = f"{master}:{port}" if port else master
        binary = extra.get("spark-binary") or SPARK_BINARY
        if binary != SPARK_BINARY:
            raise UsageError(f"the Spark connection's spark-binary {binary!r} is not {SPARK_BINARY}")
        return cls(master, extra.get("deploy-mode") or None, binary)

    @classmethod
    def from_airflow_env(cls, conn_id: str = SPARK_CONN_ID, environ: Mapping[str, str] | None = None,
                         default: "SparkConnection | None" = None) -> "SparkConnection":
        """The connection ``conn_id`` from ``$AIRFLOW_CONN_<ID>`` (Airflow's JSON or URI form), read as
        Airflow's environment-variable backend and the provider would, without importing Airflow.

        :param default: what a missing variable gives (without one, a missing variable is an error).
        :raises UsageError: naming the variable when it is missing (and no default) or unreadable.
        """
        environ = os.environ if environ is None else environ
        name = f"AIRFLOW_CONN_{conn_id.upper()}"
        text = environ.get(name, "").strip()
        if not text:
            if default is not None:
                return default
            raise UsageError(f"no Spark connection {conn_id!r}: set ${name} (e.g. "
                             '\'{"conn_type": "spark", "host": "local[2]"}\')')
        if text.startswith("{"):
            try:
                fields = json.loads(text)
                extra = fields.get("extra") or {}
                extra = json.loads(extra) if isinstance(extra, str) else extra
            except (ValueError, AttributeError):
                raise UsageError(f"${name} is not an Airflow connection in JSON") from None
            return cls.from_fields(fields.get("conn_type"), fields.get("host"), fields.get("port"), extra)
        parts = urlsplit(text)
        return cls.from_fields(parts.scheme.replace("-", "_"), unquote(parts.hostname or ""), parts.port,
                               dict(parse_qsl(parts.query)))

    @classmethod
    def from_spark_master(cls, environ: Mapping[str, str] | None = None) -> "SparkConnection":
        """``$SPARK_MASTER`` (else ``local[2]``) in client mode: the master of a driver a process starts and
        owns without Airflow, the same master as a session started by ``python -m spark_jobs``."""
        environ = os.environ if environ is None else environ
        return cls(environ.get(SPARK_MASTER_ENV) or DEFAULT_MASTER, deploy_mode="client")


@dataclass(frozen=True)
class Submission:
    """One spark-submit of the project's application, as plain data.

    :param application_args: the arguments of ``python -m spark_jobs`` (``["run", "cloudtrail_etl", ...]``),
        or, for an operator only, a template that renders to such a list.
    :param name: the Spark application's name.
    :param conf: ``--conf`` settings (default: :func:`spark_submit_conf`).
    :param jars: ``--jars`` (default: the pinned jars' paths, :func:`spark_jobs.launch.jars.spark_submit_jars`).
    :param py_files: ``--py-files`` (none: the driver ships the code zip itself).
    :param driver_memory: ``--driver-memory`` (none: spark-submit's 1g).
    :param env_vars: the driver's environment on top of the submitter's (the provider's ``env_vars``).
    :param application: the file spark-submit runs (default: :data:`APPLICATION`).
    """

    application_args: tuple[str, ...] | str
    name: str
    conf: Mapping[str, str] = field(default_factory=spark_submit_conf)
    jars: str = field(default_factory=spark_submit_jars)
    py_files: str | None = None
    driver_memory: str | None = None
    env_vars: Mapping[str, str] | None = None
    application: str = APPLICATION

    @classmethod
    def of(cls, application_args: Sequence[str] | str, name: str, *, extra_conf: Mapping[str, str] | None = None,
           driver_memory: str | None = None, env_vars: Mapping[str, str] | None = None,
           long_running: bool = False) -> "Submission":
        """``python -m spark_jobs <application_args>`` under spark-submit, with the pinned jars, Delta's conf and
        the driver JVM's options, and ``extra_conf`` over them.

        :param long_running: a driver that lives for days (a continuous job's): the JVM's default JIT instead of
            C1 only (:mod:`spark_jobs.launch.jit`).
        """
        args = application_args if isinstance(application_args, str) else tuple(str(a) for a in application_args)
        # The openlineage-spark listener, when turned on (spark_jobs/launch/lineage_listener.py).
        jars, conf = with_listener(spark_submit_jars(), {**spark_submit_conf(long_running), **(extra_conf or {})})
        return cls(args, name, conf=conf, jars=jars, driver_memory=driver_memory,
                   env_vars=dict(env_vars) if env_vars else None)

    def hook_kwargs(self, conn_id: str = SPARK_CONN_ID) -> dict[str, Any]:
        """The keyword arguments of ``SparkSubmitHook(...)``; the application goes to ``hook.submit()``."""
        kwargs: dict[str, Any] = {"conn_id": conn_id, "conf": dict(self.conf), "jars": self.jars, "name": self.name,
                                  "application_args": (self.application_args if isinstance(self.application_args, str)
                                                       else list(self.application_args))}
        optional = {"py_files": self.py_files, "driver_memory": self.driver_memory,
                    "env_vars": dict(self.env_vars) if self.env_vars else None}
        return {**kwargs, **{key: value for key, value in optional.items() if value}}

    def operator_kwargs(self, conn_id: str = SPARK_CONN_ID) -> dict[str, Any]:
        """The keyword arguments of ``SparkSubmitOperator(...)`` (add ``task_id`` and the task's own)."""
        return {**self.hook_kwargs(conn_id), "application": self.application}

    def argv(self, connection: SparkConnection) -> list[str]:
        """The spark-submit command for ``connection``, as the provider's hook builds it for the same
        connection; the driver's environment is :meth:`environment`.

        :raises UsageError: for a master the command cannot own (YARN, Kubernetes: submit through the
            provider), for driver environment variables in cluster mode (the provider refuses them too),
            or when the arguments are still a template.
        """
        if isinstance(self.application_args, str):
            raise UsageError(f"the arguments of {self.name} are a template ({self.application_args!r}): only an "
                             "operator renders it")
        if "yarn" in connection.master or "k8s" in connection.master:
            raise UsageError(f"a {connection.master} master is submitted through Airflow's Spark provider, not a "
                             "command of this project")
        if self.env_vars and connection.deploy_mode == "cluster":
            raise UsageError("driver environment variables are not supported in standalone cluster mode")
        command = [connection.spark_binary, "--master", connection.master]
        for key, value in self.conf.items():
            command += ["--conf", f"{key}={value}"]
        for flag, value in (("--py-files", self.py_files), ("--jars", self.jars),
                            ("--driver-memory", self.driver_memory), ("--name", self.name),
                            ("--deploy-mode", connection.deploy_mode)):
            if value:
                command += [flag, value]
        return [*command, self.application, *self.application_args]

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The spark-submit process's environment: ``base`` (default: this process's) with :attr:`env_vars`."""
        return {**(os.environ if base is None else base), **(self.env_vars or {})}
