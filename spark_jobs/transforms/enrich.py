"""A dimension's columns joined to a frame: :func:`enrich` (the analytics jobs' selects add the accounts file's).

The driver reads each dimension file for every micro-batch and hands its rows to a stateful job's selects as
a small DataFrame (:mod:`spark_jobs.driver.dimensions`, ``BatchContext.dimensions``); this joins them.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def enrich(frame: DataFrame, dimension_rows: DataFrame, on: str, known_column: str) -> DataFrame:
    """``frame`` with the dimension's columns joined on ``on`` (a left join: every row is kept) and
    ``known_column`` true where the dimension knows the key, false where it does not (NULL key too).

    :param frame: a batch DataFrame.
    :param dimension_rows: the dimension's rows, its key column first
        (:func:`spark_jobs.driver.dimensions.dimension_frame`).
    :param on: the column of ``frame`` that holds the key.
    :param known_column: the name of the flag column.
    """
    key = dimension_rows.columns[0]
    looked_up = dimension_rows.withColumn("_known", F.lit(True))
    joined = frame.join(F.broadcast(looked_up), frame[on] == looked_up[key], "left").drop(looked_up[key])
    return joined.withColumn(known_column, F.coalesce(F.col("_known"), F.lit(False))).drop("_known")
