"""The registry: one declaration per job, cheap to import."""

import subprocess
import sys
from collections import Counter

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.registry import JOBS, all_tables, get_job
from tests.helpers.project import PROJECT_ROOT


def test_a_table_several_jobs_write_is_one_declaration_owned_by_the_first():
    declared = [table for job in JOBS.values() for table in job.tables]
    shared = {"cloudtrail_events", "ocsf_authentication", "ocsf_network_activity", "ocsf_ssh_activity"}
    assert {name for name, count in Counter(t.name for t in declared).items() if count > 1} == shared
    assert len(all_tables()) == len({t.name for t in declared}) == len(declared) - len(shared)
    assert all_tables()["cloudtrail_events"][0].name == "cloudtrail_etl"
    assert all_tables()["ocsf_authentication"][0].name == "cloudtrail_ocsf"
    assert JOBS["cloudtrail_kafka"].tables[0] is JOBS["cloudtrail_etl"].tables[0]  # the same TableSpec
    for job in JOBS.values():
        for table in job.tables:
            assert all_tables()[table.name][1] is table


def test_unknown_job_names_the_value_and_the_known_jobs():
    known = ", ".join(sorted(JOBS))  # every job, sorted (a new registry entry needs no edit here)
    assert known.startswith("cloudtrail_activity, cloudtrail_alerts, cloudtrail_etl, cloudtrail_kafka, ")
    with pytest.raises(UsageError, match=f"unknown job .nope.; known jobs: {known}"):
        get_job("nope")


def test_importing_the_registry_does_not_import_pyspark():
    code = "import sys, spark_jobs.registry; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_each_tables_write_mode_gives_the_jobs_output_mode():
    expected = {"cloudtrail_etl": "append", "cloudtrail_activity": "update", "cloudtrail_alerts": "append",
                "word_count": "complete", "cloudtrail_kafka": "append"}
    assert {name: JOBS[name].output_mode for name in expected} == expected
    assert {job.output_mode for job in JOBS.values()} <= {"append", "update", "complete"}


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


# --- The checks a declaration passes when the registry loads (spark_jobs.model.tables, spark_jobs.model.jobs) ---

def _job(*tables, stateful=False, name="j"):
    from spark_jobs.model.jobs import JobSpec

    return JobSpec(name=name, description="", default_input="", tables=tables, stateful=stateful)


def _refused(match: str, *tables, stateful=False):
    from spark_jobs.model.errors import RegistryError

    with pytest.raises(RegistryError) as caught:
        _job(*tables, stateful=stateful)
    assert str(caught.value) == match
    assert isinstance(caught.value, ValueError)


def test_every_registry_entry_passes_the_checks():
    from spark_jobs.model.jobs import check_jobs

    assert dict(check_jobs(JOBS.values())) == dict(JOBS)


def test_first_by_needs_a_unique_key():
    from spark_jobs.model.tables import TableSpec

    _refused("job j, table t: first_by ('a',) needs a unique_key (it picks one delivery per key); declare "
             "unique_key or drop first_by", TableSpec("t", first_by=("a",)))


def test_null_safe_columns_need_a_unique_key_and_must_be_in_it():
    from spark_jobs.model.tables import TableSpec

    _refused("job j, table t: null_safe ('a',) needs a unique_key (it names key columns that may be NULL); "
             "declare unique_key or drop null_safe", TableSpec("t", null_safe=("a",)))
    _refused("job j, table t: null_safe ('a', 'b') names b, not in unique_key ('a',); list only key columns",
             TableSpec("t", unique_key=("a",), null_safe=("a", "b")))


def test_upsert_needs_a_unique_key():
    from spark_jobs.model.tables import TableSpec

    _refused("job j, table t: write_mode 'upsert' needs a unique_key (the rows a MERGE updates); declare unique_key",
             TableSpec("t", write_mode="upsert"))


def test_a_delivery_date_bound_is_on_a_partition_column_of_the_key_of_an_insert_table():
    from spark_jobs.model.tables import DeliveryDateBound, TableSpec

    bound = DeliveryDateBound("date", 1)
    _refused("job j, table t: delivery_date_bound DeliveryDateBound(column='date', days_before=1) bounds 'date', not "
             "a partition column (); bound a partition column that is part of unique_key",
             TableSpec("t", unique_key=("id", "date"), delivery_date_bound=bound))
    _refused("job j, table t: delivery_date_bound DeliveryDateBound(column='date', days_before=1) bounds 'date', not "
             "part of unique_key ('id',); add it to the key or bound another column",
             TableSpec("t", partition_by=("date",), unique_key=("id",), delivery_date_bound=bound))
    _refused("job j, table t: delivery_date_bound DeliveryDateBound(column='date', days_before=1) needs write_mode "
             "'insert', not 'upsert'; drop the bound",
             TableSpec("t", partition_by=("date",), unique_key=("id", "date"), write_mode="upsert",
                       delivery_date_bound=bound))


def test_a_stateless_job_with_several_tables_routes_every_table():
    from spark_jobs.model.tables import TableSpec

    _refused("job j, table q: route None leaves the table's rows unknown in a stateless job with several tables; "
             "give it a route (a SQL condition over the transform's result, e.g. 'reason IS NULL')",
             TableSpec("t", route="reason IS NULL"), TableSpec("q"))
    _refused("job j, table t: route 'x' is for stateless jobs (a stateful job's select picks its rows); drop the "
             "route", TableSpec("t", route="x"), stateful=True)


def test_declared_columns_are_columns_of_the_declared_schema():
    from spark_jobs.model.tables import TableSpec

    _refused("job j, table t: stats_columns ('a', 'c') names c, not a column of the declared schema; add it to "
             "schema or drop it here", TableSpec("t", stats_columns=("a", "c"), schema="a STRING, b BIGINT"))
    _refused("job j, table t: partition_by ('day',) names day, not a column of the declared schema; add it to "
             "schema or drop it here", TableSpec("t", partition_by=("day",), schema="a STRING"))
    _refused("job j, table t: unique_key ('id',) names id, not a column of the declared schema; add it to "
             "schema or drop it here", TableSpec("t", unique_key=("id",), schema="a STRING"))
    _refused("job j, table t: zorder_by ('b',) names b, not a column of the declared schema; add it to "
             "schema or drop it here", TableSpec("t", zorder_by=("b",), schema="a STRING"))


def test_table_names_are_unique_per_job():
    from spark_jobs.model.tables import TableSpec

    _refused("job j, table t: name 't' is declared twice; give each table of a job its own name",
             TableSpec("t", route="a"), TableSpec("t", route="b"))


def test_a_table_several_jobs_write_is_declared_identically_by_each():
    from spark_jobs.model.errors import RegistryError
    from spark_jobs.model.jobs import check_jobs
    from spark_jobs.model.tables import TableSpec

    first = _job(TableSpec("shared", unique_key=("id",)), name="a")
    same = _job(TableSpec("shared", unique_key=("id",)), name="b")
    assert list(check_jobs([first, same])) == ["a", "b"]
    other = _job(TableSpec("shared", unique_key=("id", "date")), name="c")
    with pytest.raises(RegistryError) as caught:
        check_jobs([first, other])
    assert str(caught.value) == ("job c, table shared: unique_key ('id', 'date') differs from job a's ('id',); a "
                                 "table several jobs write is one declaration: use a's TableSpec in both")


# --- A file log type's entry (spark_jobs.model.log_types, file_log_type) ---


def test_a_log_types_job_writes_exactly_its_two_tables():
    from spark_jobs.model.errors import RegistryError
    from spark_jobs.model.jobs import JobSpec
    from spark_jobs.model.log_types import LogType
    from spark_jobs.model.tables import TableSpec

    kind = LogType("app", key="id", position="line_number", identity="kind")
    with pytest.raises(RegistryError) as caught:
        JobSpec(name="j", description="", default_input="", tables=(TableSpec("app_events"),), log_type=kind)
    assert str(caught.value) == ("job j: log_type 'app' writes the tables ['app_events', 'app_quarantine'], not "
                                 "['app_events']; declare the job with file_log_type()")
