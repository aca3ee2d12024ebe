"""The Airflow connection a job's driver needs, handed to the driver's process when the task runs.

A Kafka job's driver reads its brokers and credentials from ``$AIRFLOW_CONN_<ID>``
(:mod:`spark_jobs.model.kafka_connection` reads it without importing Airflow, so the driver stays light
and the command line works with an exported variable). Airflow itself keeps connections in its
metadata DB or a secrets backend, which a spark-submitted driver cannot reach. So the task looks
the connection up through Airflow when it runs (``Connection.get``: the environment, the secrets
backends, then the metadata DB through the API server) and puts it into that one variable of the
driver's environment (``SparkSubmitOperator``'s ``env_vars``; the supervisor's driver environment).
A connection added under Admin > Connections therefore reaches the job without being exported
anywhere.

It never appears in the command line on local and standalone masters (the provider hands
``env_vars`` to the process). On YARN and Kubernetes the provider turns ``env_vars`` into
``--conf spark.yarn.appMasterEnv.*`` / ``spark.kubernetes.driverEnv.*`` arguments; Airflow masks the
connection's password and secret extras in every log line (``Connection.get`` registers them with
its secrets masker), and there a secrets backend of the cluster is the better home for it.
"""

from __future__ import annotations

from spark_jobs.model.jobs import JobSpec


def connection_env(job: JobSpec) -> dict[str, str]:
    """``{"AIRFLOW_CONN_<ID>": <the connection as Airflow's JSON>}`` for a job whose source names an Airflow
    connection, and for every job the standard AWS variables of Airflow's ``aws_default`` connection when
    it exists (:mod:`streaming.aws_connection`); ``{}`` otherwise.

    :raises AirflowFailException: the connection is not defined anywhere Airflow looks (no retry: a
        retry cannot define it), naming it and where to add it.
    """
    from streaming.aws_connection import aws_env

    connection_id = getattr(job.source, "connection_id", None)
    if not connection_id:
        return aws_env()  # the bucket's settings (Airflow's aws_default), for every job
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

    from spark_jobs.model.kafka_connection import env_var

    try:
        connection = Connection.get(connection_id)
    except AirflowNotFoundException:
        raise AirflowFailException(
            f"job {job.name} reads {job.source.describe()}, but Airflow has no connection {connection_id!r}: "
            f"add it under Admin > Connections (type kafka, host broker:9092, extra with security.protocol "
            f"and the SASL/SSL settings) or set ${env_var(connection_id)} where the workers run") from None
    return {**aws_env(), env_var(connection_id): connection.as_json()}


def pass_job_connection(job: JobSpec):
    """A ``pre_execute`` hook for the job's ``SparkSubmitOperator``: the job's connection goes into the
    spark-submit's environment (added to the operator's ``env_vars``). Runs when the task runs, never
    while the DAG file is parsed."""

    def hand_over(context) -> None:
        env = connection_env(job)
        if env:
            task = context["task"]
            task.env_vars = {**(task.env_vars or {}), **env}

    return hand_over
