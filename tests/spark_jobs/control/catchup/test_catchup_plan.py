"""What a catch-up run spark-submits: the live job, or (a run of Airflow's backfill) its data interval's files."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_jobs.control.catchup.backfill import BackfillRefused
from spark_jobs.control.catchup.plan import plan_run

UTC = dt.timezone.utc
HOUR = (dt.datetime(2024, 3, 1, 8, tzinfo=UTC), dt.datetime(2024, 3, 1, 9, tzinfo=UTC))


@pytest.fixture()
def landing(tmp_path, monkeypatch):
    folder = tmp_path / "landing" / "AWSLogs" / "1" / "CloudTrail" / "us-east-1" / "2024" / "03" / "01"
    folder.mkdir(parents=True)
    for stamp in ("20240301T0755Z", "20240301T0800Z", "20240301T0855Z", "20240301T0900Z"):
        (folder / f"1_CloudTrail_us-east-1_{stamp}_x.json.gz").write_bytes(b"")
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT", str(tmp_path / "landing"))
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT_ROOTS", str(tmp_path))
    return tmp_path / "landing"


@pytest.mark.parametrize("run_type", ["scheduled", "manual"])
def test_a_scheduled_or_manual_run_processes_everything_new_on_the_live_checkpoint(landing, run_type):
    assert plan_run("cloudtrail_etl", "", None, run_type, HOUR) == {
        "kind": "live", "args": ["run", "cloudtrail_etl", "--trigger", "available-now"]}
    assert plan_run("cloudtrail_etl", str(landing), 5, run_type, HOUR)["args"] == [
        "run", "cloudtrail_etl", "--trigger", "available-now", "--input", str(landing), "--max-files-per-trigger", "5"]


def test_a_run_whose_input_folder_does_not_exist_fails_before_spark_submit(landing, monkeypatch, tmp_path):
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT", str(tmp_path / "nowhere"))
    with pytest.raises(BackfillRefused) as refused:
        plan_run("cloudtrail_etl", "", None, "scheduled", HOUR)
    assert str(refused.value) == (f"input: the input folder {tmp_path / 'nowhere'} does not exist (set "
                                  "$CLOUDTRAIL_ETL_INPUT or the run's input)")


def test_a_backfill_run_loads_the_files_delivered_in_its_interval_as_its_own_writer(landing):
    planned = plan_run("cloudtrail_etl", "", None, "backfill", HOUR)
    assert planned["files"] == 2 and planned["out_of_range"] == 2
    assert [f.rsplit("_", 2)[-2] for f in planned["first_files"]] == ["20240301T0800Z", "20240301T0855Z"]
    assert planned["args"] == ["backfill", "cloudtrail_etl", "--source", str(landing.resolve()), "--time-from",
                               "2024-03-01T08:00:00Z", "--time-to", "2024-03-01T09:00:00Z"]
    assert planned["writer"].startswith("backfill-20240301T080000Z-20240301T090000Z-")


def test_a_backfill_run_whose_interval_holds_no_file_has_nothing_to_do(landing):
    empty = (dt.datetime(2024, 3, 1, 10, tzinfo=UTC), dt.datetime(2024, 3, 1, 11, tzinfo=UTC))
    assert plan_run("cloudtrail_etl", "", None, "backfill", empty)["args"] is None


@pytest.mark.parametrize("given, message", [
    ("/etc", "is not under an input root of job cloudtrail_etl"),
    ("/tmp/x; rm -rf /", "contains ';'"),
    ("relative/landing", "is not an absolute path"),
])
def test_a_forms_input_is_checked_like_a_backfills_source(landing, given, message):
    for run_type in ("manual", "backfill"):
        with pytest.raises(BackfillRefused) as refused:
            plan_run("cloudtrail_etl", given, None, run_type, HOUR)
        assert refused.value.field == "input" and message in str(refused.value)
