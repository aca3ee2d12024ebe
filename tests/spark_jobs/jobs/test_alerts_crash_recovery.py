"""cloudtrail_alerts across a kill -9: a real driver killed the moment its first alert is committed, restarted.

While the driver runs, cloudtrail_events keeps getting commits of two accounts; a third account stops
delivering. After the restart every planted alert is in the table exactly once (the killed batch is
re-run from the checkpoint and fires the same ids), the silent account gets one ``account_silent``
alert (its processing-time timer, kept in the RocksDB state across the kill), and the accounts that
keep delivering get none.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from datetime import timedelta

from tools import sample_events as se
from spark_jobs.transforms.alert_rules import alert_id
from tests.helpers.analytics import accounts_file, events_lake, table
from tests.helpers.kills import JobDriver, run_command
from tests.helpers.processes import batch_ids

SILENT_ACCOUNT = se.ACCOUNTS[2]
DELIVERING = se.ACCOUNTS[:2]


def _driver(lake, log, env, files_per_trigger: str) -> JobDriver:
    return JobDriver(run_command("cloudtrail_alerts", "--lake", str(lake.root), "--trigger", "processing-time:1s",
                                 "--max-files-per-trigger", files_per_trigger), log, env=env)


def _alert_commits(lake) -> int:
    """Commits of the alerts table that added rows (its version 0 only creates it)."""
    log = lake.table_path("cloudtrail_alerts") / "_delta_log"
    return sum(1 for p in log.glob("*.json") if '"add"' in p.read_text()) if log.is_dir() else 0


def _alert_ids(lake) -> set[str]:
    """The alert ids committed so far, read with delta-rs (no Spark job per poll)."""
    from deltalake import DeltaTable

    return set(DeltaTable(str(lake.table_path("cloudtrail_alerts"))).to_pyarrow_table(columns=["alert_id"])
               .column("alert_id").to_pylist())


class Feeder(threading.Thread):
    """Appends a commit of the delivering accounts' events every second until stopped."""

    def __init__(self, spark, lake, after):
        super().__init__(daemon=True)
        self.spark, self.lake, self.next = spark, lake, after
        self.stop = threading.Event()
        self.commits = 0

    def run(self) -> None:
        while not self.stop.is_set():
            rows = [se.event(f"feed-{self.commits}-{i}", self.next + timedelta(seconds=i), account,
                             "s3.amazonaws.com", "GetObject") for i, account in enumerate(DELIVERING)]
            se.append_commits(self.spark, self.lake.table_path("cloudtrail_events"), [rows])
            self.next += timedelta(minutes=1)
            self.commits += 1
            self.stop.wait(1.0)


def test_each_alert_fires_once_across_a_kill_9_and_restart(spark, tmp_path):
    stream = se.event_stream(commits=5, per_commit=12, bursts=True, root=True)
    lake = events_lake(spark, tmp_path / "lake", stream)
    log = tmp_path / "driver.log"
    env = {**os.environ, "ACCOUNTS_PATH": str(accounts_file(tmp_path / "reference")),
           "CLOUDTRAIL_ALERTS_SETTINGS": json.dumps({"silent_after": "10 seconds", "state_ttl": "1 hour"})}
    checkpoint = lake.checkpoint_path("cloudtrail_alerts")

    with _driver(lake, log, env, "1") as driver:  # one commit per micro-batch: the burst's batch is mid-stream
        driver.wait_for(lambda: _alert_commits(lake) >= 1, 300, "the first alert commit")
        assert driver.kill9() == -signal.SIGKILL, driver.tail(3000)
    committed, planned = batch_ids(checkpoint / "commits"), batch_ids(checkpoint / "offsets")
    assert max(planned) < len(stream.commits) - 1  # killed with input still to read

    feeder = Feeder(spark, lake, max(e["eventTime"] for e in stream.events) + timedelta(minutes=1))
    feeder.start()
    try:
        with _driver(lake, log, env, "1000") as driver:
            expected_silence = ("account_silent", SILENT_ACCOUNT, "", "",
                                max(e["eventTime"] for e in stream.events if e["recipientAccountId"] == SILENT_ACCOUNT))
            ids = {alert_id(rule, account, subject, ip, int(start.timestamp() * 1000))
                   for rule, account, subject, ip, start in stream.alerts | {expected_silence}}
            driver.wait_for(lambda: _alert_ids(lake) >= ids, 400, "the alerts, the silence one included")
            # More batches of the delivering accounts' new commits: they must stay quiet. Wait for two more
            # commits of theirs, then for a micro-batch planned after them to be committed.
            feeds = feeder.commits
            driver.wait_for(lambda: feeder.commits >= feeds + 2, 120, "two more feeder commits")
            planned_by_now = max(batch_ids(checkpoint / "offsets"))
            driver.wait_for(lambda: max(batch_ids(checkpoint / "commits")) > planned_by_now, 300,
                            "a micro-batch over the feeder's newer commits")
            feeder.stop.set()
            feeder.join(60)
            assert driver.stop(120) == 0, driver.tail(3000)  # graceful: stops after its micro-batch
    finally:
        feeder.stop.set()

    rows = table(spark, lake, "cloudtrail_alerts").collect()
    assert sorted(r["alert_id"] for r in rows) == sorted(ids), (
        f"alerts {[(r['rule'], r['account_id'], r['subject']) for r in rows]}; batches planned {sorted(planned)}, "
        f"committed {sorted(committed)} at the kill")
    silent = next(r for r in rows if r["rule"] == "account_silent")
    assert (silent["account_id"], silent["account_known"], silent["window_start"]) == (
        SILENT_ACCOUNT, False, expected_silence[4].replace(tzinfo=None))
    assert feeder.commits >= 3
