"""The restart policy's arithmetic: backoff, the restart budget, the healthy reset.

The numbers are the registry's :class:`~spark_jobs.model.policies.RestartPolicy`; this module only
applies them (monotonic clock, so a wall-clock jump neither empties nor fills the budget).
"""

from __future__ import annotations

import time
from collections import deque

from spark_jobs.model.policies import RestartPolicy


def backoff_seconds(policy: RestartPolicy, consecutive_failures: int) -> float:
    """The wait before restarting after ``consecutive_failures`` (>= 1) failures in a row.

    Nothing after a first failure (a driver that ran healthy and died is replaced at once, as Kubernetes restarts
    a crashed container: the recovery time is the job's dark window); then ``initial * multiplier ** (n - 2)``, capped at ``max_backoff_seconds``.
    """
    n = max(1, consecutive_failures)
    if n == 1:
        return 0.0
    try:
        wait = policy.initial_backoff_seconds * policy.multiplier ** (n - 2)
    except OverflowError:
        wait = policy.max_backoff_seconds
    return float(min(wait, policy.max_backoff_seconds))


class RestartBudget:
    """At most ``policy.max_restarts`` restarts within a sliding ``policy.window_seconds``.

    :param policy: the job's restart policy.
    :param clock: a monotonic clock (seconds).
    """

    def __init__(self, policy: RestartPolicy, clock=time.monotonic) -> None:
        self.policy = policy
        self._clock = clock
        self._restarts: deque[float] = deque()

    def _trim(self, now: float) -> None:
        while self._restarts and now - self._restarts[0] >= self.policy.window_seconds:
            self._restarts.popleft()

    def count(self, now: float | None = None) -> int:
        """Restarts within the window ending ``now``."""
        now = self._clock() if now is None else now
        self._trim(now)
        return len(self._restarts)

    def exhausted(self, now: float | None = None) -> bool:
        """Whether another restart would exceed the budget (then give up)."""
        return self.count(now) >= self.policy.max_restarts

    def record(self, now: float | None = None) -> None:
        """Count one restart."""
        self._restarts.append(self._clock() if now is None else now)

    def clear(self) -> None:
        """Forget every restart (a long healthy run)."""
        self._restarts.clear()


def healthy_long_enough(policy: RestartPolicy, healthy_for_seconds: float | None) -> bool:
    """Whether a run healthy for ``healthy_for_seconds`` resets the consecutive failures and budget."""
    return healthy_for_seconds is not None and healthy_for_seconds >= policy.healthy_reset_seconds


def policy_with_overrides(policy: RestartPolicy, overrides: str | dict | None) -> RestartPolicy:
    """``policy`` with some fields replaced, from a JSON object (``--policy '{"max_restarts": 2}'``).

    :raises UsageError: naming the bad text or field, and the fields that exist.
    """
    import json
    from dataclasses import fields, replace

    from spark_jobs.model.errors import UsageError

    if not overrides:
        return policy
    known = [f.name for f in fields(RestartPolicy)]
    try:
        values = json.loads(overrides) if isinstance(overrides, str) else dict(overrides)
    except ValueError as exc:
        raise UsageError(f"--policy {overrides!r} is not JSON ({exc}); give an object of RestartPolicy fields, "
                         f"e.g. '{{\"max_restarts\": 2}}'; fields: {', '.join(known)}") from None
    if not isinstance(values, dict):
        raise UsageError(f"--policy {overrides!r} is not a JSON object; fields: {', '.join(known)}")
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise UsageError(f"unknown RestartPolicy field(s) {', '.join(unknown)} in --policy; fields: {', '.join(known)}")
    return replace(policy, **values)
