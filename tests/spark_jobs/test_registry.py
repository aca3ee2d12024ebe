"""The registry: one declaration per job, cheap to import."""

import subprocess
import sys

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.registry import JOBS, all_tables, get_job
from tests.conftest import PROJECT_ROOT


def test_every_job_has_a_module_with_transform_and_one_output_per_table():
    for job in JOBS.values():
        module = __import__(job.module, fromlist=["transform"])
        assert callable(module.transform)
        assert list(module.OUTPUTS) == [t.name for t in job.tables]


def test_a_table_several_jobs_write_is_one_declaration_owned_by_the_first():
    declared = [table for job in JOBS.values() for table in job.tables]
    assert len(all_tables()) == len({t.name for t in declared}) == len(declared) - 1
    assert all_tables()["cloudtrail_events"][0].name == "cloudtrail_etl"
    assert JOBS["cloudtrail_kafka"].tables[0] is JOBS["cloudtrail_etl"].tables[0]  # the same TableSpec
    for job in JOBS.values():
        for table in job.tables:
            assert all_tables()[table.name][1] is table


def test_unknown_job_names_the_value_and_the_known_jobs():
    known = "cloudtrail_activity, cloudtrail_alerts, cloudtrail_etl, cloudtrail_kafka, word_count"
    with pytest.raises(UsageError, match=f"unknown job .nope.; known jobs: {known}"):
        get_job("nope")


def test_importing_the_registry_does_not_import_pyspark():
    code = "import sys, spark_jobs.registry; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_each_tables_write_mode_gives_the_jobs_output_mode():
    assert {name: job.output_mode for name, job in JOBS.items()} == {
        "cloudtrail_etl": "append", "cloudtrail_activity": "update", "cloudtrail_alerts": "append",
        "word_count": "complete", "cloudtrail_kafka": "append"}


def test_an_unknown_write_mode_is_refused_naming_it():
    from spark_jobs.model.tables import TableSpec

    with pytest.raises(ValueError, match="table t: write_mode 'merge' is not one of insert, upsert, complete"):
        TableSpec("t", write_mode="merge")


def test_job_settings_from_the_environment_override_the_registrys_and_unknown_ones_are_refused(monkeypatch):
    from spark_jobs.model.streams import job_settings

    job = get_job("cloudtrail_alerts")
    monkeypatch.setenv("CLOUDTRAIL_ALERTS_SETTINGS", '{"silent_after": "1 hour"}')
    assert job_settings(job.name, job.settings) == {**job.settings, "silent_after": "1 hour"}
    monkeypatch.setenv("CLOUDTRAIL_ALERTS_SETTINGS", '{"silence": "1 hour"}')
    with pytest.raises(UsageError, match=r"names unknown setting\(s\) silence of job cloudtrail_alerts"):
        job_settings(job.name, job.settings)
