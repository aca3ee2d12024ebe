"""A batch of dated files goes in one pipelined pass; what it cannot take goes the cached way, exactly once."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import deltalake
import pytest

from spark_jobs.driver.write.cached import STEP_PARSE, STEP_WRITE
from spark_jobs.model.lake import Lake
from tools.sample_data import write_sample_landing
from tests.helpers.cloudtrail import JOB, dated_delivery, source_records

EVENTS, QUARANTINE = "cloudtrail_events", "cloudtrail_quarantine"


def _app_versions(table: Path) -> dict[str, int]:
    """Every Delta app id in the table's log with its last version (the test's own reading of the log)."""
    found: dict[str, int] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found[action["txn"]["appId"]] = action["txn"]["version"]
    return found


def _merge_predicates(table: Path) -> list[str]:
    return [h["operationParameters"]["predicate"] for h in deltalake.DeltaTable(str(table)).history()
            if h.get("operation") == "MERGE"]


def _landing_files(landing: Path) -> list[Path]:
    return sorted(p for p in landing.rglob("*.json.gz") if not p.name.startswith((".", "_")))


@pytest.fixture
def cached_steps(monkeypatch) -> list[str]:
    """The steps the cached plan names (its Spark jobs' descriptions), in order: it writes a one pass's rest."""
    from spark_jobs.driver.write import cached

    seen: list[str] = []
    named = cached.job_step

    def recording(spark, what: str):
        seen.append(what)
        return named(spark, what)

    monkeypatch.setattr(cached, "job_step", recording)
    return seen


def test_good_events_of_dated_files_are_written_in_one_pass(tmp_path, run_job, tables):
    manifest = write_sample_landing(tmp_path / "landing", files=4, records_per_file=10, seed=61,
                                    include_bad_files=False)
    summary = run_job(tmp_path / "landing", tmp_path / "lake")
    lake = Lake(tmp_path / "lake")
    events = tables(tmp_path / "lake")[EVENTS]
    assert Counter(r.eventID for r in events.select("eventID").collect()) == Counter(manifest.good_event_ids)
    assert summary.rows == {EVENTS: len(manifest.good_event_ids), QUARANTINE: 0}
    # One MERGE, bounded by the files' delivery dates and the day before each (not by the events' own
    # dates, which only a pass over the data knows), under the writer's one app id; quarantine untouched.
    delivered = {dt.datetime.strptime(p.name.split("_")[3][:8], "%Y%m%d").date() for p in _landing_files(tmp_path / "landing")}
    bound = sorted(delivered | {d - dt.timedelta(days=1) for d in delivered})
    event_dates = {r.date for r in events.select("date").distinct().collect()}
    assert set(bound) - event_dates  # a date no event has: only the file names could name it
    [predicate] = _merge_predicates(lake.table_path(EVENTS))
    assert all(d.isoformat() in predicate for d in bound), predicate
    assert [app.rsplit(":", 1)[1] for app in _app_versions(lake.table_path(EVENTS))] == [EVENTS]
    assert deltalake.DeltaTable(str(lake.table_path(QUARANTINE))).version() == 0


def test_a_batch_with_a_bad_record_or_an_old_event_writes_the_rest_under_a_second_marker(tmp_path, run_job, tables,
                                                                                        cached_steps):
    """Quarantine rows, and an event older than its file's delivery dates, are written by the cached way (its count
    pass collects the old event's date, which bounds the events table's MERGE)."""
    manifest = write_sample_landing(tmp_path / "landing", files=3, records_per_file=8, seed=62,
                                    include_bad_files=False)
    records = source_records(_landing_files(tmp_path / "landing")[0])
    old = dict(records[0], eventID="old-event-0001", eventTime="2020-01-01T10:00:00Z")
    no_id = {k: v for k, v in records[1].items() if k != "eventID"}
    delivered = dt.datetime(2024, 3, 2, 10, 5, tzinfo=dt.UTC)
    dated_delivery(tmp_path / "landing" / "extra", delivered, [old, no_id, dict(records[2], eventID="extra-0002")], "X1")
    summary = run_job(tmp_path / "landing", tmp_path / "lake")
    assert cached_steps == [STEP_PARSE, f"{STEP_WRITE}{EVENTS}", f"{STEP_WRITE}{QUARANTINE}"]
    lake = Lake(tmp_path / "lake")
    got = tables(tmp_path / "lake")
    expected = Counter(manifest.good_event_ids) + Counter(["old-event-0001", "extra-0002"])
    assert Counter(r.eventID for r in got[EVENTS].select("eventID").collect()) == expected
    assert [(r.reason, r.record_index) for r in got[QUARANTINE].collect()] == [("missing_event_id", 1)]
    assert summary.rows == {EVENTS: sum(expected.values()), QUARANTINE: 1}
    apps = _app_versions(lake.table_path(EVENTS))
    assert sorted(app.split(":", 1)[1] for app in apps) == [EVENTS, f"{EVENTS}:rest"] and set(apps.values()) == {0}
    # A second run finds nothing new.
    assert run_job(tmp_path / "landing", tmp_path / "lake").rows == {EVENTS: 0, QUARANTINE: 0}
    assert tables(tmp_path / "lake")[EVENTS].count() == sum(expected.values())


def test_a_batch_run_again_after_its_one_pass_commit_writes_only_the_rest(spark, tmp_path, tables):
    """A crash after the one pass committed the events: the batch run again adds the quarantine, no event twice."""
    from spark_jobs.driver.write.pipelined import write_pipelined
    from spark_jobs.driver.job_modules import job_module, output_schemas, table_targets
    from spark_jobs.driver.source_readers import read_files
    from spark_jobs.driver.write import write_batch
    from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, create_tables

    manifest = write_sample_landing(tmp_path / "landing", files=2, records_per_file=6, seed=63,
                                    include_bad_files=False)
    records = source_records(_landing_files(tmp_path / "landing")[0])
    bad_time = dict(records[0], eventID="bad-time-0001", eventTime="yesterday")
    dated_delivery(tmp_path / "landing" / "extra", dt.datetime(2024, 3, 2, 10, 5), [bad_time], "X2")
    lake = Lake(tmp_path / "lake")
    module = job_module(JOB)
    targets = table_targets(JOB, lake)
    create_tables(spark, targets, output_schemas(spark, JOB))
    writer = ExactlyOnceWriter(spark, targets, "crash-test")
    files = read_files(spark, JOB, tmp_path / "landing", dict(JOB.file_source_options), streaming=False)

    first = write_pipelined(module, JOB, writer, targets, files, 7)
    assert (first.complete, first.files, first.rows) == (False, 3, {EVENTS: 12, QUARANTINE: 0})
    assert first.carried == {EVENTS: 12, QUARANTINE: 1}
    # ... the driver dies here; the restarted query runs batch 7 again.
    again = write_batch(files, 7, job=JOB, module=module, writer=writer, targets=targets)
    assert (again.plan, again.inputs, again.rows) == ("cached", 3, {EVENTS: 0, QUARANTINE: 1})
    assert again.carried == {EVENTS: 12, QUARANTINE: 1}
    got = tables(tmp_path / "lake")
    assert Counter(r.eventID for r in got[EVENTS].collect()) == Counter(manifest.good_event_ids)
    assert [r.reason for r in got[QUARANTINE].collect()] == ["bad_event_time"]
    # ... and once more (a second crash after both commits): nothing is written again.
    versions = {t.name: deltalake.DeltaTable(str(t.path)).version() for t in targets}
    third = write_batch(files, 7, job=JOB, module=module, writer=writer, targets=targets)
    assert (third.inputs, third.rows) == (3, {EVENTS: 0, QUARANTINE: 0})
    assert {t.name: deltalake.DeltaTable(str(t.path)).version() for t in targets} == versions


def test_a_batch_whose_events_all_fit_leaves_only_the_quarantine_to_write(tmp_path, run_job, tables, cached_steps):
    """A bad record in a dated batch: the events table gets the one pass's commit alone; quarantine its own, written
    without a count pass (the one pass counted its rows, and its key bounds no partition)."""
    manifest = write_sample_landing(tmp_path / "landing", files=2, records_per_file=5, seed=64,
                                    include_bad_files=False)
    records = source_records(_landing_files(tmp_path / "landing")[0])
    no_time = {k: v for k, v in records[0].items() if k != "eventTime"}
    dated_delivery(tmp_path / "landing" / "extra", dt.datetime(2024, 3, 2, 10, 5), [no_time], "X3")
    summary = run_job(tmp_path / "landing", tmp_path / "lake")
    assert cached_steps == [f"{STEP_WRITE}{QUARANTINE}"]
    lake = Lake(tmp_path / "lake")
    got = tables(tmp_path / "lake")
    assert Counter(r.eventID for r in got[EVENTS].collect()) == Counter(manifest.good_event_ids)
    assert [r.reason for r in got[QUARANTINE].collect()] == ["missing_event_time"]
    assert summary.rows == {EVENTS: len(manifest.good_event_ids), QUARANTINE: 1}
    assert deltalake.DeltaTable(str(lake.table_path(EVENTS))).version() == 1  # created, then the one pass
    assert [app.rsplit(":", 1)[1] for app in _app_versions(lake.table_path(EVENTS))] == [EVENTS]
    assert [app.rsplit(":", 1)[1] for app in _app_versions(lake.table_path(QUARANTINE))] == [QUARANTINE]


@pytest.mark.parametrize(("most", "most_in_driver"), [(10_000, None), (5, None), (5, 0), (1, None)],
                         ids=["collected_here", "found_in_driver", "found_by_spark", "ranked_whole"])
def test_later_deliveries_in_one_batch_and_keys_the_table_holds_are_left_out_of_its_one_commit(
        tmp_path, run_job, tables, monkeypatch, most, most_in_driver):
    """The one pass writes its rows first and checks their keys after: a key delivered twice in the batch keeps
    its first delivery (by file, then record), a key the table holds adds nothing, in one MERGE-recorded commit;
    a batch of more rows than ``most`` has them found in the driver from its key column (by Spark, over
    ``most_in_driver`` rows), and with more rows to leave out than ``most``, the new rows are ranked whole."""
    from spark_jobs.driver.write import delta_writer, staged

    monkeypatch.setattr(delta_writer, "MOST_DUPLICATES_COLLECTED", most)
    if most_in_driver is not None:
        monkeypatch.setattr(staged, "MOST_ROWS_CHECKED_LOCALLY", most_in_driver)
    ranked: list[bool] = []  # Spark's ranking by key: of the later deliveries (False), or of the whole batch (True)
    rank = staged._ranked
    monkeypatch.setattr(staged, "_ranked", lambda target, rows, keep_first: ranked.append(keep_first) or rank(
        target, rows, keep_first))
    landing = tmp_path / "landing"
    base = dt.datetime(2024, 3, 2, 10, 5, tzinfo=dt.UTC)
    records = [_record_at(f"ev-{i}", base - dt.timedelta(minutes=3, seconds=i)) for i in range(6)]
    dated_delivery(landing / "a", base, records[:4], "A")
    run_job(landing, tmp_path / "lake")
    # One batch of 7 rows, 5 to leave out: B repeats ev-0 and ev-3 (both in the table) and ev-5 twice; C repeats ev-4
    # and ev-5.
    dated_delivery(landing / "b", base + dt.timedelta(minutes=1), [records[0], records[4], records[5], records[5],
                                                                 records[3]], "B")
    dated_delivery(landing / "c", base + dt.timedelta(minutes=2), [records[5], records[4]], "C")
    summary = run_job(landing, tmp_path / "lake")
    lake = Lake(tmp_path / "lake")
    events = tables(tmp_path / "lake")[EVENTS]
    assert sorted((r.eventID, r._source_file.rsplit("_", 1)[1], r._record_index) for r in events.collect()) == [
        ("ev-0", "A.json.gz", 0), ("ev-1", "A.json.gz", 1), ("ev-2", "A.json.gz", 2), ("ev-3", "A.json.gz", 3),
        ("ev-4", "B.json.gz", 1), ("ev-5", "B.json.gz", 2)]
    assert summary.rows == {EVENTS: 2, QUARANTINE: 0}
    history = deltalake.DeltaTable(str(lake.table_path(EVENTS))).history(1)[0]
    assert (history["operation"], history["operationMetrics"]["numTargetRowsInserted"],
            history["operationMetrics"]["numSourceRows"]) == ("MERGE", "2", "7")
    # No file of the table holds a row that is not committed (each left-out row's file was written again).
    committed = {Path(p).name for p in deltalake.DeltaTable(str(lake.table_path(EVENTS))).file_uris()}
    assert {p.name for p in lake.table_path(EVENTS).rglob("*.parquet")} == committed
    assert ranked == {10_000: [], 5: [] if most_in_driver is None else [False], 1: [True]}[most]


def _record_at(event_id: str, when: dt.datetime) -> dict:
    return {"eventVersion": "1.08", "eventTime": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "eventSource": "s3.amazonaws.com",
            "eventName": "GetObject", "awsRegion": "eu-west-1", "eventID": event_id, "eventType": "AwsApiCall",
            "recipientAccountId": "111122223333", "userIdentity": {"type": "IAMUser", "accountId": "111122223333"}}


@pytest.mark.parametrize("most_keys", [2_000_000, 3, 0], ids=["kept", "room_for_some", "over_the_limit"])
def test_keys_kept_between_batches_leave_out_what_the_table_holds_as_a_scan_does(
        tmp_path, run_job, tables, monkeypatch, most_keys):
    """A batch's own files are kept once committed; a file written elsewhere (here: before this process, its keys
    forgotten) or written again without a redelivery is scanned by the first batch that needs it and kept whole from
    the second, while its rows (as the log counts them) fit in the limit (``most_keys``); a file that does not is
    scanned each time instead, with the same rows."""
    from spark_jobs.driver.write import held_keys, staged

    monkeypatch.setattr(held_keys, "MOST_KEYS", most_keys)
    scanned: list[str] = []
    scan = staged._scanned_keys

    def recording(spark, target, table, paths, *args):
        scanned.extend(held_keys.file_name(p) for p in paths)
        return scan(spark, target, table, paths, *args)

    monkeypatch.setattr(staged, "_scanned_keys", recording)
    landing, lake_root = tmp_path / "landing", tmp_path / "lake"
    table = Lake(lake_root).table_path(EVENTS)
    base = dt.datetime(2024, 3, 2, 10, 5, tzinfo=dt.UTC)
    records = [_record_at(f"ev-{i}", base - dt.timedelta(minutes=3, seconds=i)) for i in range(6)]
    runs = [[records[0], records[1]], [records[1], records[2], records[3]], [records[0], records[3], records[4]],
            [records[5]], [records[5], records[2]]]
    inserted, scans = [], []
    for run, delivered in enumerate(runs):
        dated_delivery(landing / str(run), base + dt.timedelta(minutes=run), delivered, f"R{run}")
        before = sorted(Path(p).name for p in deltalake.DeltaTable(str(table)).file_uris()) if run else []
        scanned.clear()
        inserted.append(run_job(landing, lake_root).rows[EVENTS])
        scans.append((sorted(scanned), before))
        if run == 0:
            held_keys.keys_of_table(str(table)).keep_only(set())  # as a new process: run 0's file never seen
    added = [sorted(set(scans[run + 1][1]) - set(scans[run][1])) for run in range(4)]  # each run's file
    if most_keys > 3:
        # Each file is scanned by the first batch that needs it only, then kept whole: run 0's (its keys forgotten)
        # and runs 1's and 2's (each written again without its redeliveries: not kept from its staged rows); run 3's,
        # committed as written, is kept from its rows: the last run, redelivering keys of runs 1 and 3, scans none.
        assert [found for found, _ in scans] == [[], added[0], added[1], added[2], []]
    elif most_keys == 3:
        # Run 0's file (2 keys) is read whole when run 2 needs it again; run 1's (2) no longer fits when run 3 and 4
        # need it again, nor run 2's (1 key) once run 3's own (1 key) filled the limit: scanned each time.
        assert [found for found, _ in scans] == [[], added[0], added[1], sorted(added[1] + added[2]),
                                                 sorted(added[1] + added[2])]
    else:  # nothing kept: every file of the bound scanned by every batch
        assert [found for found, _ in scans] == [before for _, before in scans]
    assert inserted == [2, 2, 1, 1, 0]
    events = tables(lake_root)[EVENTS]
    assert sorted((r.eventID, r._source_file.rsplit("_", 1)[1]) for r in events.collect()) == [
        ("ev-0", "R0.json.gz"), ("ev-1", "R0.json.gz"), ("ev-2", "R1.json.gz"), ("ev-3", "R1.json.gz"),
        ("ev-4", "R2.json.gz"), ("ev-5", "R3.json.gz")]
