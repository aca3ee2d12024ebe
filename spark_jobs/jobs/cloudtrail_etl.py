"""cloudtrail_etl: AWS CloudTrail log files become typed events; bad input goes to quarantine.

Usage::

    python -m spark_jobs run cloudtrail_etl --input landing/cloudtrail --trigger available-now
    spark-submit --master 'local[2]' spark_jobs/__main__.py run cloudtrail_etl --input landing/cloudtrail

Reads CloudTrail files as S3 delivers them (``{"Records":[...]}``), JSON-array exports and JSON lines,
gzipped or plain, and writes ``cloudtrail_events`` (one typed row per event, partitioned by UTC date)
and ``cloudtrail_quarantine`` (what could not be ingested, with the reason and the raw text).

:func:`transform` (the parser, :mod:`spark_jobs.transforms.cloudtrail.parse`) is pure: the same function runs on
``spark.read`` and on the landing source's stream. Everything else (the two tables, their routes, keys, first
delivery, delivery bounds and selects) is derived from the registry's entry, a file log type
(:mod:`spark_jobs.registry`, :mod:`spark_jobs.model.log_types`).
"""

from spark_jobs.transforms.cloudtrail.parse import transform

__all__ = ["transform"]
