"""cloudtrail_alerts in-process: the planted patterns fire once each, nothing else fires, batch equals stream.

The kill -9 and restart of a real driver, and the silence timer, are in
tests/spark_jobs/jobs/test_alerts_crash_recovery.py.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tools import sample_events as se
from spark_jobs.transforms.alert_rules import alert_id
from spark_jobs.model.errors import UsageError
from spark_jobs.registry import get_job
from tests.helpers.analytics import streamed, table

JOB = get_job("cloudtrail_alerts")


@pytest.fixture(scope="module")
def alerts(spark, tmp_path_factory):
    stream = se.event_stream(commits=6, per_commit=20, bursts=True, root=True)
    return streamed(spark, tmp_path_factory.mktemp("alerts"), JOB.name, stream)


def _ms(moment: datetime) -> int:
    return int(moment.replace(tzinfo=timezone.utc).timestamp() * 1000) if moment.tzinfo is None else \
        int(moment.timestamp() * 1000)


def test_each_planted_pattern_fires_exactly_once_and_nothing_else_fires(spark, alerts):
    rows = table(spark, alerts["lake"], "cloudtrail_alerts").collect()
    got = sorted((r["rule"], r["account_id"], r["subject"], r["source_ip"] or "", _ms(r["window_start"])) for r in rows)

    expected = sorted((rule, account, subject, ip, _ms(start)) for rule, account, subject, ip, start
                      in alerts["stream"].alerts)
    assert got == expected  # not bob (4 failures), not trent (6, split over two windows), not root via a service
    assert sorted(r["alert_id"] for r in rows) == sorted(alert_id(*key) for key in expected)
    burst = next(r for r in rows if r["rule"] == "console_login_burst")
    assert (burst["events"], burst["severity"], burst["account_name"], burst["account_known"]) == (
        5, "high", "payments-prod", True)
    mallory = sorted((e["eventTime"], e["eventID"]) for e in alerts["stream"].events
                     if e["userIdentity_userName"] == "mallory")
    assert (burst["event_id"], burst["event_time"]) == (mallory[4][1], mallory[4][0].replace(tzinfo=None))
    assert "5 failed console sign-ins by mallory from 203.0.113.9" in burst["detail"]


def test_the_batch_run_gives_the_streamed_alerts(spark, alerts):
    """Bursts and root use; the processing-time silence timers fire in neither run."""
    streamed = {r["alert_id"]: r.asDict() for r in table(spark, alerts["lake"], "cloudtrail_alerts").drop(
        "detected_at").collect()}
    batch = {r["alert_id"]: {k: v for k, v in r.asDict().items() if k != "detected_at"}
             for r in alerts["batch"]["cloudtrail_alerts"]}
    assert streamed == batch and len(streamed) == 2


def test_a_state_ttl_not_above_the_silence_threshold_is_refused():
    from spark_jobs.transforms.alert_rules import RuleSettings

    settings = {**JOB.settings, "state_ttl": "1 hour", "silent_after": "2 hours"}
    with pytest.raises(UsageError, match=r"state_ttl \(1 hour\) must be longer than silent_after \(2 hours\)"):
        RuleSettings(settings)
    with pytest.raises(UsageError, match="setting root_window 'soon' is not a positive duration"):
        RuleSettings({**JOB.settings, "root_window": "soon"})


def test_the_state_is_read_with_sparks_state_data_sources(spark, alerts):
    """Each state variable, its TTL, and its rows: one silence timer and last event per account, the rule windows."""
    from spark_jobs.driver.stream_state import read_state

    variables = read_state(spark, str(alerts["lake"].checkpoint_path(JOB.name)), show=1)
    found = {(v.operator, v.variable, v.kind, v.ttl): v.rows for v in variables}
    assert found == {("transformWithStateInPandasExec", "last_event", "ValueState", True): 3,
                     ("transformWithStateInPandasExec", "timers", "timers", False): 3,
                     # mallory's window, bob's, trent's two, the root window
                     ("transformWithStateInPandasExec", "windows", "MapState", True): 5}
    windows = next(v for v in variables if v.variable == "windows")
    assert set(windows.sample[0]) >= {"key", "user_map_key", "user_map_value"}
