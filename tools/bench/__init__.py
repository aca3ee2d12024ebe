"""The pieces of ``python -m spark_jobs bench`` (see :mod:`tools.bench.benchmark`).

- :mod:`~tools.bench.data`: the input, real CloudTrail records with fresh ids and times.
- :mod:`~tools.bench.bare`: bare Spark doing the job's work, the yardstick.
- :mod:`~tools.bench.throughput`: records/s of both, warm-ups, and the profile of the job's time.
- :mod:`~tools.bench.freshness`: file landed to events visible, with a processing-time job.
- :mod:`~tools.bench.adhoc`: one query on the raw files and on the table.
- :mod:`~tools.bench.launches`: no-op catch-up and Airflow against spark-submit, as processes.
- :mod:`~tools.bench.probes`: streaming progress, Spark's job timeline, peak memory.
- :mod:`~tools.bench.history_scale`: discovery, restart, inspect and the no-op on landings of 10k to 1M ingested
  deliveries (input: :mod:`~tools.bench.history_landing`, :mod:`~tools.bench.history_state`; Spark's file source
  beside it: :mod:`~tools.bench.file_source_listing`).
"""
