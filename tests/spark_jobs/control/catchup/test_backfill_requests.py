"""Backfill requests: every bad field refused by name before anything runs; files selected by delivery date."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from spark_jobs.control.catchup.backfill import BackfillRefused, check_request, list_files
from spark_jobs.registry import CLOUDTRAIL_LAYOUT

TODAY = dt.date(2026, 11, 23)
NAMES = {
    # object name timestamp wins over the folders
    "AWSLogs/1/CloudTrail/us-east-1/2024/03/01/1_CloudTrail_us-east-1_20240301T2355Z_a.json.gz": dt.date(2024, 3, 1),
    "AWSLogs/1/CloudTrail/us-east-1/2024/03/02/1_CloudTrail_us-east-1_20240301T2359Z_b.json.gz": dt.date(2024, 3, 1),
    "AWSLogs/1/CloudTrail/us-east-1/2024/03/03/plain-name.json.gz": dt.date(2024, 3, 3),
    "exports/1_CloudTrail_eu-west-1_20240304T0000Z_c.json": dt.date(2024, 3, 4),
    "exports/undated.json": None,
    "exports/2024/13/01/bad-month.json": None,
    "exports/1_CloudTrail_x_20241340T0000Z_d.json": None,  # not a date in the name, no date folders
    "2024/02/29/1_CloudTrail_x_20241340T0000Z_e.json": dt.date(2024, 2, 29),  # bad name date: the folders
}


@pytest.fixture()
def roots(tmp_path, monkeypatch):
    """An input root with dated and undated log files, a folder outside it, and a symlink out of it."""
    root, outside = tmp_path / "history", tmp_path / "elsewhere"
    for name in NAMES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}")
    (root / "exports" / "_hidden.json").write_text("{}")
    (root / "exports" / "notes.txt").write_text("")
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT_ROOTS", str(root))
    return root, outside


def check(source, date_from=None, date_to=None, max_files=None, dry_run=False, job="cloudtrail_etl"):
    return check_request(job, source, date_from, date_to, max_files, dry_run, today=TODAY)


@pytest.mark.parametrize("path", sorted(NAMES))
def test_a_files_delivery_date_comes_from_its_name_else_its_folders(path):
    assert CLOUDTRAIL_LAYOUT.delivery_date("file:/landing/" + path) == NAMES[path]


def test_a_dated_request_selects_the_files_of_its_range_and_counts_the_rest(roots):
    root, _ = roots
    request = check(str(root), "2024-03-01", "2024-03-03")
    listing = list_files(request)
    assert [Path(f).relative_to(root).as_posix() for f in listing.files] == sorted(
        n for n, d in NAMES.items() if d and dt.date(2024, 3, 1) <= d <= dt.date(2024, 3, 3))
    # out of the range: the 2024-03-04 export beside the range's folders, and 2024/02/29 (a day before the range:
    # listed, as a file there may be named a day later). Undated: no time in the name nor date folders (2024/13/01).
    assert (listing.out_of_range, listing.undated) == (2, 3)
    assert request.writer.startswith("backfill-20240301-20240303-")


def test_without_dates_every_file_is_selected_and_the_writer_is_stable(roots):
    root, _ = roots
    request = check(f"file://{root}")
    assert len(list_files(request).files) == len(NAMES)
    assert request.file_dates is None
    assert request.writer == check(str(root)).writer != check(str(root / "exports")).writer
    assert request.cli_args() == ["backfill", "cloudtrail_etl", "--source", str(root)]


def test_one_date_alone_is_an_open_range(roots):
    root, _ = roots
    assert check(str(root), date_from="2024-03-02").file_dates == (dt.date(2024, 3, 2), TODAY)
    assert check(str(root), date_to="2024-03-02").file_dates == (dt.date.min, dt.date(2024, 3, 2))


@pytest.mark.parametrize("case, field, message", [
    ("unknown job", "job", "unknown job 'no_such_job'"),
    ("a job of counts", "job", "cloudtrail_activity reads the Delta table cloudtrail_events into tables that are not "
                               "insert-only"),
    ("empty source", "source", "is required"),
    ("relative path", "source", "is not an absolute path"),
    ("dot-dot", "source", "contains '..'"),
    ("shell metacharacters", "source", "contains ';'"),
    ("command substitution", "source", "contains '$'"),
    ("newline", "source", "contains '\\n'"),
    ("s3 scheme", "source", "the s3:// scheme is not readable here"),
    ("missing folder", "source", "is not an existing folder"),
    ("outside the roots", "source", "is not under an input root of job cloudtrail_etl"),
    ("symlink out of a root", "source", "through a symlink"),
    ("backwards range", "date_to", "the range runs backwards"),
    ("future date", "date_to", "is in the future"),
    ("not a date", "date_from", "is not a date (YYYY-MM-DD)"),
    ("impossible date", "date_to", "is not a date (YYYY-MM-DD)"),
    ("zero files per trigger", "max_files_per_trigger", "is not a whole number from 1"),
    ("text files per trigger", "max_files_per_trigger", "is not a whole number from 1"),
    ("dry run not a boolean", "dry_run", "is not true or false"),
])
def test_each_bad_field_is_refused_by_name(roots, case, field, message):
    root, outside = roots
    requests = {
        "unknown job": dict(source=str(root), job="no_such_job"),
        "a job of counts": dict(source=str(root), job="cloudtrail_activity"),
        "empty source": dict(source=" "),
        "relative path": dict(source="history/exports"),
        "dot-dot": dict(source=f"{root}/exports/../exports"),
        "shell metacharacters": dict(source=f"{root}; rm -rf /"),
        "command substitution": dict(source=f"{root}/$(id)"),
        "newline": dict(source=f"{root}\n/etc"),
        "s3 scheme": dict(source="s3://bucket/AWSLogs"),
        "missing folder": dict(source=f"{root}/nope"),
        "outside the roots": dict(source=str(outside)),
        "symlink out of a root": dict(source=str(root / "escape")),
        "backwards range": dict(source=str(root), date_from="2024-03-02", date_to="2024-03-01"),
        "future date": dict(source=str(root), date_from="2026-11-01", date_to="2026-11-24"),
        "not a date": dict(source=str(root), date_from="last week", date_to="2024-03-01"),
        "impossible date": dict(source=str(root), date_from="2024-02-01", date_to="2024-02-30"),
        "zero files per trigger": dict(source=str(root), max_files=0),
        "text files per trigger": dict(source=str(root), max_files="10; ls"),
        "dry run not a boolean": dict(source=str(root), dry_run="yes"),
    }
    with pytest.raises(BackfillRefused) as refused:
        check(**requests[case])
    assert refused.value.field == field
    assert str(refused.value).startswith(f"{field}: ")
    assert message in str(refused.value)


def test_a_dated_backfill_lists_only_the_folders_of_its_range(roots):
    from spark_jobs.control.discovery.listing import LocalStore, walk

    root, _ = roots
    listed: list[str] = []

    class Recording(LocalStore):
        def list_folder(self, folder, start_after=None):
            listed.append(folder)
            return super().list_folder(folder, start_after)

    request = check(str(root), "2024-03-03", "2024-03-03")  # its folders, with a day either side: 03/02..03/04
    found = walk(str(root), CLOUDTRAIL_LAYOUT, None, since=request.delivered[0], until=request.delivered[1],
                 dated_only=True, store_factory=Recording)
    assert "AWSLogs/1/CloudTrail/us-east-1/2024/03/01" not in listed and "2024/02" not in listed
    assert {f for f in listed if f.startswith("AWSLogs/1/CloudTrail/us-east-1/2024/03/")} == {
        "AWSLogs/1/CloudTrail/us-east-1/2024/03/02", "AWSLogs/1/CloudTrail/us-east-1/2024/03/03"}
    assert sorted(c.key.removeprefix(f"file:{root}/") for c in found.files) == [
        "AWSLogs/1/CloudTrail/us-east-1/2024/03/03/plain-name.json.gz"]


TIMES = {
    "AWSLogs/1/CloudTrail/us-east-1/2024/03/01/1_CloudTrail_us-east-1_20240301T2355Z_a.json.gz":
        dt.datetime(2024, 3, 1, 23, 55, tzinfo=dt.timezone.utc),
    "AWSLogs/1/CloudTrail/us-east-1/2024/03/03/plain-name.json.gz": dt.datetime(2024, 3, 3, tzinfo=dt.timezone.utc),
    "exports/undated.json": None,
    # a name whose time is not a time (25:99): the date folders, at midnight
    "2024/02/29/1_CloudTrail_x_20240229T2599Z_e.json": dt.datetime(2024, 2, 29, tzinfo=dt.timezone.utc),
}


@pytest.mark.parametrize("path", sorted(TIMES))
def test_a_files_delivery_time_comes_from_its_name_else_midnight_of_its_folders(path):
    assert CLOUDTRAIL_LAYOUT.delivery_time("file:/landing/" + path) == TIMES[path]


def test_a_time_window_selects_files_by_delivery_time_with_its_own_writer(roots):
    root, _ = roots
    request = check_request("cloudtrail_etl", str(root), None, None, time_from="2024-03-01T23:00:00Z",
                            time_to="2024-03-02T00:00:00Z", today=TODAY)
    listing = list_files(request)
    assert [Path(f).name for f in listing.files] == ["1_CloudTrail_us-east-1_20240301T2355Z_a.json.gz",
                                                     "1_CloudTrail_us-east-1_20240301T2359Z_b.json.gz"]
    assert request.writer.startswith("backfill-20240301T230000Z-20240302T000000Z-")
    assert request.cli_args()[-4:] == ["--time-from", "2024-03-01T23:00:00Z", "--time-to", "2024-03-02T00:00:00Z"]


@pytest.mark.parametrize("times, field, message", [
    (dict(time_from="2024-03-01T00:00:00Z"), "time_to", "is required with the other end of the time window"),
    (dict(time_from="2024-03-02T00:00:00Z", time_to="2024-03-01T00:00:00Z"), "time_to", "the window is empty or "
                                                                                         "runs backwards"),
    (dict(time_from="2024-03-01T00:00:00Z", time_to="2099-01-01T00:00:00Z"), "time_to", "is in the future"),
    (dict(time_from="noon", time_to="2024-03-01T00:00:00Z"), "time_from", "'noon' is not a time (ISO-8601"),
    (dict(date_from="2024-03-01", time_from="2024-03-01T00:00:00Z", time_to="2024-03-02T00:00:00Z"), "time_from",
     "give either dates (date_from, date_to) or a time window"),
])
def test_a_bad_time_window_is_refused_by_name(roots, times, field, message):
    root, _ = roots
    dates = {"date_from": times.pop("date_from", None), "date_to": None}
    with pytest.raises(BackfillRefused) as refused:
        check_request("cloudtrail_etl", str(root), **dates, **times)
    assert refused.value.field == field and message in str(refused.value)


@pytest.mark.parametrize("source, matches", [
    ("{root}", True),
    ("{root}/exports/", True),
    ("file://{root}/exports", True),
    ("{link}/exports", True),  # a root reached through a symlink, as given or where it leads
    ("{root}/nope", True),  # only the check can see that a folder is missing
    ("{root}/escape", True),  # or that a symlink leads out of the root
    ("{root}x", False),
    ("{outside}", False),
    ("/etc", False),
    ("history/exports", False),
    ("{root}/exports/../exports", False),
    ("{root}; rm -rf /", False),
    ("{root}/$(id)", False),
    ("{root}\n/etc", False),
    ("s3://bucket/AWSLogs", False),
])
def test_the_forms_pattern_refuses_a_source_outside_the_roots_before_a_run_exists(roots, tmp_path, monkeypatch,
                                                                                    source, matches):
    import jsonschema

    from spark_jobs.model.input_roots import source_pattern
    from spark_jobs.registry import JOBS

    root, outside = roots
    link = tmp_path / "shared"
    link.symlink_to(root)
    monkeypatch.setenv("CLOUDTRAIL_ETL_INPUT_ROOTS", str(link))
    schema = {"type": "string", "pattern": source_pattern(JOBS["cloudtrail_etl"])}
    value = source.format(root=root, link=link, outside=outside)
    if matches:
        jsonschema.validate(value, schema)  # what Airflow does with the form's value when the run is asked for
    else:
        with pytest.raises(jsonschema.ValidationError, match="does not match"):
            jsonschema.validate(value, schema)
