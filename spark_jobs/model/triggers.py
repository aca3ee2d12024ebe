"""Trigger specs as people write them (``available-now``, ``processing-time:10s``)."""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.model.errors import UsageError
from spark_jobs.model.times import duration_seconds


@dataclass(frozen=True)
class Trigger:
    """A parsed trigger.

    :param spec: the text it was parsed from.
    :param interval_seconds: ``None`` for available-now, else the processing-time interval.
    """

    spec: str
    interval_seconds: float | None

    @property
    def available_now(self) -> bool:
        return self.interval_seconds is None

    def writer_kwargs(self) -> dict:
        """Keyword arguments for :meth:`pyspark.sql.streaming.DataStreamWriter.trigger`."""
        if self.available_now:
            return {"availableNow": True}
        return {"processingTime": f"{int(round(self.interval_seconds * 1000))} milliseconds"}


def parse_trigger(spec: str) -> Trigger:
    """Parse ``available-now`` or ``processing-time:<duration>`` (``500ms``, ``10s``, ``1m``).

    :raises UsageError: naming the bad spec and the accepted forms.
    """
    text = spec.strip().lower()
    if text in ("available-now", "availablenow", "available_now"):
        return Trigger(spec, None)
    if text.startswith("processing-time:"):
        try:
            return Trigger(spec, duration_seconds(text.split(":", 1)[1], "trigger interval"))
        except UsageError:
            pass
    raise UsageError(
        f"bad trigger {spec!r}; use 'available-now' or 'processing-time:<duration>' "
        "with a positive duration such as 500ms, 10s or 1m"
    )
