"""cloudtrail_activity on a generated stream with planted late events: windows, the late ledger, enrichment.

One streaming run (one commit of cloudtrail_events per micro-batch) serves the module; a second run
after an update of the accounts file shows the update used from the next micro-batch on.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from tools import sample_events as se
from spark_jobs.control.checkpoint.inspect import inspect_checkpoint
from spark_jobs.registry import get_job
from tests.helpers.analytics import accounts_file, run, streamed, table

JOB = get_job("cloudtrail_activity")
EVENT_TIME = JOB.event_time
KEY = ("window_kind", "window_start", "account_id", "eventSource", "eventName", "is_error")


@pytest.fixture(scope="module")
def activity(spark, tmp_path_factory):
    """The stream, the lake after one available-now run (one commit per micro-batch), the run's progress."""
    stream = se.event_stream(commits=6, per_commit=24, late=True, event_time=EVENT_TIME)
    return streamed(spark, tmp_path_factory.mktemp("activity"), JOB.name, stream)


def _key(row) -> tuple:
    return tuple(row[c] for c in KEY)


def _utc(moment):
    return moment.replace(tzinfo=None)


def test_every_window_count_equals_the_count_of_its_on_time_events(spark, activity):
    stream, lake = activity["stream"], activity["lake"]
    rows = table(spark, lake, "cloudtrail_activity").collect()
    got = {_key(r): r["events"] for r in rows}

    expected = {(kind, _utc(start), account, source, name, error): n
                for (kind, start, account, source, name, error), n in se.expected_counts(stream, EVENT_TIME).items()}
    assert got == expected
    assert len(rows) == len(got)  # one row per window and key
    assert {r["window_end"] - r["window_start"] for r in rows} == {timedelta(minutes=5), timedelta(hours=1)}


def test_the_batch_recount_over_on_time_events_equals_the_streamed_windows(spark, activity):
    """The same transform in batch (no watermark: every event counts), minus the ledger's pairs."""
    from spark_jobs.transforms.windows import windowed

    lake = activity["lake"]
    all_counts = Counter({_key(r): r["events"] for r in activity["batch"]["cloudtrail_activity"]})
    assert activity["batch"]["cloudtrail_late_events"] == []  # no watermark in batch: nothing is late
    ledger = table(spark, lake, "cloudtrail_late_events")
    late = Counter(_key(r) for r in ledger.collect())

    streamed = {_key(r): r["events"] for r in table(spark, lake, "cloudtrail_activity").collect()}
    assert +(all_counts - late) == Counter(streamed)
    # and the batch run counts every event in every one of its windows
    events = spark.read.format("delta").load(str(lake.table_path("cloudtrail_events")))
    assert sum(all_counts.values()) == windowed(events, EVENT_TIME, ["eventID"]).count()


def test_the_late_ledger_holds_exactly_the_late_events_with_their_windows(spark, activity):
    stream, lake = activity["stream"], activity["lake"]
    rows = table(spark, lake, "cloudtrail_late_events").collect()
    got = {(r["eventID"], r["window_kind"], r["window_start"]) for r in rows}

    expected = {(event_id, kind, _utc(start)) for event_id, kind, start in se.expected_late(stream, EVENT_TIME)}
    assert got == expected and len(rows) == len(expected)
    ids = {r["eventID"] for r in rows}
    assert stream.late <= ids  # every planted late event, for at least one window
    assert not (stream.open_late & ids)  # behind the watermark, but its windows were open: counted
    on_time = {r["eventID"] for r in stream.events} - stream.late - stream.open_late
    assert not (on_time & ids)
    for r in rows:
        assert r["window_end"] <= r["watermark"]  # Spark's rule: the window had closed
        assert r["seconds_behind_watermark"] == (r["watermark"] - r["eventTime"]).total_seconds() > 0
        assert r["window_closed_seconds"] == (r["watermark"] - r["window_end"]).total_seconds() >= 0


def test_the_ledger_matches_sparks_rows_dropped_by_watermark_in_every_batch(spark, activity):
    """Spark counts dropped rows after its partial aggregation: one per late window key; so do we, per batch."""
    lake, progress = activity["lake"], activity["progress"]
    ledger = table(spark, lake, "cloudtrail_late_events").collect()
    keys_per_batch = Counter()
    for batch_id, keys in _group(ledger).items():
        keys_per_batch[batch_id] = len(keys)
    dropped = {p.batchId: sum(op.numRowsDroppedByWatermark for op in p.stateOperators) for p in progress}

    assert sum(dropped.values()) > 0
    assert {b: n for b, n in dropped.items() if n} == dict(keys_per_batch)
    assert len(ledger) > sum(dropped.values())  # more late (event, window) pairs than late keys


def test_the_windows_state_is_what_the_progress_reports_and_only_open_windows(spark, activity):
    from spark_jobs.driver.stream_state import read_state

    [store] = read_state(spark, str(activity["lake"].checkpoint_path(JOB.name)))
    last = activity["progress"][-1]
    assert (store.operator, store.variable, store.rows) == ("stateStoreSave", None, last.stateOperators[0].numRowsTotal)
    assert 0 < store.rows < table(spark, activity["lake"], "cloudtrail_activity").count()  # closed windows evicted


def _group(ledger) -> dict[int, set]:
    found: dict[int, set] = {}
    for r in ledger:
        found.setdefault(r["batch_id"], set()).add(_key(r))
    return found


def test_rows_name_the_accounts_owner_and_mark_unknown_accounts(spark, activity):
    rows = table(spark, activity["lake"], "cloudtrail_activity").collect()
    owners = {(r["account_id"], r["account_name"], r["owner_team"], r["environment"], r["account_known"]) for r in rows}
    assert owners == {("111122223333", "payments-prod", "payments", "prod", True),
                      ("444455556666", "data-platform-dev", "data-platform", "dev", True),
                      ("777788889999", None, None, None, False)}


def test_an_update_of_the_accounts_file_is_used_from_the_next_micro_batch_on(spark, activity):
    """New commits after the file changed: the windows they touch carry the new names; the others keep theirs."""
    stream, lake, root = activity["stream"], activity["lake"], activity["root"]
    before = {_key(r): r for r in table(spark, lake, "cloudtrail_activity").collect()}
    last = max(r["eventTime"] for r in stream.events)
    more = se.event_stream(commits=2, per_commit=9, start=last + timedelta(minutes=1), seed=12,
                           accounts=("777788889999",))
    se.append_commits(spark, lake.table_path("cloudtrail_events"), more.commits)
    waiting = inspect_checkpoint(JOB, str(lake.root)).to_dict()  # the supervisor's and sensors' view
    assert (waiting["status"], waiting["backlog_files"], waiting["source_table"]["backlog_versions"]) == ("idle", 2, 2)
    updated = accounts_file(root / "reference", text="account_id,account_name,owner_team,environment\n"
                                                     "777788889999,sandbox,research,test\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACCOUNTS_PATH", str(updated))
        run(spark, JOB.name, lake, maxFilesPerTrigger="1")

    assert inspect_checkpoint(JOB, str(lake.root)).backlog_files == 0
    after = {_key(r): r for r in table(spark, lake, "cloudtrail_activity").collect()}
    touched = {k for k, r in after.items() if k not in before or r["updated_at"] != before[k]["updated_at"]}
    assert touched and {after[k]["account_id"] for k in touched} == {"777788889999"}
    assert {(after[k]["account_name"], after[k]["account_known"]) for k in touched} == {("sandbox", True)}
    untouched = set(after) - touched
    assert {k: after[k]["account_name"] for k in untouched} == {k: before[k]["account_name"] for k in untouched}
    assert any(before[k]["account_id"] == "777788889999" and not before[k]["account_known"] for k in untouched)
