"""The stateful security rules of ``cloudtrail_alerts``: a ``transformWithStateInPandas`` processor.

The input is grouped by (``rule``, ``account_id``, ``subject``, ``source_ip``); each group is one
rule's key:

==========================  =========================================  =====================================
rule                        key                                        fires
==========================  =========================================  =====================================
``console_login_burst``     account, user name, source IP              the ``console_login_failures``-th
                                                                       failed ``ConsoleLogin`` of one
                                                                       event-time window of
                                                                       ``console_login_window`` (tumbling)
``root_identity_use``       account, root ARN                          the first call by the root identity
                                                                       in a ``root_window`` (tumbling)
``account_silent``          account                                    no events of the account received
                                                                       for ``silent_after`` (a processing-
                                                                       time timer, the heartbeat example)
==========================  =========================================  =====================================

**Alert ids** are a hash of (rule, key, anchor), the anchor being the window's start (window rules)
or the account's last event time (silence). A micro-batch re-run after a crash starts from the same
state version with the same input, so it fires the same alerts with the same ids, which the
``cloudtrail_alerts`` table (insert-only by ``alert_id``) and Delta's idempotent writes hold once.

**State** (RocksDB; Spark's ``transformWithStateInPandas`` needs it), per key, each with a TTL of
``state_ttl`` (processing time; TTL exists only in processing-time mode):

- ``windows``: map of window start (ms) -> (events counted, alerted): the window rules. Windows that
  ended more than ``allowed_lateness`` before the newest event of the key are removed when input
  arrives; the TTL drops keys that stay quiet.
- ``last_event``: the account's newest event (ms, id): the silence rule; cleared when its alert fires.
- one processing-time timer per account: ``silent_after`` after the last batch with its events.

Processing-time mode runs a micro-batch after every micro-batch (``shouldRunAnotherBatch`` is always
true), so an available-now run would never end: the job turns no-data micro-batches off, and timers
are checked by the micro-batches that have input (any account's).
"""

from __future__ import annotations

import hashlib
from typing import Iterator

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from spark_jobs.model.streams import duration_seconds

BURST, ROOT, SILENT = "console_login_burst", "root_identity_use", "account_silent"
SEVERITY = {BURST: "high", ROOT: "critical", SILENT: "medium"}
INPUT_COLUMNS = ("rule", "account_id", "subject", "source_ip", "event_time", "event_id")
OUTPUT_SCHEMA = ("alert_id STRING, rule STRING, severity STRING, account_id STRING, subject STRING, "
                 "source_ip STRING, window_start TIMESTAMP, window_end TIMESTAMP, event_time TIMESTAMP, "
                 "event_id STRING, events BIGINT, detail STRING")
OUTPUT_COLUMNS = [part.split()[0] for part in OUTPUT_SCHEMA.split(", ")]


def alert_id(rule: str, account: str, subject: str, source_ip: str, anchor_ms: int) -> str:
    """The stable id of an alert: the same rule, key and window (or last event) give the same id."""
    text = "|".join((rule, account, subject, source_ip, str(int(anchor_ms))))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class RuleSettings:
    """The rules' thresholds and durations (the job's ``settings``), in milliseconds.

    :param settings: ``console_login_failures``, ``console_login_window``, ``root_window``,
        ``silent_after``, ``allowed_lateness``, ``state_ttl``.
    :raises UsageError: a missing or bad value, or a ``state_ttl`` not above ``silent_after`` (the
        account's last event would expire before its timer fires).
    """

    def __init__(self, settings: dict[str, str]):
        from spark_jobs.model.errors import UsageError

        def ms(name: str) -> int:
            return int(duration_seconds(settings[name], f"setting {name}") * 1000)

        try:
            self.failures = int(settings["console_login_failures"])
        except (KeyError, ValueError):
            raise UsageError(f"setting console_login_failures must be a whole number >= 1, got "
                             f"{settings.get('console_login_failures')!r}") from None
        if self.failures < 1:
            raise UsageError(f"setting console_login_failures must be >= 1, got {self.failures}")
        self.window_ms = {BURST: ms("console_login_window"), ROOT: ms("root_window")}
        self.threshold = {BURST: self.failures, ROOT: 1}
        self.silent_after_ms = ms("silent_after")
        self.lateness_ms = ms("allowed_lateness")
        self.ttl_ms = ms("state_ttl")
        if self.ttl_ms <= self.silent_after_ms:
            raise UsageError(f"setting state_ttl ({settings['state_ttl']}) must be longer than silent_after "
                             f"({settings['silent_after']}): an account's last event would expire before its "
                             "silence timer fires")


def _ms(values: pd.Series) -> pd.Series:
    """Epoch milliseconds of a timestamp column (naive values are UTC: the session's time zone)."""
    if getattr(values.dt, "tz", None) is not None:
        values = values.dt.tz_convert("UTC").dt.tz_localize(None)
    return values.astype("datetime64[ns]").astype("int64") // 1_000_000


def _timestamp(ms: int | None):
    return None if ms is None else pd.Timestamp(int(ms), unit="ms", tz="UTC")


class AlertRules(StatefulProcessor):
    """The processor (see the module docstring); one instance per task, made from the settings.

    :param settings: :class:`RuleSettings`.
    """

    def __init__(self, settings: RuleSettings):
        self.settings = settings

    def init(self, handle: StatefulProcessorHandle) -> None:
        ttl = self.settings.ttl_ms
        self.handle = handle
        self.windows = handle.getMapState("windows", "start_ms BIGINT", "events BIGINT, alerted BOOLEAN", ttl)
        self.last_event = handle.getValueState("last_event", "event_ms BIGINT, event_id STRING", ttl)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        rule, account, subject, source_ip = key
        frame = pd.concat(list(rows), ignore_index=True)
        frame = frame.assign(ms=_ms(frame["event_time"])).sort_values(["ms", "event_id"], kind="stable")
        if rule == SILENT:
            self._seen(frame, timerValues.getCurrentProcessingTimeInMs())
            return
        alerts = self._count(rule, account, subject, source_ip, frame)
        if alerts:
            yield pd.DataFrame(alerts, columns=OUTPUT_COLUMNS)

    def _seen(self, frame: pd.DataFrame, now_ms: int) -> None:
        """The silence rule: keep the newest event, and (re)start the account's timer."""
        newest = frame.iloc[-1]
        known = self.last_event.get() if self.last_event.exists() else None
        if known is None or int(newest["ms"]) > known[0]:
            self.last_event.update((int(newest["ms"]), str(newest["event_id"])))
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        self.handle.registerTimer(now_ms + self.settings.silent_after_ms)

    def _count(self, rule: str, account: str, subject: str, source_ip: str, frame: pd.DataFrame) -> list[tuple]:
        """The window rules: count each window's events in event-time order; fire at the threshold."""
        size, threshold = self.settings.window_ms[rule], self.settings.threshold[rule]
        frame = frame.assign(start=frame["ms"] // size * size)
        alerts = []
        for start, events in frame.groupby("start", sort=True):
            start = int(start)
            counted, alerted = self.windows.getValue((start,)) or (0, False)
            if not alerted and counted + len(events) >= threshold:
                crossing = events.iloc[threshold - counted - 1]
                alerts.append(self._window_alert(rule, account, subject, source_ip, start, size, crossing))
                alerted = True
            self.windows.updateValue((start,), (counted + len(events), alerted))
        horizon = int(frame["ms"].max()) - self.settings.lateness_ms
        for (start,) in list(self.windows.keys()):
            if start + size < horizon:
                self.windows.removeKey((start,))
        return alerts

    def _window_alert(self, rule, account, subject, source_ip, start, size, crossing) -> tuple:
        threshold = self.settings.threshold[rule]
        window = f"{_timestamp(start):%Y-%m-%d %H:%M} to {_timestamp(start + size):%H:%M} UTC"
        if rule == BURST:
            detail = (f"{threshold} failed console sign-ins by {subject} from {source_ip} in account {account} "
                      f"within {window}")
        else:
            detail = f"the root identity {subject} of account {account} was used ({window})"
        return (alert_id(rule, account, subject, source_ip, start), rule, SEVERITY[rule], account, subject,
                source_ip or None, _timestamp(start), _timestamp(start + size), _timestamp(crossing["ms"]),
                str(crossing["event_id"]), threshold, detail)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        rule, account, subject, source_ip = key
        if rule != SILENT or not self.last_event.exists():
            return
        event_ms, event_id = self.last_event.get()
        self.last_event.clear()
        minutes = self.settings.silent_after_ms / 60000
        detail = (f"no CloudTrail events from account {account} for more than {minutes:g} minutes; its last event "
                  f"is from {_timestamp(event_ms):%Y-%m-%d %H:%M:%S} UTC")
        yield pd.DataFrame([(alert_id(rule, account, subject, source_ip, event_ms), rule, SEVERITY[rule], account,
                             None, None, _timestamp(event_ms), None, _timestamp(event_ms), event_id, None, detail)],
                           columns=OUTPUT_COLUMNS)

    def close(self) -> None:
        pass
