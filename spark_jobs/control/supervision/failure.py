"""How a supervised driver's hold on its job ended: what the supervisor acts on next (a restart, a take-over by the
warm standby, a rollout's handover). No pyspark here."""

from __future__ import annotations

from dataclasses import dataclass

# Lines of the driver's log kept with an event.
LOG_TAIL_LINES = 20


@dataclass
class DriverEnd:
    """Why the running driver no longer holds the job.

    :param reason: in words, with the exit status or the signal and the driver's error line.
    :param exit_code: its exit status (negative: the signal), if it ended.
    :param log_tail: the end of its log.
    :param taken_over: the warm standby already holds the lease: adopt it.
    :param handover: a rollout stopped the driver for the new version's standby (not a failure).
    :param destructive: a destructive rollout stopped the driver to move its checkpoint and tables aside (not a
        failure).
    """

    reason: str
    exit_code: int | None
    log_tail: str
    taken_over: bool = False
    handover: bool = False
    destructive: bool = False
