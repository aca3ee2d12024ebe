"""The pieces of ``python -m spark_jobs bench`` (see :mod:`spark_jobs.benchmark`).

- :mod:`~spark_jobs.bench.data`: the input, real CloudTrail records with fresh ids and times.
- :mod:`~spark_jobs.bench.bare`: bare Spark doing the job's work, the yardstick.
- :mod:`~spark_jobs.bench.throughput`: records/s of both, warm-ups, and the profile of the job's time.
- :mod:`~spark_jobs.bench.freshness`: file landed to events visible, with a processing-time job.
- :mod:`~spark_jobs.bench.adhoc`: one query on the raw files and on the table.
- :mod:`~spark_jobs.bench.launches`: no-op catch-up and Airflow against spark-submit, as processes.
- :mod:`~spark_jobs.bench.probes`: streaming progress, Spark's job timeline, peak memory.
"""
