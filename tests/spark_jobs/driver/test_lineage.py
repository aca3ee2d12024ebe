"""A real catch-up run reports its OpenLineage run: START and COMPLETE in the lake's event files, its parent (the
Airflow task run named by the submit's settings), the landing as input and both tables as outputs with the rows the
run wrote; ``python -m spark_jobs lineage`` lists it."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from spark_jobs.control.lineage.reading import read_events
from spark_jobs.control.lineage.events import Parent
from tests.helpers.openlineage_schema import problems
from tests.helpers.project import run_cli
from tools.sample_data import write_sample_landing

PARENT = Parent("airflow", "cloudtrail_etl_catchup.spark_submit", "01939a8e-0000-7000-8000-000000000011",
                "airflow", "cloudtrail_etl_catchup", "01939a8e-0000-7000-8000-000000000012")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, spark, run_job):
    """Two catch-up runs of the same landing (the second after more files landed), the first with a parent."""
    root = tmp_path_factory.mktemp("lineage")
    write_sample_landing(root / "landing" / "a", files=4, records_per_file=5)
    for key, value in PARENT.to_conf().items():
        spark.conf.set(key, value)
    try:
        first = run_job(root / "landing", root / "lake")
    finally:
        for key in PARENT.to_conf():
            spark.conf.unset(key)
    write_sample_landing(root / "landing" / "b", files=2, records_per_file=5, seed=7, include_bad_files=False)
    second = run_job(root / "landing", root / "lake")
    events = sorted(read_events(str(root / "lake/_lineage/spark")), key=lambda e: e["eventTime"])
    return root, first, second, events


def test_each_run_reports_start_and_complete_with_its_parent_inputs_and_tables(two_runs):
    root, first, second, events = two_runs
    runs = {}
    for event in events:
        runs.setdefault(event["run"]["runId"], []).append(event)
    assert [[e["eventType"] for e in run] for run in runs.values()] == [["START", "COMPLETE"], ["START", "COMPLETE"]]
    (first_events, second_events) = runs.values()
    parent = first_events[-1]["run"]["facets"]["parent"]
    assert (parent["job"]["name"], parent["run"]["runId"], parent["root"]["run"]["runId"]) == (
        PARENT.name, PARENT.run_id, PARENT.root_run_id)
    assert "parent" not in second_events[-1]["run"]["facets"]
    for summary, run in ((first, first_events), (second, second_events)):
        complete = run[-1]
        assert complete["job"] == {"namespace": "spark_jobs", "name": "cloudtrail_etl", "facets": complete["job"]["facets"]}
        assert [(i["namespace"], i["name"]) for i in complete["inputs"]] == [("file", str(root / "landing"))]
        assert complete["inputs"][0]["inputFacets"]["inputStatistics"]["fileCount"] == summary.input_files
        rows = {o["name"].rsplit("/", 1)[-1]: o["outputFacets"]["outputStatistics"]["rowCount"]
                for o in complete["outputs"]}
        assert rows == summary.rows and rows["cloudtrail_events"] > 0
        assert {o["namespace"] for o in complete["outputs"]} == {"file"}
        assert complete["run"]["facets"]["spark_jobs"]["batches"] == summary.batches
    assert [o["name"] for o in first_events[-1]["outputs"]] == [o["name"] for o in second_events[-1]["outputs"]] == [
        str(root / "lake/tables/cloudtrail_events"), str(root / "lake/tables/cloudtrail_quarantine")]
    assert [problems(e) for e in events] == [[]] * 4


def test_lineage_lists_the_runs_that_wrote_the_table(two_runs):
    root, first, second, events = two_runs
    done = run_cli("lineage", "cloudtrail_events", "--lake", str(root / "lake"), "--json")
    assert done.returncode == 0, done.stderr
    listed = [json.loads(line) for line in done.stdout.splitlines()]
    run_ids = list(dict.fromkeys(e["run"]["runId"] for e in events))
    assert [(r["run_id"], r["rows"], r["state"], r["dag_id"], r["parent_run_id"]) for r in listed] == [
        (run_ids[0], first.rows["cloudtrail_events"], "COMPLETE", "cloudtrail_etl_catchup", PARENT.run_id),
        (run_ids[1], second.rows["cloudtrail_events"], "COMPLETE", None, None)]
    text = run_cli("lineage", "cloudtrail_events", "--lake", str(root / "lake"))
    assert text.returncode == 0 and text.stdout.splitlines()[0] == (
        f"cloudtrail_events (file:{root / 'lake/tables/cloudtrail_events'}): 2 runs")
    assert "cloudtrail_etl_catchup / ? / spark_submit" in text.stdout
    bad = run_cli("lineage", "no_such_table", "--lake", str(root / "lake"))
    assert bad.returncode == 2 and "no table 'no_such_table'" in bad.stderr


WINDOW_SECONDS = 40
INTERVAL_SECONDS = 10


def test_a_continuous_driver_writes_at_most_one_running_event_per_interval(tmp_path, run_job, monkeypatch):
    """A processing-time:1s driver fed a delivery every 3 s for 40 s, then SIGTERM: START, at most one RUNNING per
    10 s (each with the batches since the previous event), COMPLETE; the bound over the window is 2 + 40 / 10."""
    import os
    import signal
    import threading
    import time

    monkeypatch.setenv("SPARK_JOBS_LINEAGE_INTERVAL", f"{INTERVAL_SECONDS}s")
    write_sample_landing(tmp_path / "landing" / "seed", files=1, records_per_file=3, include_bad_files=False)
    stop = threading.Event()

    def feed():
        began = time.monotonic()
        n = 0
        while not stop.wait(3) and time.monotonic() - began < WINDOW_SECONDS:
            n += 1
            write_sample_landing(tmp_path / "landing" / f"more-{n}", files=1, records_per_file=3, seed=100 + n,
                                 include_bad_files=False)
        os.kill(os.getpid(), signal.SIGTERM)  # the driver stops after its micro-batch

    feeder = threading.Thread(target=feed, daemon=True)
    began = time.monotonic()
    feeder.start()
    try:
        summary = run_job(tmp_path / "landing", tmp_path / "lake", trigger="processing-time:1s")
    finally:
        stop.set()
        feeder.join(10)
    lived = time.monotonic() - began
    events = sorted(read_events(str(tmp_path / "lake/_lineage/spark")), key=lambda e: e["eventTime"])
    kinds = [e["eventType"] for e in events]
    assert kinds[0] == "START" and kinds[-1] == "COMPLETE" and set(kinds[1:-1]) <= {"RUNNING"}
    assert kinds.count("RUNNING") >= 1
    assert len(events) <= 2 + lived / INTERVAL_SECONDS, (len(events), lived)
    windows = [e["run"]["facets"]["spark_jobs"]["sinceLastEvent"] for e in events]
    assert sum(w["batches"] for w in windows) == summary.batches == events[-1]["run"]["facets"]["spark_jobs"]["batches"]
    assert sum(w["rows"].get("cloudtrail_events", 0) for w in windows) == summary.rows["cloudtrail_events"]
    times = [dt.datetime.fromisoformat(e["eventTime"]) for e in events if e["eventType"] == "RUNNING"]
    assert all((b - a).total_seconds() >= INTERVAL_SECONDS for a, b in zip(times, times[1:]))
    assert events[-1]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    print(f"continuous driver: {len(events)} events over {lived:.0f} s ({summary.batches} micro-batches; bound "
          f"{2 + lived / INTERVAL_SECONDS:.1f}; with the default 5-minute interval: at most 290 a day)")


def test_a_reprocess_reports_one_run_that_rewrote_the_tables(tmp_path, run_job):
    write_sample_landing(tmp_path / "landing", files=3, records_per_file=4, include_bad_files=False)
    first = run_job(tmp_path / "landing", tmp_path / "lake")
    done = run_cli("reprocess", "cloudtrail_etl", "--from-time", "2000-01-01T00:00:00Z", "--input",
                   str(tmp_path / "landing"), "--lake", str(tmp_path / "lake"), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    events = sorted(read_events(str(tmp_path / "lake/_lineage/spark")), key=lambda e: e["eventTime"])
    reprocess = [e for e in events if e["run"]["facets"]["spark_jobs"]["stream"] == "cloudtrail_etl@reprocess"]
    assert [e["eventType"] for e in reprocess] == ["START", "COMPLETE"]
    complete = reprocess[-1]
    assert complete["job"]["name"] == "cloudtrail_etl" and complete["job"]["facets"]["jobType"]["processingType"] == "BATCH"
    assert [(i["namespace"], i["name"]) for i in complete["inputs"]] == [("file", str(tmp_path / "landing"))]
    rows = {o["name"].rsplit("/", 1)[-1]: o["outputFacets"]["outputStatistics"]["rowCount"] for o in complete["outputs"]}
    assert rows == {table: done_table.get("rows_written") or 0 for table, done_table in result["tables"].items()}
    assert rows["cloudtrail_events"] == first.rows["cloudtrail_events"] == 12
    assert complete["run"]["facets"]["spark_jobs"]["inputFiles"] == result["files"] == 3
    assert [problems(e) for e in reprocess] == [[], []]
