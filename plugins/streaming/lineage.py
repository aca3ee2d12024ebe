"""The Airflow task run a spark-submit reports as its OpenLineage parent (docs/lineage.md).

Airflow's OpenLineage provider reports each task run (its events: ``<lake>/_lineage/airflow/`` by default) under a
run id it derives from the task instance; :func:`parent_conf` names that run, and the DAG run as its root, with the
provider's own macros, as the ``spark.openlineage.parent*`` settings the driver reads
(:mod:`spark_jobs.driver.lineage`) and the openlineage-spark listener would. The catch-up, backfill, continuous and
on-call operators add them to their :class:`~spark_jobs.launch.submit.Submission`. Nothing when the provider is off
(no transport configured) or not installed: the run then has no parent.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def parent_conf(context) -> dict[str, str]:
    """The Spark settings naming ``context``'s task run and DAG run as the Spark run's parent and root."""
    try:
        from airflow.providers.openlineage.conf import is_disabled
        from airflow.providers.openlineage.plugins.macros import (lineage_job_name, lineage_job_namespace,
                                                                  lineage_root_job_name, lineage_root_job_namespace,
                                                                  lineage_root_run_id, lineage_run_id)

        from spark_jobs.control.lineage.events import Parent

        if is_disabled():
            return {}
        ti = context["ti"]
        return Parent(lineage_job_namespace(), lineage_job_name(ti), lineage_run_id(ti),
                      lineage_root_job_namespace(ti), lineage_root_job_name(ti), lineage_root_run_id(ti)).to_conf()
    except Exception as error:  # noqa: BLE001 - lineage never fails a task: the run goes without a parent
        log.warning("OpenLineage: this run's parent is not passed to Spark: %s", error)
        return {}
