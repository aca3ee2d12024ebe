"""The backlog of a job that reads a Delta table, from the checkpoint's offsets and the table's log (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.control.checkpoint.delta_source import delta_backlog, delta_source_offset
from spark_jobs.control.checkpoint.inspect import inspect_checkpoint
from spark_jobs.control.checkpoint.store import Location
from spark_jobs.registry import get_job

ACTIVITY = get_job("cloudtrail_activity")


def delta_table(folder: Path, adds_per_version: list[int]) -> Path:
    """A table log: version 0 creates it, version v adds ``adds_per_version[v]`` data files, and a last
    version compacts version 1's files (OPTIMIZE: no data change, which streams never read)."""
    log = folder / "_delta_log"
    log.mkdir(parents=True)
    commits = []
    for version, adds in enumerate(adds_per_version):
        actions = [{"commitInfo": {"operation": "WRITE"}}] + ([{"metaData": {"id": "table-1"}}] if not version else [])
        commits.append(actions + [{"add": {"path": f"v{version}-{i}.parquet", "dataChange": True}}
                                  for i in range(adds)])
    compacted = [f"v1-{i}.parquet" for i in range(adds_per_version[1])]
    commits.append([{"commitInfo": {"operation": "OPTIMIZE"}}]
                   + [{"remove": {"path": name, "dataChange": False}} for name in compacted]
                   + [{"add": {"path": "compacted.parquet", "dataChange": False}}])
    for version, actions in enumerate(commits):
        (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return folder


def offsets(version: int, index: int = -1, starting: bool = False) -> dict:
    return {"sourceVersion": 1, "reservoirId": "table-1", "reservoirVersion": version, "index": index,
            "isStartingVersion": starting}


@pytest.mark.parametrize("offset, files, versions", [
    (None, 5, 5),                               # not started: the snapshot of version 4 (5 files)
    (offsets(1), 6, 4),                         # versions 1.. to read: 2 + 1 + 3 + 0 (OPTIMIZE)
    (offsets(1, index=0), 5, 4),                # the first file of version 1 is read
    (offsets(5), 0, 0),                         # caught up (version 5 does not exist yet)
    (offsets(2, index=0, starting=True), 5, 2),  # in the snapshot of version 2 (3 files, 1 read), then 3 more
])
def test_backlog_counts_the_data_files_not_read_yet(tmp_path, offset, files, versions):
    table = Location.of(str(delta_table(tmp_path / "events", [0, 2, 1, 3])))
    parsed = delta_source_offset(offset) if offset else None
    backlog = delta_backlog(table, parsed)
    assert (backlog.latest_version, backlog.files, backlog.versions) == (4, files, versions)


def test_a_file_source_offset_is_not_a_delta_offset():
    assert delta_source_offset({"logOffset": 3}) is None
    assert delta_source_offset(offsets(7)).version == 7


def write_offsets(checkpoint: Path, batch: int, source: dict) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text(
        "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}) + "\n" + json.dumps(source))


def test_inspect_reports_a_delta_jobs_backlog_from_the_lakes_source_table(tmp_path):
    lake = tmp_path / "lake"
    delta_table(lake / "tables" / "cloudtrail_events", [0, 2, 1, 3])
    checkpoint = lake / "checkpoints" / "cloudtrail_activity"
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"q-1"}')
    write_offsets(checkpoint, 0, offsets(2))
    (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')

    report = inspect_checkpoint(ACTIVITY, str(lake)).to_dict()
    assert (report["status"], report["backlog_files"], report["in_flight_files"]) == ("idle", 4, 0)
    assert report["source_table"] == {"latest_version": 4, "backlog_files": 4, "backlog_versions": 3,
                                      "read_version": 2}
    assert report["input"].endswith("/lake/tables/cloudtrail_events")
    assert report["problems"] == []

    write_offsets(checkpoint, 1, offsets(3))  # planned, not committed: version 2 in flight
    report = inspect_checkpoint(ACTIVITY, str(lake)).to_dict()
    assert (report["batch_in_flight"], report["backlog_files"], report["in_flight_files"]) == (1, 3, 1)


def test_inspect_refuses_a_file_source_offset_in_a_delta_jobs_checkpoint(tmp_path):
    lake = tmp_path / "lake"
    delta_table(lake / "tables" / "cloudtrail_events", [0, 1])
    checkpoint = lake / "checkpoints" / "cloudtrail_activity"
    (checkpoint / "metadata").parent.mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"q-1"}')
    write_offsets(checkpoint, 0, {"logOffset": 0})

    report = inspect_checkpoint(ACTIVITY, str(lake))
    problem = report.problem("source_changed")
    assert problem is not None and problem.severity == "error"
    assert "is not a Delta table's" in problem.explanation
