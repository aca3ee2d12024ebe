"""A source's key layout, declared once (spark_jobs/model/layout.py): delivery times, stems, S3 StartAfter, the
checks at declaration; Cowrie's dated backfill and reprocess, and Suricata's dated and undated EVE names, selecting
files by their own declaration alone."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from spark_jobs.control.catchup.backfill import check_request, list_files
from spark_jobs.control.oncall.requests import ReplayPlan
from spark_jobs.model.errors import RegistryError
from spark_jobs.model.lake import Lake
from spark_jobs.model.layout import KeyLayout
from spark_jobs.registry import CLOUDTRAIL_LAYOUT, get_job

UTC = dt.timezone.utc
COWRIE = get_job("cowrie_honeypot")
KEY = ("s3a://trail/AWSLogs/1/CloudTrail/us-east-1/2024/03/01/"
       "1_CloudTrail_us-east-1_20240301T0805Z_abc.json.gz")


def test_cloudtrails_delivery_time_stem_and_start_after():
    assert CLOUDTRAIL_LAYOUT.delivery_time(KEY) == dt.datetime(2024, 3, 1, 8, 5, tzinfo=UTC)
    assert CLOUDTRAIL_LAYOUT.stem(KEY) == "s3a://trail/AWSLogs/1/CloudTrail/us-east-1"
    assert CLOUDTRAIL_LAYOUT.stem("file:/l/exports/x.json") == "file:/l/exports"
    name = KEY.rsplit("/", 1)[-1]
    after = CLOUDTRAIL_LAYOUT.name_prefix_at(name, dt.datetime(2024, 3, 1, 8, 5, tzinfo=UTC))
    assert after == "1_CloudTrail_us-east-1_20240301T0804Z"  # a minute before: the file at the cut sorts after it
    assert after < name and "1_CloudTrail_us-east-1_20240301T0759Z_x.json.gz" < after


def test_cowries_date_comes_from_its_rotated_name():
    layout = COWRIE.source.layout
    assert layout.delivery_time("file:/l/s1/cowrie.json.2018-05-19") == dt.datetime(2018, 5, 19, tzinfo=UTC)
    assert layout.delivery_date("file:/l/s1/cowrie.json.2018-07-01.gz") == dt.date(2018, 7, 1)
    assert layout.delivery_time("file:/l/s1/cowrie.json") is None  # the live file: no date (and no glob match)
    assert layout.stem("file:/l/s1/cowrie.json.2018-05-19") == "file:/l/s1"


@pytest.mark.parametrize("given, message", [
    (dict(name="_{MM}{DD}"), "has no {YYYY}"),
    (dict(folders="{MM}/{DD}"), "one date field per folder level"),
    (dict(), "needs a name pattern, date folders, or both"),
    (dict(name="{YYYY}[", folders=None), "is not a regular expression"),
])
def test_a_layout_that_cannot_date_a_key_is_refused_when_declared(given, message):
    with pytest.raises(RegistryError, match=message.replace("{", r"\{").replace("}", r"\}").replace("[", r"\[")):
        KeyLayout(**given)


@pytest.fixture()
def cowrie_landing(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cowrie"
    for sensor, day in (("s1", "2018-05-19"), ("s1", "2018-05-20"), ("s2", "2018-05-21"), ("s2", "2018-07-01")):
        path = root / sensor / f"cowrie.json.{day}{'.gz' if day.endswith('01') else ''}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
    (root / "s1" / "cowrie.json").write_text("{}\n")  # the live file, still being written: never read
    monkeypatch.setenv("COWRIE_HONEYPOT_INPUT_ROOTS", str(root))
    monkeypatch.setenv("COWRIE_HONEYPOT_INPUT", str(root))
    return root


def test_cowrie_gets_a_dated_backfill_and_reprocess_from_its_one_declaration(cowrie_landing, tmp_path):
    request = check_request("cowrie_honeypot", str(cowrie_landing), "2018-05-20", "2018-05-21",
                            today=dt.date(2026, 11, 27))
    listing = list_files(request)
    assert [Path(f).relative_to(cowrie_landing).as_posix() for f in listing.files] == [
        "s1/cowrie.json.2018-05-20", "s2/cowrie.json.2018-05-21"]
    assert listing.undated == 0  # the live cowrie.json is not input at all (pathGlobFilter)
    replay = ReplayPlan.of(COWRIE, Lake(tmp_path / "lake"), cowrie_landing, dt.datetime(2018, 5, 21, tzinfo=UTC))
    assert [Path(f).name for f in replay.listing.files] == ["cowrie.json.2018-05-21", "cowrie.json.2018-07-01.gz"]


def test_suricatas_rotated_names_date_its_files_and_a_plain_eve_json_is_undated(tmp_path, monkeypatch):
    layout = get_job("suricata_eve").source.layout
    day, minute = dt.datetime(2023, 2, 28, tzinfo=UTC), dt.datetime(2023, 2, 28, 11, 34, tzinfo=UTC)
    assert [layout.delivery_time(f"file:/l/{name}") for name in (
        "eve.json-20230228.gz", "eve.json.2023-02-28", "eve-2023-02-28.json", "eve-2023-02-28-11:34.json",
        "eve-2023-02-28-1134.json", "eve-http-2023-02-28-11:34:00.json", "eve.json", "eve.7.json")] == [
        day, day, day, minute, minute, minute, None, None]
    root = tmp_path / "suricata"
    root.mkdir()
    for name in ("eve.json", "eve.json-20230227", "eve-2023-02-28-1134.json", "eve-2023-03-01.json.gz", "eve.json.1"):
        (root / name).write_text("{}\n")
    monkeypatch.setenv("SURICATA_EVE_INPUT_ROOTS", str(root))
    today = dt.date(2026, 11, 27)
    dated = list_files(check_request("suricata_eve", str(root), "2023-02-28", "2023-03-01", today=today))
    assert ([Path(f).name for f in dated.files], dated.undated) == (
        ["eve-2023-02-28-1134.json", "eve-2023-03-01.json.gz"], 1)  # eve.json: no date, so in no dated range
    whole = list_files(check_request("suricata_eve", str(root), None, None, today=today))
    assert sorted(Path(f).name for f in whole.files) == [  # logrotate's numbered eve.json.1 is never input
        "eve-2023-02-28-1134.json", "eve-2023-03-01.json.gz", "eve.json", "eve.json-20230227"]
