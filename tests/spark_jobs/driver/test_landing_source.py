"""The landing source in real streaming queries (spark_jobs/driver/landing_source.py): a checkpoint written by Spark's
file source moves to discovery at its next start and loses or repeats nothing; a file delivered after its folder's
window closed is left by the stream and ingested exactly once by the reconcile (spark_jobs/control/discovery/)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import json
from collections import Counter
from pathlib import Path

from spark_jobs.control.checkpoint.inspect import inspect_checkpoint
from spark_jobs.model.lake import Lake
from spark_jobs.model.runs import RunOptions
from spark_jobs.model.streams import FileSource
from spark_jobs.model.triggers import parse_trigger
from tools.sample_data import write_sample_landing
from tests.helpers.cloudtrail import JOB

UTC = dt.timezone.utc


def _run(spark, job, landing: Path, lake: Path, files_per_batch: str | None = "5"):
    from spark_jobs.driver.runner import run_streaming

    source_options = {**JOB.file_source_options, **({"maxFilesPerTrigger": files_per_batch} if files_per_batch else {})}
    run_options = RunOptions(landing, Lake(lake), parse_trigger("available-now"), source_options)
    return run_streaming(job, run_options, spark=spark)


def _ids(tables, lake: Path) -> list[str]:
    return [r.eventID for r in tables(lake)["cloudtrail_events"].select("eventID").collect()]


def test_a_file_source_checkpoint_moves_to_discovery_and_loses_or_repeats_nothing(spark, tables, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    first = write_sample_landing(landing / "first", files=8, records_per_file=6, seed=71, include_bad_files=False)
    before = _run(spark, dataclasses.replace(JOB, source=FileSource("binaryFile")), landing, lake)  # the old way
    checkpoint = lake / "checkpoints" / JOB.name
    assert (checkpoint / "sources" / "0").is_dir() and not (checkpoint / "discovery").exists()
    assert inspect_checkpoint(JOB, str(lake), str(landing)).problem("discovery_move_pending") is not None
    later = write_sample_landing(landing / "later", files=4, records_per_file=6, seed=72, include_bad_files=False,
                                 start=dt.datetime(2024, 3, 5, tzinfo=UTC))
    after = _run(spark, JOB, landing, lake)
    ids = _ids(tables, lake)
    assert Counter(ids) == Counter(first.good_event_ids + later.good_event_ids) and len(ids) == len(set(ids))
    assert after.input_files == len(later.files_written) and after.batches == 1  # the 4 new files, nothing again
    report = inspect_checkpoint(JOB, str(lake), str(landing))
    migrated = report.discovery["window"]["migrated"]
    assert migrated["log_offset"] == before.batches - 1 and migrated["files"] == len(first.files_written)
    assert report.problems == [] and report.backlog_files == 0
    assert report.ingested_files == len(first.files_written) + len(later.files_written)
    again = _run(spark, JOB, landing, lake, files_per_batch=None)  # the registry's options: the nothing-new check
    assert again.skipped is not None and again.batches == 0  # nothing new, decided without Spark


def _late_file(folder: Path, moment: dt.datetime, event_id: str) -> Path:
    path = folder / f"{moment:%Y/%m/%d}" / f"111122223333_CloudTrail_us-east-1_{moment:%Y%m%dT%H%MZ}_late.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"eventID": event_id, "eventTime": f"{moment - dt.timedelta(minutes=3):%Y-%m-%dT%H:%M:%SZ}",
              "eventName": "GetObject", "eventSource": "s3.amazonaws.com", "awsRegion": "us-east-1"}
    path.write_bytes(gzip.compress(json.dumps({"Records": [record]}).encode()))
    return path


def test_a_file_delivered_after_its_window_closed_is_ingested_by_the_reconcile_exactly_once(spark, tables, tmp_path,
                                                                                          monkeypatch, capsys):
    from spark_jobs.cli.main import main

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    manifest = write_sample_landing(landing, files=6, records_per_file=5, seed=73, include_bad_files=False)
    _run(spark, JOB, landing, lake)
    stem = landing / "AWSLogs" / "111122223333" / "CloudTrail" / "us-east-1"
    late = _late_file(stem, dt.datetime(2024, 2, 20, 8, 5, tzinfo=UTC), "late-event-1")  # weeks behind the window
    unseen = _run(spark, JOB, landing, lake, files_per_batch=None)  # not in its folder's window: not listed
    assert unseen.skipped is not None and unseen.batches == 0
    monkeypatch.setenv("LAKE_ROOT", str(lake))
    assert main(["reconcile", JOB.name, "--input", str(landing), "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (dry["missed"], dry["first_missed"]) == (1, [f"file:{late}"]) and dry["run"] is None
    assert main(["reconcile", JOB.name, "--input", str(landing)]) == 0
    done = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert done["missed"] == 1 and done["run"]["rows"] == {"cloudtrail_events": 1, "cloudtrail_quarantine": 0}
    # every listed file is the live window's, in the tables already, or missed
    assert done["listed"] == len(manifest.files_written) + 1 == done["live_window"] + done["already_ingested"] + 1
    assert main(["reconcile", JOB.name, "--input", str(landing)]) == 0
    twice = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (twice["missed"], twice["already_ingested"], twice["run"]) == (0, done["already_ingested"] + 1, None)
    ids = _ids(tables, lake)
    assert Counter(ids) == Counter([*manifest.good_event_ids, "late-event-1"])
    report = json.loads((lake / "control" / JOB.name / "reconcile.json").read_text())
    assert report["missed"] == 0 and report["already_ingested"] == done["already_ingested"] + 1


def test_a_lake_started_at_now_gets_nothing_from_before_the_start_by_the_reconcile(spark, tables, tmp_path,
                                                                                    monkeypatch, capsys):
    from spark_jobs.cli.main import main
    from spark_jobs.driver.runner import run_streaming

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    history = write_sample_landing(landing, files=6, records_per_file=3, seed=64, include_bad_files=False)
    now = dt.datetime.now(UTC).replace(second=0, microsecond=0)
    stem = landing / "AWSLogs" / "111122223333" / "CloudTrail" / "us-east-1"
    _late_file(stem, now + dt.timedelta(minutes=1), "after-the-start-1")
    started = run_streaming(JOB, RunOptions(landing, Lake(lake), parse_trigger("available-now"),
                                            dict(JOB.file_source_options), start_at=now), spark=spark)
    assert started.input_files == 1 and started.rows["cloudtrail_events"] == 1
    monkeypatch.setenv("LAKE_ROOT", str(lake))
    assert main(["reconcile", JOB.name, "--input", str(landing), "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (dry["listed"], dry["before_start"], dry["missed"], dry["would_ingest"]) == (7, 6, 0, 0)
    assert dry["start_at"] == now.isoformat(timespec="seconds") and dry["run"] is None
    assert main(["reconcile", JOB.name, "--input", str(landing)]) == 0
    done = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (done["before_start"], done["missed"], done["run"]) == (6, 0, None) and "would_ingest" not in done
    assert _ids(tables, lake) == ["after-the-start-1"]  # the history enters only by an explicit backfill
    assert len(history.files_written) == 6
