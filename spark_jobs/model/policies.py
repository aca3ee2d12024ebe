"""The limits and policies a job is held to: health, alerts, progress history, restarts (no pyspark).

Each is a frozen dataclass with defaults; a registry entry overrides what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class HealthThresholds:
    """Limits the checkpoint-health sensors hold a job to.

    :param max_batch_age_seconds: a running job whose last commit is older than this is stalled.
    :param max_pending_files: more unprocessed input files than this is lag worth alerting on.
    :param lease_ttl_seconds: a driver's lease on the checkpoint whose heartbeat is older than this
        has expired (another driver may take over; the holder itself stops writing).
    """

    max_batch_age_seconds: int = 15 * 60
    max_pending_files: int = 10_000
    lease_ttl_seconds: float = 30


@dataclass(frozen=True)
class AlertThresholds:
    """When a job's health opens an incident (one alert when it opens, one when it resolves).

    Evaluated by :mod:`spark_jobs.control.monitoring.health` (the health sensor's trigger delivers the alerts;
    ``python -m spark_jobs status`` and the health page show them). The stall alert uses the job's
    :class:`HealthThresholds` (no commit for ``max_batch_age_seconds`` while input waits).

    :param slow_batches: falling behind: this many micro-batches in a row processed rows slower than
        they arrived (``processedRowsPerSecond < inputRowsPerSecond``) while input waits and more of it
        waited after them than before (the backlog grew).
    :param max_backlog_files: more input files waiting than this; ``None``: the job's
        ``HealthThresholds.max_pending_files``.
    :param max_quarantine_rate: the share of the last ``quarantine_window_batches`` batches' rows that
        went to the quarantine table, above which bad input is an incident.
    :param quarantine_window_batches: the batches the quarantine rate is taken over.
    :param max_restarts_in_window: the supervisor restarted the driver this many times within its
        restart window (or gave up): the job keeps failing.
    """

    slow_batches: int = 5
    max_backlog_files: int | None = None
    max_quarantine_rate: float = 0.05
    quarantine_window_batches: int = 10
    max_restarts_in_window: int = 3


@dataclass(frozen=True)
class ProgressHistory:
    """How a job's drivers keep their micro-batches' progress in the lake's ``streaming_progress`` table.

    :param enabled: record each micro-batch's progress (Spark's typed progress object) as a row.
    :param flush_seconds: rows are buffered in the driver and appended (delta-rs, off the query's
        thread) at most this often, and when the run ends.
    :param retention_days: rows older than this are deleted (whole days; the table is partitioned by
        date) by the drivers' recorders, at start and every hour.
    :param compact_every_commits: the recorder compacts the table's small files after this many of
        its appends.
    """

    enabled: bool = True
    flush_seconds: float = 30.0
    retention_days: int = 7
    compact_every_commits: int = 100


@dataclass(frozen=True)
class RestartPolicy:
    """How the supervisor of a continuous job restarts its driver (``python -m spark_jobs supervise``).

    A first failure (after a healthy run) is restarted at once; the backoff before restart *n* (n >= 2
    consecutive failures) is ``initial_backoff_seconds * multiplier ** (n - 2)``, capped at
    ``max_backoff_seconds``. After ``max_restarts`` restarts within ``window_seconds`` the next failure is
    not restarted: the supervisor gives up and tells a person once. A run that stayed healthy for
    ``healthy_reset_seconds`` clears both counts.

    :param initial_backoff_seconds: the wait before the second restart in a row (the first is immediate).
    :param multiplier: each further consecutive failure multiplies the wait by this.
    :param max_backoff_seconds: the longest wait.
    :param max_restarts: restarts allowed within ``window_seconds`` before giving up.
    :param window_seconds: the sliding window of the restart budget.
    :param healthy_reset_seconds: a run healthy for this long resets the consecutive failures and the
        budget.
    :param poll_seconds: how often the supervisor looks at its driver, its lease and the checkpoint.
    :param stop_grace_seconds: after SIGTERM, how long the driver gets to finish its micro-batch
        before its process group is killed (below Airflow's 60 s ``killed_task_cleanup_time``).
    :param stall_after_seconds: a driver whose lease heartbeat is older than this is stalled (a
        paused or hung process); ``None``: the lease's own ttl (after which it may not write anyway).
    :param warm_standby: keep a second, warmed-up driver waiting on the checkpoint's lease, which takes the
        job over the moment the running driver dies or is killed (:mod:`spark_jobs.driver.standby`). It costs
        a second driver's memory for as long as the job runs (docs/continuous-jobs.md has the figure).
    :param probation_batches: a new version rolled out (docs/deploying.md) is on probation until it has committed
        this many batches ...
    :param probation_seconds: ... and this long has passed (a quiet stream: three times as long, whatever it
        committed); a crash or a stall on probation rolls it back to the version before.
    :param quarantine_factor: ... and so does a quarantine share above this many times the previous version's ...
    :param quarantine_margin: ... and above it by more than this (:mod:`spark_jobs.control.rollout.probation`).
    """

    initial_backoff_seconds: float = 2.0
    multiplier: float = 2.0
    max_backoff_seconds: float = 300.0
    max_restarts: int = 5
    window_seconds: float = 1800.0
    healthy_reset_seconds: float = 600.0
    poll_seconds: float = 1.0
    stop_grace_seconds: float = 45.0
    stall_after_seconds: float | None = None
    warm_standby: bool = False
    probation_batches: int = 3
    probation_seconds: float = 300.0
    quarantine_factor: float = 3.0
    quarantine_margin: float = 0.1
