"""Airflow's ``aws_default`` connection as the standard AWS variables of a task's driver.

A data engineer on AWS keeps the bucket's credentials in Airflow (Admin > Connections, type ``aws``, the
Amazon provider's form: login = access key id, password = secret access key, extra ``region_name``,
``endpoint_url`` or ``service_config.s3.endpoint_url``, ``aws_session_token``) or gives the workers an
instance role. The drivers read only the standard variables (:mod:`spark_jobs.model.object_store`), so
when the task runs, :func:`aws_env` turns the connection into ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` and ``AWS_ENDPOINT_URL`` for the
spark-submit's environment (never its command line), as :mod:`streaming.job_connections` does for a
job's Kafka connection. No connection: nothing is added, and the drivers use the task's own environment,
the AWS config files or the instance role. ``Connection.get`` registers the password and the session
token with Airflow's secrets masker, so a log line that would hold them shows ``***``; the values are
added after the task's templates are rendered, so no rendered field holds them either. Never read while
a DAG file is parsed.
"""

from __future__ import annotations

import json

AWS_CONN_ID = "aws_default"


def aws_variables(login: str | None, password: str | None, extra: dict) -> dict[str, str]:
    """The standard AWS variables for a connection's fields (only those that are set)."""
    service = ((extra.get("service_config") or {}).get("s3") or {}) if isinstance(extra, dict) else {}
    values = {
        "AWS_ACCESS_KEY_ID": login or extra.get("aws_access_key_id"),
        "AWS_SECRET_ACCESS_KEY": password or extra.get("aws_secret_access_key"),
        "AWS_SESSION_TOKEN": extra.get("aws_session_token"),
        "AWS_REGION": extra.get("region_name"),
        "AWS_ENDPOINT_URL": service.get("endpoint_url") or extra.get("endpoint_url"),
    }
    return {key: str(value) for key, value in values.items() if value}


def aws_env(conn_id: str = AWS_CONN_ID) -> dict[str, str]:
    """The variables of Airflow's ``conn_id`` connection; ``{}`` when Airflow has no such connection."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        connection = Connection.get(conn_id)
    except AirflowNotFoundException:
        return {}
    extra = connection.extra_dejson if hasattr(connection, "extra_dejson") else json.loads(connection.extra or "{}")
    token = (extra or {}).get("aws_session_token")
    if token:
        from airflow.sdk.log import mask_secret

        mask_secret(token)
    return aws_variables(connection.login, connection.password, extra or {})
