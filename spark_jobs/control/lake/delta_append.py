"""Append rows to a small Delta table through delta-rs, retrying only a lost commit race.

The platform's own tables (``streaming_progress``, ``ops_audit``) are appended to without Spark. Two writers may
create such a table at once (two drivers' first progress rows, two on-call runs): delta-rs then refuses the
loser's commit with ``CommitFailedError`` ("Metadata changed since last commit"), and the loser only has to try
again, re-reading the log. Any other error (a schema that does not fit, a store that refuses us) is not made
better by trying again, so it is raised at once. tenacity does the retrying (bounded attempts, a short
jittered backoff); this module says what is retryable.
"""

from __future__ import annotations

import logging

from tenacity import before_sleep_log, retry, retry_if_exception_type, stop_after_attempt, wait_random_exponential

log = logging.getLogger("spark_jobs")

ATTEMPTS = 5


def _commit_failed() -> type[Exception]:
    from deltalake.exceptions import CommitFailedError

    return CommitFailedError


def append(path: str, table, **write_options) -> None:
    """``write_deltalake(path, table, mode="append", **write_options)``, again after a lost commit race.

    :raises deltalake.exceptions.CommitFailedError: after :data:`ATTEMPTS` lost races.
    :raises Exception: any other error of delta-rs, at once.
    """
    from deltalake import write_deltalake

    @retry(retry=retry_if_exception_type(_commit_failed()), stop=stop_after_attempt(ATTEMPTS),
           wait=wait_random_exponential(multiplier=0.1, max=2), reraise=True,
           before_sleep=before_sleep_log(log, logging.INFO))
    def attempt() -> None:
        write_deltalake(path, table, mode="append", **write_options)

    attempt()
