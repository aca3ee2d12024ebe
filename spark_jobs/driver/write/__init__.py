"""Writing micro-batches to Delta tables: :func:`write_batch` is the one entry point (see :mod:`.batch`)."""

from spark_jobs.driver.write.batch import PLANS, BatchWritten, write_batch

__all__ = ["PLANS", "BatchWritten", "write_batch"]
