"""kill -9 in the middle of a micro-batch, restart: nothing lost, nothing duplicated, in either table.

While a killed batch's Parquet files lie in the table folder (written, never committed), a reader that
is not Spark (delta-rs) sees exactly the committed rows: the Delta log, not the folder, is the table.

The killed drivers are real ``python -m spark_jobs run`` processes (their JVM dies with them); the
restart that finishes the job runs the same runner in the session's SparkSession (no third JVM start).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tools.sample_data import write_sample_landing
from tests.helpers.cloudtrail import file_name
from tests.helpers.kills import kills_leaving_orphans, start_cloudtrail_driver, uncommitted_files, whole_parquet
from tests.helpers.processes import batch_ids


def _delta_rs_sees_only_committed_rows(table: Path, seen: set[str]) -> int:
    """Read the table with delta-rs while the killed batch's files are on disk; returns those files' rows.

    :param seen: files left by earlier kills (their batches were re-run and committed since, in new
        files); updated with this kill's.
    """
    import deltalake
    import pyarrow.parquet as pq

    dt = deltalake.DeltaTable(str(table))
    ids = dt.to_pyarrow_table(columns=["eventID"]).column("eventID").to_pylist()
    committed = sum(int(h["operationMetrics"]["numTargetRowsInserted"]) for h in dt.history()
                    if h["operation"] == "MERGE")
    assert len(ids) == len(set(ids)) == committed
    orphans = [f for f in uncommitted_files(table) - seen if whole_parquet(table / f)]  # others were cut off mid-write
    seen |= uncommitted_files(table)
    orphan_ids = {i for f in orphans for i in pq.read_table(table / f, columns=["eventID"]).column("eventID").to_pylist()}
    assert not orphan_ids & set(ids)  # not one row of the uncommitted batch
    return len(orphan_ids)


def test_kill_9_mid_batch_then_restart_gives_exact_tables(tmp_path, tables, run_job):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    manifest = write_sample_landing(landing, files=30, records_per_file=40, seed=3)
    checkpoint = lake / "checkpoints" / "cloudtrail_etl"
    events = lake / "tables" / "cloudtrail_events"

    seen: set[str] = set()
    kills, orphan_rows = kills_leaving_orphans(
        lambda n: start_cloudtrail_driver(landing, lake, tmp_path / f"kill-{n}.log"), checkpoint, events,
        after_commits=2, orphan_rows=lambda: _delta_rs_sees_only_committed_rows(events, seen), last_gap=4,
        last_delay=0.8)
    for kill in kills:
        assert kill.in_flight == kill.committed + 1  # each kill hit a planned, uncommitted batch
    assert orphan_rows[0] > 0  # the first killed batch's files were there, with rows delta-rs did not show

    # The restart: the same run (--max-files-per-trigger 3) from the killed drivers' checkpoint, to the end.
    final = run_job(landing, lake, maxFilesPerTrigger="3")
    assert final.skipped is None and final.batches >= 1, final

    assert batch_ids(checkpoint / "offsets") == batch_ids(checkpoint / "commits")
    frames = tables(lake)
    ids = [r.eventID for r in frames["cloudtrail_events"].select("eventID").collect()]
    assert len(ids) == len(manifest.good_event_ids) == 30 * 40 + 55
    assert Counter(ids) == Counter(manifest.good_event_ids)
    quarantined = sorted((file_name(r.source_file), r.record_index, r.reason)
                         for r in frames["cloudtrail_quarantine"].collect())
    assert quarantined == sorted((b.path.name, b.record_index, b.reason) for b in manifest.bad)
