"""The benchmark's pieces on tiny input (200 records in 4 files), in the shared SparkSession.

A smoke test of the report, not a timed test: it checks the report's structure, that the job and
bare Spark did the same work, and that every measured figure is positive (no warm-up runs: speed
does not matter here). The subprocess
measurements (freshness, no-op catch-up, orchestration) are left to ``python -m spark_jobs bench``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tools.bench import benchmark
from tools.bench import bare
from tools.bench.data import RecordSource, write_landing
from tools.bench.freshness import TableWatcher
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from tests.helpers.cloudtrail import JOB, file_name

IN_PROCESS = ("throughput", "profile", "write_shapes", "adhoc_query", "memory", "sql_command")


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> benchmark.BenchConfig:
    return replace(benchmark.BenchConfig.quick(), records=200, records_per_file=50, repeat=1, warmup_fraction=0,
                   profile_stand_ins=True, only=tuple(n for n in IN_PROCESS if n != "state"), root=tmp_path_factory.mktemp("bench"))


@pytest.fixture(scope="module")
def report(spark, config) -> dict:
    with pytest.MonkeyPatch.context() as patch:  # one bare-Spark setting is enough to check the report
        patch.setattr(bare, "READ_VARIANTS", {"even_splits": bare.READ_VARIANTS["even_splits"]})
        return benchmark.run_benchmark(config, spark=spark)


def test_report_has_every_measurement_in_the_issues_order(report):
    assert list(report["measurements"]) == list(benchmark.REPORT_ORDER)
    assert report["failed"] == []
    assert {"date", "mode", "machine", "data", "measurements", "goals", "wall_s"} <= report.keys()
    assert report["machine"]["cores"] >= 1 and report["machine"]["spark"]


def test_measurements_left_out_say_why(report):
    measurements = report["measurements"]
    for name in ("noop_catchup", "orchestration", "orchestration_live", "cores", "min_driver_memory", "freshness",
                 "freshness_large", "state", "jvm_start"):
        assert measurements[name] == {"status": "skipped", "why": "not in --only"}
    assert measurements["recovery"]["status"] == "not applicable yet" and measurements["recovery"]["why"]


def test_input_is_what_was_asked_for(report):
    data = report["data"]
    assert (data["records"], data["files"]) == (200, 4)
    assert 0 < data["bytes_compressed"] < data["bytes_uncompressed"]


def test_throughput_numbers_are_positive_and_the_ratio_is_consistent(report):
    section = report["measurements"]["throughput"]
    for side in ("job", "bare_spark"):
        assert section[side]["median_s"] > 0
        assert section[side]["records_per_s"] > 0
        assert section[side]["mb_per_s_uncompressed"] > section[side]["mb_per_s_compressed"] > 0
    assert section["bare_spark"]["reader_settings"] in bare.READ_VARIANTS
    assert section["ratio"] == round(section["bare_spark"]["median_s"] / section["job"]["median_s"], 3)
    assert section["met"] == (section["ratio"] >= 0.9)
    assert section["per_core"]["seed_001"]["records_per_s_per_node"] == 388889
    assert report["goals"]["throughput"] == {"goal": ">= 0.9", "value": {"ratio": section["ratio"]},
                                             "met": section["met"]}


def test_profile_breaks_the_job_run_down(report):
    profile = report["measurements"]["profile"]
    phases = profile["job_streaming_phases_ms"]
    assert phases["batches"] == 1 and phases["add_batch"] > 0
    # The benchmark's files are named with their delivery times and hold only good events: one pass.
    assert profile["job_spark_jobs_ms"]["one_pass"] > 0
    assert profile["job_spark_jobs_ms"].keys() <= {"one_pass", "delta_log"}
    assert len(profile["noop_sink_seconds"]) == 4 and all(s > 0 for s in profile["noop_sink_seconds"].values())
    assert profile["findings"]


def test_write_shapes_time_each_one_pass_shape_against_bare_spark(report):
    section = report["measurements"]["write_shapes"]  # each shape checked its rows (200 events) or failed
    bare_s = section["bare_spark"]["median_s"]
    assert bare_s > 0 and len(section["bare_spark"]["seconds"]) == 1
    assert list(section["shapes"]) == ["transform_noop", "one_pass_append", "one_pass_dedup_merge", "job"]
    for name, shape in section["shapes"].items():
        assert shape["median_s"] > 0 and shape["ratio"] == round(bare_s / shape["median_s"], 3), name
    assert section["shapes"]["job"]["median_s"] == report["measurements"]["throughput"]["job"]["median_s"]
    # Delta's recommended pattern in bare Spark and DuckDB on the same files, each checked its 200 distinct events.
    assert list(section["baselines"]) == ["delta_recommended", "duckdb_explicit", "duckdb_detected"]
    for name, baseline in section["baselines"].items():
        assert baseline["median_s"] > 0 and baseline["ratio"] == round(bare_s / baseline["median_s"], 3), name
    per_core = section["records_per_s_per_core"]
    assert per_core["job"] == round(200 / section["shapes"]["job"]["median_s"] / per_core["cores"])
    goal = section["goal_3"]
    assert goal["job_speed_to_delta_recommended"] == round(
        section["baselines"]["delta_recommended"]["median_s"] / section["shapes"]["job"]["median_s"], 3)
    assert goal["met"] == (goal["job_to_bare_spark"] >= 0.65 and goal["job_speed_to_delta_recommended"] >= 1.25)
    assert len(section["findings"]) == 6


def test_adhoc_query_gives_the_same_answer_on_raw_files_and_table(report):
    section = report["measurements"]["adhoc_query"]
    assert section["identical_results"] is True and section["result_rows"] > 0
    assert section["raw_json"]["median_s"] > 0 and section["table"]["median_s"] > 0 and section["ratio"] > 0


def test_sql_command_answers_from_the_table(spark, report, config):
    section = report["measurements"]["sql_command"]
    day = section["query"].split("date = '")[1][:10]
    table = spark.read.format("delta").load(str(Lake(config.root / "run" / "job-lake-0").table_path("cloudtrail_events")))
    assert section["result_rows"] == table.where(f"date = '{day}'").select("eventSource").distinct().count() > 0
    assert len(section["command"]["seconds"]) == 1 and section["seconds"] == section["command"]["median_s"] > 0
    assert report["goals"]["sql_command"] == {"goal": "<= 1.5 s", "value": {"seconds": section["seconds"]},
                                              "met": section["seconds"] <= 1.5}


def test_driver_memory_below_sparks_floor_is_refused_with_its_reason(tmp_path):
    from tools.bench.cores import catchup_run

    (tmp_path / "landing").mkdir()
    run = catchup_run(tmp_path / "landing", tmp_path / "lake", driver_memory="400m")
    assert run["ok"] is False and run["exit"] != 0
    assert run["error"].endswith("[INVALID_DRIVER_MEMORY] System memory 419430400 must be at least 471859200."), run
    assert "events" not in run


def test_memory_peaks_are_positive(report):
    memory = report["measurements"]["memory"]
    assert memory["jvm_driver_and_executor_peak_rss_mb"] > 0 and memory["python_driver_peak_rss_mb"] > 0


def test_bare_spark_writes_the_events_columns_but_rescued_data(spark):
    from spark_jobs.driver.job_modules import output_schemas

    events = output_schemas(spark, JOB)["cloudtrail_events"].fieldNames()
    record = bare.records_schema()["Records"].dataType.elementType.simpleString()
    flattened = bare.flatten(spark.createDataFrame([], f"_source_file string, _record_index int, rec {record}"))
    assert flattened.columns == [c for c in events if c != "_rescued_data"]


def test_table_watcher_sees_the_input_files_of_a_committed_table(spark, report, config):
    from spark_jobs.driver.job_modules import output_schemas

    lake = Lake(config.root / "run" / "job-lake-0")
    watcher = TableWatcher(spark, lake.table_path("cloudtrail_events"), output_schemas(spark, JOB)["cloudtrail_events"])
    landing = config.root / "data" / "r200-f50-s1" / "landing"
    assert watcher.poll() == {file_name(str(p)) for p in landing.rglob("*.json.gz")}
    assert watcher.queries == 1 and watcher.poll() and watcher.queries == 1  # unchanged table: no new query


def test_same_arguments_reuse_the_input(config):
    source = RecordSource()
    first = write_landing(config.root / "data-again", 100, 50, seed=5, source=source)
    again = write_landing(config.root / "data-again", 100, 50, seed=5, source=source)
    assert (first.reused, again.reused) == (False, True)
    assert again.records == 100 and again.bytes_compressed == first.bytes_compressed


def test_bench_command_options():
    args = benchmark.parser().parse_args(["--quick", "--only", "throughput,memory", "--repeat", "4"])
    config = benchmark.config_from_args(args)
    assert (config.mode, config.records, config.repeat, config.launch_repeat) == ("quick", 50_000, 4, 4)
    assert config.only == ("throughput", "memory")
    assert benchmark.config_from_args(benchmark.parser().parse_args([])).only == benchmark.MEASUREMENTS
    with pytest.raises(UsageError, match="unknown measurement"):
        benchmark.config_from_args(benchmark.parser().parse_args(["--only", "speed"]))


def test_jvm_start_times_driver_starts_with_and_without_the_class_archive():
    from tools.bench.launches import measure_jvm_start

    section = measure_jvm_start(repeat=1)  # raises unless each run's JVM had (or lacked) the archive as asked
    for mode in ("archive", "no_archive"):
        figures = section[mode]
        assert set(figures) == {"process_s", "session_s", "first_job_s"}
        assert all(len(f["seconds"]) == 1 and f["seconds"][0] > 0 for f in figures.values())
        assert figures["process_s"]["median_s"] > figures["session_s"]["median_s"] + figures["first_job_s"]["median_s"]
    assert section["archive_mb"] > 0 and section["ratio_process"] > 0
