"""Trigger specs."""

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.model.triggers import parse_trigger


@pytest.mark.parametrize("spec, seconds, kwargs", [
    ("available-now", None, {"availableNow": True}),
    ("processing-time:10s", 10, {"processingTime": "10000 milliseconds"}),
    ("processing-time:500ms", 0.5, {"processingTime": "500 milliseconds"}),
    ("processing-time:1m", 60, {"processingTime": "60000 milliseconds"}),
])
def test_parse_trigger(spec, seconds, kwargs):
    trigger = parse_trigger(spec)
    assert (trigger.interval_seconds, trigger.writer_kwargs()) == (seconds, kwargs)


@pytest.mark.parametrize("spec", ["sometimes", "processing-time:", "processing-time:0s", "processing-time:5 parsecs"])
def test_bad_trigger_names_the_value(spec):
    with pytest.raises(UsageError, match=f"bad trigger '{spec}'"):
        parse_trigger(spec)
