"""Spark's own metrics of a continuous job, for Prometheus to scrape from the driver's UI.

A continuous driver (``run --trigger processing-time:...``: the supervisor's, the
``<job>_continuous`` DAG's) starts its Spark UI and carries these settings: Structured Streaming
reports each query's gauges to Spark's metrics system (``spark.sql.streaming.metricsEnabled``), and
the ``PrometheusServlet`` sink serves the driver's metrics in Prometheus' text format on the UI at
``<spark_ui>/metrics/prometheus/`` (the UI's address is in the driver's lease, ``checkpoint inspect
--json`` → ``driver.details.spark_ui``, and on the health page). The gauges of a query named
``cloudtrail_etl`` are ``metrics_cloudtrail_etl_driver_spark_streaming_cloudtrail_etl_<gauge>``:
``inputRate_total``, ``processingRate_total``, ``latency``, ``eventTime_watermark``,
``states_rowsTotal``, ``states_usedBytes`` (``spark.metrics.namespace`` is the app name, the job's,
instead of an app id that changes at every start). Executors' metrics are at
``<spark_ui>/metrics/executors/prometheus/``. No pyspark here: the DAGs and the supervisor build
spark-submit commands with it.
"""

from __future__ import annotations

PROMETHEUS_PATH = "/metrics/prometheus"

STREAMING_METRICS_CONF = {
    "spark.sql.streaming.metricsEnabled": "true",
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": PROMETHEUS_PATH,
    "spark.metrics.namespace": "${spark.app.name}",
    "spark.ui.prometheus.enabled": "true",
}


