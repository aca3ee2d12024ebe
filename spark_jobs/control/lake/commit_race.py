"""Whether a Delta commit made through Spark lost a race to another writer: the one test the JVM writers' retries use.

A writer that loses such a race redoes its commit from a fresh snapshot: the batch writes
(:func:`spark_jobs.driver.write.delta_writer.commit_retrying`) and ``lake optimize``
(:func:`spark_jobs.driver.lake_tools.optimize`). Any other error is raised at once. delta-rs appends have their
own, typed test (:mod:`spark_jobs.control.lake.delta_append`).
"""

from __future__ import annotations

# Delta's commit conflicts (``io.delta.exceptions.*``, their base class, and the error classes their messages
# carry): another writer committed first; redoing the commit re-reads the table and is safe.
CONFLICTS = ("ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
             "ConcurrentTransactionException", "ConcurrentWriteException", "DeltaConcurrentModificationException",
             "MetadataChangedException", "ProtocolChangedException", "DELTA_CONCURRENT_")


def lost_commit_race(error: BaseException) -> bool:
    """Whether ``error`` is a commit that lost to another writer (safe to redo from a fresh snapshot).

    Delta's conflicts (:data:`CONFLICTS`, by the error's type or message: py4j carries the JVM's in the text);
    and, on a local file system, the race for ``_delta_log/<version>.json``, which can surface as that file not
    being found while the winner renames it.
    """
    text = f"{type(error).__name__}: {error}"
    return any(name in text for name in CONFLICTS) or ("_delta_log" in text and "FileNotFound" in text)
