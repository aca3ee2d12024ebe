"""What the stateful analytics jobs share (``cloudtrail_activity``, ``cloudtrail_alerts``, ``word_count``).

- :mod:`~spark_jobs.analytics.windows`: the event-time windows (tumbling and sliding) of the registry.
- :mod:`~spark_jobs.analytics.dimensions`: reference files (``accounts``) read for each micro-batch and
  joined to its rows.
- :mod:`~spark_jobs.analytics.batch_writer`: writes each micro-batch of a stateful query's result to
  the job's tables, exactly once, with what the batch needs to know (its watermark for late data,
  its planned time, the dimensions).
- :mod:`~spark_jobs.analytics.alert_rules`: the ``transformWithStateInPandas`` processor of the alerts.
- :mod:`~spark_jobs.analytics.state`: reading a job's state with Spark's ``state-metadata`` and
  ``statestore`` data sources (``python -m spark_jobs state JOB``).
"""
