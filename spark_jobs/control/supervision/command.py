"""The driver command a supervisor starts: ``python -m spark_jobs run ...`` or ``spark-submit ...``.

Both run the job's continuous trigger (the registry's ``continuous_trigger``) in client mode, so the
driver lives in the supervisor's child process group. Nothing here reads files or imports pyspark.
"""

from __future__ import annotations

import shutil
import sys

from spark_jobs.control.monitoring.prometheus import STREAMING_METRICS_CONF
from spark_jobs.launch.submit import SparkConnection, Submission
from spark_jobs.model.errors import UsageError
from spark_jobs.model.jobs import JobSpec


def continuous_trigger(job: JobSpec, given: str | None = None) -> str:
    """The trigger of the job's supervised run: ``given``, else the registry's ``continuous_trigger``.

    :raises UsageError: the job has no continuous trigger, or ``given`` is available-now (a
        supervised run must not end by itself).
    """
    trigger = given or job.continuous_trigger
    if not trigger:
        raise UsageError(f"job {job.name!r} has no continuous_trigger in the registry; pass --trigger "
                         "processing-time:<duration>, or give the job one")
    if not trigger.strip().lower().startswith("processing-time:"):
        raise UsageError(f"a supervised run needs a processing-time trigger, got {trigger!r}; an available-now run "
                         "ends by itself (use `python -m spark_jobs run` or the catch-up DAG for it)")
    return trigger


def driver_command(job: JobSpec, *, lake: str | None = None, input_path: str | None = None,
                   trigger: str | None = None, spark_submit: bool = False, lease_ttl_seconds: float | None = None,
                   extra_args: list[str] | None = None) -> list[str]:
    """The argv of the job's driver.

    :param lake: ``--lake`` (default: the driver's ``$LAKE_ROOT``).
    :param input_path: ``--input`` (default: ``$<JOB>_INPUT`` or the registry's).
    :param trigger: the processing-time trigger (default: the registry's ``continuous_trigger``).
    :param spark_submit: ``spark-submit`` (client mode, ``$SPARK_MASTER`` or ``local[2]``: the project's
        :class:`~spark_jobs.launch.submit.Submission`, with Spark's streaming metrics for Prometheus) instead
        of ``python -m spark_jobs``.
    :param lease_ttl_seconds: ``--lease-ttl`` (default: the registry's).
    :param extra_args: more ``run`` options (e.g. ``--max-files-per-trigger 3``).
    """
    args = ["run", job.name, "--trigger", continuous_trigger(job, trigger)]
    if lake:
        args += ["--lake", str(lake)]
    if input_path:
        args += ["--input", str(input_path)]
    if lease_ttl_seconds:
        args += ["--lease-ttl", f"{lease_ttl_seconds:g}"]
    args += list(extra_args or [])
    if not spark_submit:
        return [sys.executable, "-m", "spark_jobs", *args]
    connection = SparkConnection.from_spark_master()
    if shutil.which(connection.spark_binary) is None:
        raise UsageError(f"{connection.spark_binary} is not on PATH; put the venv's bin on PATH "
                         "(eval \"$(make -s env)\") or drop --spark-submit")
    return Submission.of(args, name=job.name, extra_conf=STREAMING_METRICS_CONF, long_running=True).argv(connection)
