"""The one loop every Delta commit through Spark retries in (:func:`spark_jobs.driver.write.delta_writer.commit_retrying`):
a lost commit race is redone with the policy's backoff, anything else is raised at once, the last race after the
last try."""

from __future__ import annotations

import pytest

from spark_jobs.driver.write.delta_writer import RetryPolicy, commit_retrying


class ConcurrentAppendException(Exception):
    """Named as Delta's: a lost commit race."""


def attempts(*outcomes):
    """An attempt that raises or returns each of ``outcomes`` in turn, and the list of its calls."""
    calls = []

    def attempt():
        calls.append(len(calls) + 1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return attempt, calls


def test_a_lost_race_is_redone_with_backoff_until_it_commits():
    slept, retries = [], []
    attempt, calls = attempts(ConcurrentAppendException("1"), ConcurrentAppendException("2"), "version 7")
    policy = RetryPolicy(attempts=4, first_delay=1.0, max_delay=1.5, sleep=slept.append)

    assert commit_retrying(attempt, policy, "batch 3, table t", on_retry=lambda: retries.append(1)) == "version 7"
    assert calls == [1, 2, 3] and len(retries) == 2
    assert len(slept) == 2 and 0.5 <= slept[0] <= 1.0 and 0.75 <= slept[1] <= 1.5  # doubled, capped, jittered


def test_any_other_error_is_raised_at_once():
    slept = []
    attempt, calls = attempts(ValueError("a schema that does not fit"), "never")
    with pytest.raises(ValueError, match="a schema that does not fit"):
        commit_retrying(attempt, RetryPolicy(attempts=4, sleep=slept.append), "batch 3, table t")
    assert (calls, slept) == ([1], [])


def test_the_last_lost_race_is_raised_after_the_last_try():
    slept = []
    attempt, calls = attempts(*[ConcurrentAppendException(f"race {n}") for n in range(1, 4)])
    with pytest.raises(ConcurrentAppendException, match="race 3"):
        commit_retrying(attempt, RetryPolicy(attempts=3, first_delay=0, sleep=slept.append), "optimize of t")
    assert (calls, slept) == ([1, 2, 3], [0, 0])
