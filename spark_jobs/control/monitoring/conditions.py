"""What is worth an alert while it lasts: the conditions :mod:`.health` raises and :mod:`.incidents` opens and resolves."""

from __future__ import annotations

from dataclasses import asdict, dataclass

CONDITIONS = ("stalled", "falling_behind", "backlog_high", "quarantine_high", "restarts_over_budget", "take_over_failed")


@dataclass(frozen=True)
class Condition:
    """Something about a job that is worth an alert while it lasts.

    :param code: one of :data:`CONDITIONS`.
    :param severity: ``warning`` or ``error``.
    :param summary: what is wrong, with the numbers.
    :param action: what to do about it.
    """

    code: str
    severity: str
    summary: str
    action: str

    def to_dict(self) -> dict:
        return asdict(self)
