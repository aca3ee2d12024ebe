"""An available-now run with nothing new ends without Spark, and only when that is proved from the checkpoint."""

from __future__ import annotations

import shutil
from pathlib import Path

from spark_jobs.control.checkpoint.inspect import inspect_checkpoint
from spark_jobs.model.lake import Lake
from spark_jobs.control.catchup.nothing_new import nothing_to_do
from spark_jobs.registry import get_job
from spark_jobs.model.runs import RunOptions
from tools.sample_data import write_sample_landing
from spark_jobs.model.triggers import parse_trigger

JOB = get_job("cloudtrail_etl")


def options(landing: Path, lake: Path, trigger: str = "available-now", **changes) -> RunOptions:
    return RunOptions(landing, Lake(lake), parse_trigger(trigger), dict(JOB.file_source_options), **changes)


def latest(folder: Path) -> int:
    return max(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def test_a_caught_up_run_skips_spark_and_a_new_file_is_still_ingested(tmp_path, run_job, tables):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    first = write_sample_landing(landing, files=3, records_per_file=4, seed=21, include_bad_files=False)
    assert nothing_to_do(JOB, options(landing, lake)) is None  # never ran: Spark creates the tables

    done = run_job(landing, lake)
    assert done.skipped is None and done.batches == 1 and done.rows["cloudtrail_events"] == len(first.good_event_ids)
    checkpoint = lake / "checkpoints" / JOB.name
    offsets_before = latest(checkpoint / "offsets")

    again = run_job(landing, lake)
    assert again.batches == 0 and again.input_files == 0
    assert again.skipped == (f"nothing new: no input file waits under {landing} (3 file(s) ingested, checkpoint batch "
                             f"{offsets_before} committed, none in flight); Spark was not started")
    assert latest(checkpoint / "offsets") == offsets_before
    lease = inspect_checkpoint(JOB, lake, landing).lease
    assert lease is not None and lease.released  # taken for the check, released after it

    second = write_sample_landing(landing, files=1, records_per_file=6, seed=22, include_bad_files=False)
    assert nothing_to_do(JOB, options(landing, lake)) is None  # one file waiting
    more = run_job(landing, lake)
    assert more.skipped is None and more.batches == 1 and more.rows["cloudtrail_events"] == 6
    ids = {row.eventID for row in tables(lake)["cloudtrail_events"].select("eventID").collect()}
    assert ids == set(first.good_event_ids) | set(second.good_event_ids)


def test_any_doubt_starts_spark(tmp_path, run_job, tables):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    manifest = write_sample_landing(landing, files=2, records_per_file=3, seed=23, include_bad_files=False)
    run_job(landing, lake)
    assert nothing_to_do(JOB, options(landing, lake)) is not None

    # Not the job's own caught-up stream with the registry's options: another writer, a date window, a
    # command-line override, a processing-time trigger, a stateful job.
    assert nothing_to_do(JOB, options(landing, lake, writer="backfill-x")) is None
    overridden = RunOptions(landing, Lake(lake), parse_trigger("available-now"),
                            {**JOB.file_source_options, "maxFilesPerTrigger": "1"})
    assert nothing_to_do(JOB, overridden) is None
    assert nothing_to_do(JOB, options(landing, lake, trigger="processing-time:1s")) is None
    assert nothing_to_do(get_job("cloudtrail_activity"), options(landing, lake)) is None

    # A batch planned but not committed (the driver was killed between the two): Spark re-runs it.
    checkpoint = lake / "checkpoints" / JOB.name
    last = latest(checkpoint / "commits")
    for name in (str(last), f".{last}.crc"):  # as a kill before the commit leaves it: neither file
        (checkpoint / "commits" / name).unlink()
    assert nothing_to_do(JOB, options(landing, lake)) is None
    rerun = run_job(landing, lake)
    assert rerun.skipped is None and rerun.batches == 1
    assert tables(lake)["cloudtrail_events"].count() == len(manifest.good_event_ids)  # the table skipped it
    assert nothing_to_do(JOB, options(landing, lake)) is not None

    # Another input folder than the one the checkpoint read: every file there counts as new.
    other = tmp_path / "other"
    shutil.copytree(landing, other)
    assert nothing_to_do(JOB, options(other, lake)) is None

    # A damaged table: Spark decides (and fails loudly), the skip never hides it.
    log = lake / "tables" / "cloudtrail_events" / "_delta_log"
    shutil.move(str(log), str(log.with_name("_delta_log.moved")))
    assert nothing_to_do(JOB, options(landing, lake)) is None
