"""OpenLineage for the jobs' Spark runs, without pyspark: what each run read and wrote, and which Airflow task run
started it (docs/lineage.md).

- :mod:`.naming`: the OpenLineage names of datasets (folders, buckets, topics, queues, tables) and jobs.
- :mod:`.events`: a run's events, built with the OpenLineage client's classes; the project's run facet.
- :mod:`.emitter`: where events go (files in the lake by default, a backend when OpenLineage's settings name one),
  sent from a thread so that no run waits for them.
- :mod:`.run`: one run's events over its life, throttled (``START``, ``RUNNING`` per interval, the end).
- :mod:`.reading`: the runs that wrote a table, read back from the event files (``python -m spark_jobs lineage``).
"""
