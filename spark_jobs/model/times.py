"""The time forms of the platform, in one place: durations as people write them and ISO-8601 UTC instants.

- :func:`duration_seconds`: ``10 minutes``, ``1 hour``, ``30s``, ``2 days``, ``500ms`` (Spark's interval words
  and their short forms); a trigger's interval, a window, a watermark delay, a discovery lookback.
- :func:`utc_iso`: an instant as ``2024-03-01T08:05:00Z`` (what requests, reports and the audit write);
  :func:`utc_iso_millis` the same of epoch milliseconds, to the millisecond.
- :func:`parse_utc`: an ISO-8601 text (UTC unless it names an offset) or a datetime, as an aware UTC datetime.

No pyspark, no Airflow.
"""

from __future__ import annotations

import datetime as dt
import re

from spark_jobs.model.errors import UsageError

UTC = dt.timezone.utc
_UNITS = {"ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "s": 1, "sec": 1, "second": 1, "seconds": 1,
          "m": 60, "min": 60, "minute": 60, "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600,
          "d": 86400, "day": 86400, "days": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}([T ][0-9:.]+)?(Z|[+-]\d{2}:?\d{2})?")


def duration_seconds(text: str, what: str = "duration") -> float:
    """Seconds in ``text`` as Spark writes intervals (``10 minutes``, ``1 hour``, ``30s``, ``2 days``).

    :raises UsageError: naming ``what`` and the bad text.
    """
    match = _DURATION.match(str(text).lower())
    if not match or match.group(2) not in _UNITS or float(match.group(1)) <= 0:
        raise UsageError(f"{what} {text!r} is not a positive duration; write it like '10 minutes', '1 hour' or '30s'")
    return float(match.group(1)) * _UNITS[match.group(2)]


def utc_iso(moment: dt.datetime) -> str:
    """``moment`` in UTC as ISO-8601 with ``Z`` (``2024-03-01T08:05:00Z``; microseconds when it has them)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def utc_iso_millis(millis: int | float | None) -> str | None:
    """Epoch milliseconds (a Delta commit's ``timestamp``, a file's modification time) as ISO-8601 UTC to the
    millisecond with ``Z`` (``2024-03-01T08:05:00.000Z``); ``None`` for ``None``."""
    if millis is None:
        return None
    return dt.datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_utc(value, what: str = "time") -> dt.datetime:
    """An aware UTC datetime from an ISO-8601 text (UTC unless it names an offset) or a datetime.

    :raises UsageError: naming ``what`` and the value, with an example of the form.
    """
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, str) and _ISO.fullmatch(value.strip()):
        try:
            moment = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise UsageError(f"{what} {value!r} is not a time (ISO-8601, e.g. 2024-03-01T08:00:00Z)") from None
    else:
        raise UsageError(f"{what} {value!r} is not a time (ISO-8601, e.g. 2024-03-01T08:00:00Z)")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
