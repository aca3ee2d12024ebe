"""Finding a job's new input files at a cost that follows the window, not the history.

- :mod:`~spark_jobs.control.discovery.listing`: a bounded walk of a landing (local or S3), led by the job's key
  layout (:class:`~spark_jobs.model.layout.KeyLayout`);
- :mod:`~spark_jobs.control.discovery.notifications`: S3 event notifications from an SQS queue instead;
- :mod:`~spark_jobs.control.discovery.state`: manifests and window snapshots in the checkpoint;
- :mod:`~spark_jobs.control.discovery.planner`: which files each source offset stands for (the landing source's
  pyspark-free half: :mod:`spark_jobs.driver.landing_source`);
- :mod:`~spark_jobs.control.discovery.settings`: how a stream discovers, as the source's options;
- :mod:`~spark_jobs.control.discovery.backlog`: what waits, for ``checkpoint inspect`` and the nothing-new check;
- :mod:`~spark_jobs.control.discovery.reconcile`: the daily full listing that ingests what the window missed.

No pyspark.
"""
