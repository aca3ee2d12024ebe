"""A run's OpenLineage events: valid against the pinned specification offline, throttled for a continuous run,
never waiting on a slow or absent backend, read back as the runs that wrote a table."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from pathlib import Path

import pytest
from openlineage.client.event_v2 import RunState
from openlineage.client.serde import Serde

from spark_jobs.control.lineage.emitter import LineageEmitter, client_factory
from spark_jobs.control.lineage.events import Counts, Parent, RunDescription, run_event
from spark_jobs.control.lineage.naming import DatasetName, kafka_datasets, path_dataset, sqs_dataset
from spark_jobs.control.lineage.reading import read_events, runs_that_wrote
from spark_jobs.control.lineage.run import RunLineage
from tests.helpers.openlineage_schema import known_facets, problems
from tools.ports import free_port

PARENT = Parent("airflow", "cloudtrail_etl_catchup.spark_submit", "01939a8e-0000-7000-8000-000000000001",
                "airflow", "cloudtrail_etl_catchup", "01939a8e-0000-7000-8000-000000000002")


def description(tmp_path: Path, parent: Parent | None = PARENT, run_id: str = "01939a8e-0000-7000-8000-0000000000aa",
                streaming: bool = False) -> RunDescription:
    lake = tmp_path / "lake"
    return RunDescription("spark_jobs", "cloudtrail_etl", run_id, streaming=streaming,
                          inputs=[path_dataset(tmp_path / "landing")],
                          outputs={t: path_dataset(lake / "tables" / t) for t in ("cloudtrail_events",
                                                                                   "cloudtrail_quarantine")},
                          stream="cloudtrail_etl", trigger="available-now", checkpoint=str(lake / "checkpoints" / "x"),
                          parent=parent, engine_version="4.2.0")


def as_dict(event) -> dict:
    return json.loads(Serde.to_json(event))


def test_events_validate_against_the_pinned_openlineage_schema(tmp_path):
    run = description(tmp_path)
    total = Counts(batches=2, input_files=7, rows={"cloudtrail_events": 40, "cloudtrail_quarantine": 3})
    events = [as_dict(run_event(run, state, total, Counts(), error="boom" if state == RunState.FAIL else None))
              for state in (RunState.START, RunState.RUNNING, RunState.COMPLETE, RunState.FAIL, RunState.ABORT)]
    events.append(as_dict(run_event(description(tmp_path, parent=None), RunState.START, Counts(), Counts())))
    assert [problems(event) for event in events] == [[]] * 6
    assert known_facets(events[3]) == {"ParentRunFacet.json", "ProcessingEngineRunFacet.json", "ErrorMessageRunFacet.json",
                                       "SparkJobsRunFacet.json", "JobTypeJobFacet.json", "StorageDatasetFacet.json",
                                       "InputStatisticsInputDatasetFacet.json",
                                       "OutputStatisticsOutputDatasetFacet.json"}
    broken = json.loads(json.dumps(events[0]))
    del broken["run"]["runId"]
    broken["run"]["facets"]["spark_jobs"]["rows"] = {"cloudtrail_events": -1}
    assert len(problems(broken)) == 2  # the check itself can fail


def test_a_run_reports_its_parent_inputs_and_tables_by_stable_names(tmp_path):
    first, second = (as_dict(run_event(description(tmp_path, run_id=r), RunState.COMPLETE,
                                       Counts(1, 3, {"cloudtrail_events": 5}), Counts()))
                     for r in ("01939a8e-0000-7000-8000-0000000000a1", "01939a8e-0000-7000-8000-0000000000a2"))
    assert first["run"]["facets"]["parent"]["run"]["runId"] == PARENT.run_id
    assert first["run"]["facets"]["parent"]["root"]["job"] == {"namespace": "airflow", "name": "cloudtrail_etl_catchup",
                                                               "facets": {}}
    names = [(d["namespace"], d["name"]) for d in first["outputs"]]
    assert names == [("file", str(tmp_path / "lake/tables/cloudtrail_events")),
                     ("file", str(tmp_path / "lake/tables/cloudtrail_quarantine"))]
    assert names == [(d["namespace"], d["name"]) for d in second["outputs"]]
    assert first["inputs"][0]["name"] == str(tmp_path / "landing")
    assert first["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 5
    assert first["job"] == second["job"]
    assert Parent.from_conf(PARENT.to_conf()) == PARENT
    assert Parent.from_conf({"spark.openlineage.parentJobName": "x"}) is None


def test_datasets_are_named_by_the_openlineage_conventions():
    assert path_dataset("s3a://logs/AWSLogs/") == DatasetName("s3://logs", "AWSLogs")
    assert kafka_datasets("b1:9093,b2:9093", "cloudtrail,other") == [DatasetName("kafka://b1:9093", "cloudtrail"),
                                                                       DatasetName("kafka://b1:9093", "other")]
    assert sqs_dataset("https://sqs.eu-west-1.amazonaws.com/123456789012/trail") == DatasetName(
        "arn:aws:sqs:eu-west-1:123456789012", "trail")
    assert sqs_dataset("http://127.0.0.1:5000/123456789012/trail") == DatasetName("sqs://127.0.0.1:5000",
                                                                                  "/123456789012/trail")


class _Recorder:
    def __init__(self) -> None:
        self.events = []

    def emit(self, event) -> None:
        self.events.append(event)


def test_a_continuous_run_writes_at_most_one_running_event_per_interval(tmp_path):
    """A day of 10-second micro-batches with the default 5-minute interval: START, 288 RUNNING, COMPLETE; every
    batch's rows are in exactly one event's window."""
    recorder = _Recorder()
    emitter = LineageEmitter(lambda: recorder)
    now = [0.0]
    lineage = RunLineage(emitter, description(tmp_path, streaming=True), interval=300, clock=lambda: now[0])
    lineage.start()
    for _ in range(24 * 360):
        now[0] += 10
        lineage.batch(2, {"cloudtrail_events": 3, "cloudtrail_quarantine": 1})
    lineage.finish(RunState.COMPLETE)
    assert emitter.close(timeout=10) == 0
    kinds = [e.eventType for e in recorder.events]
    assert (kinds[0], kinds[-1], len(kinds)) == (RunState.START, RunState.COMPLETE, 2 + 288)
    assert kinds.count(RunState.RUNNING) == 288
    windows = [e.run.facets["spark_jobs"].sinceLastEvent for e in recorder.events]
    assert sum(w["batches"] for w in windows) == 24 * 360
    assert sum(w["rows"].get("cloudtrail_events", 0) for w in windows) == 3 * 24 * 360
    assert recorder.events[-1].run.facets["spark_jobs"].rows == {"cloudtrail_events": 3 * 24 * 360,
                                                                 "cloudtrail_quarantine": 24 * 360}


def _closed_port() -> int:
    port = free_port()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    return port


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    release = threading.Event()
    seen = 0

    def do_POST(self):  # noqa: N802 - http.server's name
        type(self).seen += 1
        self.release.wait(30)  # answers after 30 s (or when the test ends)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_backend():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _SlowHandler)
    server.daemon_threads = True
    _SlowHandler.release.clear()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _SlowHandler.release.set()
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("backend", ["nothing listens", "answers after 30 s"])
def test_a_slow_or_absent_backend_never_slows_a_run(tmp_path, backend, request):
    url = (f"http://127.0.0.1:{_closed_port()}" if backend == "nothing listens"
           else request.getfixturevalue("slow_backend"))
    emitter = LineageEmitter(client_factory(tmp_path, {"OPENLINEAGE_URL": url}), max_pending=50)
    lineage = RunLineage(emitter, description(tmp_path, streaming=True), interval=0)
    began = time.monotonic()
    lineage.start()
    for _ in range(200):  # a RUNNING event per batch: far more than the queue holds
        lineage.batch(1, {"cloudtrail_events": 1})
    lineage.finish(RunState.COMPLETE)
    emitted = time.monotonic() - began
    closing = time.monotonic()
    left = emitter.close(timeout=1.0)
    closed = time.monotonic() - closing
    assert emitted < 1.0, f"202 events took {emitted:.2f} s to hand over"
    assert closed < 1.5, f"close took {closed:.2f} s"
    assert emitter.sent == 0
    assert emitter.dropped + emitter.accepted == 202
    assert left == emitter.accepted - emitter.failed
    if backend == "answers after 30 s":
        assert emitter.dropped >= 202 - 52  # the queue (50) and the one request waiting
        assert _SlowHandler.seen >= 1  # the request reached the server and waits there, not the run
    else:
        assert emitter.failed >= 1


def test_the_file_transport_writes_each_event_into_the_lake_and_reads_back(tmp_path):
    emitter = LineageEmitter.from_settings(tmp_path / "lake", {})
    run = description(tmp_path)
    for state in (RunState.START, RunState.COMPLETE):
        emitter.emit(run_event(run, state, Counts(1, 4, {"cloudtrail_events": 9}), Counts()))
    assert emitter.close() == 0
    files = sorted((tmp_path / "lake/_lineage/spark").iterdir())
    assert len(files) == 2 and all(f.name.startswith("events-") and f.suffix == ".json" for f in files)
    events = list(read_events(str(tmp_path / "lake/_lineage/spark")))
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert LineageEmitter.from_settings(tmp_path, {"SPARK_JOBS_LINEAGE": "off"}) is None
    assert LineageEmitter.from_settings(tmp_path, {"OPENLINEAGE_DISABLED": "true"}) is None


def test_the_runs_that_wrote_a_table_name_their_airflow_task_run(tmp_path):
    table = path_dataset(tmp_path / "lake/tables/cloudtrail_events")
    wrote = description(tmp_path, run_id="01939a8e-0000-7000-8000-0000000000b1")
    empty = description(tmp_path, parent=None, run_id="01939a8e-0000-7000-8000-0000000000b2")
    spark_events = [as_dict(run_event(wrote, RunState.START, Counts(), Counts())),
                    as_dict(run_event(wrote, RunState.COMPLETE, Counts(1, 3, {"cloudtrail_events": 12}), Counts())),
                    as_dict(run_event(empty, RunState.COMPLETE, Counts(), Counts()))]
    airflow_events = [{"eventType": "COMPLETE", "run": {"runId": PARENT.run_id, "facets": {"airflow": {
        "dagRun": {"run_id": "manual__2026-12-07T10:00:00+00:00"}, "taskInstance": {"try_number": 1}}}}}]
    runs = runs_that_wrote(table, iter(spark_events), iter(airflow_events))
    assert [(r.run_id, r.state, r.rows, r.dag_id, r.dag_run_id, r.parent_job, r.try_number) for r in runs] == [
        (wrote.run_id, "COMPLETE", 12, "cloudtrail_etl_catchup", "manual__2026-12-07T10:00:00+00:00",
         "cloudtrail_etl_catchup.spark_submit", 1)]
    assert runs[0].inputs == [f"file:{tmp_path / 'landing'} (3 files)"]
    assert len(runs_that_wrote(table, iter(spark_events), include_empty=True)) == 2


def test_the_running_interval_is_a_duration_or_a_clear_error():
    from spark_jobs.control.lineage.run import interval_seconds
    from spark_jobs.model.errors import UsageError

    assert interval_seconds({}) == 300
    assert interval_seconds({"SPARK_JOBS_LINEAGE_INTERVAL": "30s"}) == 30
    with pytest.raises(UsageError, match=r"\$SPARK_JOBS_LINEAGE_INTERVAL 'soon' is not a positive duration"):
        interval_seconds({"SPARK_JOBS_LINEAGE_INTERVAL": "soon"})


def test_make_airflow_reports_task_runs_into_the_lake_unless_a_backend_is_configured(tmp_path):
    from spark_jobs.control.lineage.emitter import airflow_provider_env

    settings = airflow_provider_env(tmp_path / "lake", {})
    assert json.loads(settings["AIRFLOW__OPENLINEAGE__TRANSPORT"]) == {
        "type": "file", "log_file_path": f"{tmp_path}/lake/_lineage/airflow/events"}
    assert settings["AIRFLOW__OPENLINEAGE__NAMESPACE"] == "airflow"
    assert (tmp_path / "lake/_lineage/airflow").is_dir()  # the provider's file transport makes no folder
    assert airflow_provider_env(tmp_path, {"AIRFLOW__OPENLINEAGE__TRANSPORT": '{"type": "http"}'}) == {}
    assert airflow_provider_env(tmp_path, {"OPENLINEAGE_URL": "http://marquez:5000"}) == {}
