"""Launching Spark: the pinned jars, the driver's class archive, the code zip for executors, the spark-submit command. No pyspark."""
