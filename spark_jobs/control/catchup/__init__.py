"""Catching up on a file job's input: the available-now runs of ``<job>_catchup`` and the backfills, without pyspark.

- :mod:`~spark_jobs.control.catchup.plan`: what one catch-up run spark-submits, the live job or one backfilled data
  interval;
- :mod:`~spark_jobs.control.catchup.landing_watch`: whether input landed since the watcher's last look (the
  data-driven catch-up's trigger);
- :mod:`~spark_jobs.control.catchup.nothing_new`: whether an available-now run has provably nothing to do, decided
  before Spark starts;
- :mod:`~spark_jobs.control.catchup.backfill`: a backfill request checked field by field, and the files of its date
  range;
- :mod:`~spark_jobs.control.catchup.priority`: a backfill driver's lower CPU priority, so the live job keeps its cores.
"""
