"""The accounts dimension: CSV or JSON, errors that name the line, re-read per batch, the last good version kept."""

from __future__ import annotations

import json

import pytest

from spark_jobs.driver.dimensions import DimensionError, DimensionReader, dimension_frame, read_dimension
from spark_jobs.transforms.enrich import enrich
from spark_jobs.registry import ACCOUNTS

ROWS = {"111122223333": ("payments-prod", "payments", "prod"), "444455556666": ("sandbox", None, "dev")}


@pytest.mark.parametrize("name, text", [
    ("accounts.csv", "account_id,account_name,owner_team,environment\n111122223333,payments-prod,payments,prod\n"
                     "444455556666,sandbox,,dev\n"),
    ("accounts.json", json.dumps([{"account_id": "111122223333", "account_name": "payments-prod",
                                   "owner_team": "payments", "environment": "prod"},
                                  {"account_id": 444455556666, "account_name": "sandbox", "owner_team": None,
                                   "environment": "dev"}])),
    ("accounts.jsonl", '{"account_id": "111122223333", "account_name": "payments-prod", "owner_team": "payments", '
                       '"environment": "prod"}\n\n{"account_id": "444455556666", "account_name": "sandbox", '
                       '"owner_team": "", "environment": "dev"}\n'),
])
def test_every_format_gives_the_same_rows(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    assert read_dimension(ACCOUNTS, tmp_path / name).rows == ROWS


@pytest.mark.parametrize("name, text, message", [
    ("a.csv", "account_id,account_name,owner_team\n111122223333,x,y\n", r"a.csv, line 2: no environment"),
    ("a.csv", "account_id,account_name,owner_team,environment\n11112222333,x,y,z\n",
     r"line 2: account_id '11112222333' does not match \\d\{12\}"),
    ("a.csv", "account_id,account_name,owner_team,environment\n111122223333,x,y,z\n111122223333,x,y,z\n",
     "line 3: account_id 111122223333 appears twice"),
    ("a.json", '{"account_id": "111122223333"}', "must hold a JSON array of objects, got dict"),
    ("a.jsonl", '{"account_id": ', "a.jsonl, line 1: not valid JSON"),
    ("a.xlsx", "", "unknown format '.xlsx'"),
])
def test_a_bad_file_is_refused_naming_the_line(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(DimensionError, match=message):
        read_dimension(ACCOUNTS, tmp_path / name)


def test_a_missing_file_names_the_variable_that_points_at_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCOUNTS_PATH", str(tmp_path / "nope.csv"))
    with pytest.raises(DimensionError, match=r"nope.csv does not exist; create it .* or point \$ACCOUNTS_PATH at it"):
        read_dimension(ACCOUNTS)


def test_each_read_sees_the_file_as_it_is_and_a_bad_update_keeps_the_last_good_one(tmp_path, monkeypatch, caplog):
    path = tmp_path / "accounts.csv"
    monkeypatch.setenv("ACCOUNTS_PATH", str(path))
    header = "account_id,account_name,owner_team,environment\n"
    reader = DimensionReader(ACCOUNTS)
    path.write_text(header + "111122223333,old,payments,prod\n")
    assert reader.read().rows == {"111122223333": ("old", "payments", "prod")}
    path.write_text(header + "111122223333,new,payments,prod\n444455556666,b,c,d\n")
    assert reader.read().rows == {"111122223333": ("new", "payments", "prod"), "444455556666": ("b", "c", "d")}
    path.write_text(header + "not-an-account,x,y,z\n")
    assert reader.read().rows["111122223333"] == ("new", "payments", "prod")
    assert "does not match" in caplog.text and "using the version read before (2 rows)" in caplog.text


def test_enrich_keeps_every_row_and_marks_the_unknown_keys(spark, tmp_path):
    (tmp_path / "accounts.csv").write_text("account_id,account_name,owner_team,environment\n"
                                           "111122223333,payments-prod,payments,prod\n")
    accounts = dimension_frame(spark, read_dimension(ACCOUNTS, tmp_path / "accounts.csv"))
    frame = spark.createDataFrame([("111122223333", 1), ("777788889999", 2), (None, 3)], "account_id string, n int")
    rows = enrich(frame, accounts, "account_id", "account_known").orderBy("n").collect()
    assert [tuple(r) for r in rows] == [("111122223333", 1, "payments-prod", "payments", "prod", True),
                                       ("777788889999", 2, None, None, None, False),
                                       (None, 3, None, None, None, False)]
