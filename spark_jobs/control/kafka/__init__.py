"""A Kafka job's side of the control plane, without pyspark.

- :mod:`~spark_jobs.control.kafka.lag`: the consumer lag, from the checkpoint's offsets and the brokers
  (``checkpoint inspect``, a Kafka job's reprocess);
- :mod:`~spark_jobs.control.kafka.options`: ``run``'s overrides of the Kafka source's options, checked before a JVM
  starts.
"""
