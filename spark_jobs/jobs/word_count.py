"""word_count: the Structured Streaming quickstart (count the words of text files) with a complete-mode table.

Usage::

    python -m spark_jobs run word_count --input landing/words --trigger available-now
    python -m spark_jobs sql "SELECT word, count FROM word_counts ORDER BY count DESC"

Spark's quickstart counts words with ``groupBy("word").count()`` in complete output mode, the whole
result again after every micro-batch. Written with ``writeStream.format("parquet")`` that fails on a
local Spark (``Data source parquet does not support Complete output mode``: the file sink appends
only). Here each micro-batch's complete result replaces the ``word_counts`` Delta table in one
transaction (an overwrite marked with the writer's ``txnAppId``/``txnVersion``, so a re-run batch
is skipped): readers always see the counts of a whole number of micro-batches.

Words: each line lower-cased and split at every character that is not a letter, a digit or an
apostrophe; empty pieces are dropped.

**State**: the aggregation's (``stateStoreSave``): one row per distinct word, kept for ever (complete
mode has no watermark to drop anything by): bounded by the vocabulary, not by the input's length.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.driver.job_contract import BatchContext
from spark_jobs.model.jobs import JobSpec

WORD_BREAK = r"[^\p{L}\p{N}']+"


def transform(lines: DataFrame, job: JobSpec) -> DataFrame:
    """The running count of every word in ``lines`` (Spark's ``text`` source: one ``value`` per line)."""
    words = lines.select(F.explode(F.split(F.lower(F.col("value")), WORD_BREAK)).alias("word"))
    return words.where(F.col("word") != "").groupBy("word").count()


def word_counts(result: DataFrame, context: BatchContext) -> DataFrame:
    """Rows of ``word_counts``: the whole result (complete mode; the driver conforms it to the registry's schema)."""
    return result


OUTPUTS = {"word_counts": word_counts}
