"""Each job's module has the one shape the driver loads (spark_jobs/driver/job_modules.py): its transform, and its
selects unless its registry entry is a log type's."""

import pytest

from spark_jobs.registry import JOBS, get_job


def test_every_job_has_a_module_with_transform_and_one_output_per_table():
    """Every job module has the one documented shape (spark_jobs.jobs.JobModule): transform(source, job) and one
    select(result, context) per registry table, in the registry's order (a file log type's module has only its
    transform: the driver derives its selects from the registry entry); no module constants beside them."""
    import inspect

    from spark_jobs.driver.job_contract import JobModule
    from spark_jobs.driver.job_modules import job_module

    for job in JOBS.values():
        module = __import__(job.module, fromlist=["transform"])
        assert len(inspect.signature(module.transform).parameters) == 2, job.name
        assert hasattr(module, "OUTPUTS") == (job.log_type is None), job.name
        loaded = job_module(job)
        assert isinstance(loaded, JobModule) and loaded.transform is module.transform, job.name
        assert list(loaded.OUTPUTS) == [t.name for t in job.tables]
        for select in getattr(module, "OUTPUTS", loaded.OUTPUTS).values():
            assert len(inspect.signature(select).parameters) == 2, (job.name, select)
        for gone in ("UNIQUE_KEYS", "FIRST_BY", "NULL_SAFE_KEYS", "DELIVERY_DATE_BOUNDS", "SOURCE_FILE",
                     "TABLE_SOURCE_FILE", "TABLE_SCHEMAS", "SOURCE_SCHEMA", "ROUTE", "INPUT_ROWS"):
            assert not hasattr(module, gone), (job.name, gone)


def test_every_file_job_is_a_log_type_whose_module_is_its_parser_alone():
    """cloudtrail_etl, cowrie_honeypot and suricata_eve are declared with file_log_type: their modules hold only the
    parser's transform, and the driver refuses such a module that declares its own selects."""
    import sys
    import types

    from spark_jobs.driver.job_modules import job_module

    logs = {name: job for name, job in JOBS.items() if job.log_type is not None}
    assert sorted(logs) == ["cloudtrail_etl", "cowrie_honeypot", "suricata_eve"]
    for job in logs.values():
        module = __import__(job.module, fromlist=["transform"])
        assert not hasattr(module, "OUTPUTS") and callable(module.transform)
        assert list(job_module(job).OUTPUTS) == [t.name for t in job.tables]
    events, quarantined = get_job("cloudtrail_etl").tables
    assert (events.unique_key, quarantined.null_safe) == (("eventID", "date"), ("source_file", "record_index", "reason"))
    keeps_its_own = types.ModuleType("spark_jobs.jobs.cloudtrail_etl")
    keeps_its_own.transform, keeps_its_own.OUTPUTS = (lambda files, job: files), {}
    real = sys.modules["spark_jobs.jobs.cloudtrail_etl"]
    sys.modules["spark_jobs.jobs.cloudtrail_etl"] = keeps_its_own
    try:
        with pytest.raises(ValueError) as caught:
            job_module(get_job("cloudtrail_etl"))
    finally:
        sys.modules["spark_jobs.jobs.cloudtrail_etl"] = real
    assert str(caught.value) == ("job cloudtrail_etl is a file log type: its selects come from its registry entry; "
                                 "drop OUTPUTS from spark_jobs.jobs.cloudtrail_etl")


def test_a_job_module_without_selects_is_refused_unless_its_entry_is_a_log_type():
    from dataclasses import replace

    from spark_jobs.driver.job_modules import job_module

    with pytest.raises(ValueError) as caught:
        job_module(replace(get_job("cowrie_honeypot"), log_type=None))
    assert str(caught.value) == ("job cowrie_honeypot: spark_jobs.jobs.cowrie_honeypot has no OUTPUTS; give it one "
                                 "select per table, or declare the job with file_log_type() when it is a log of files "
                                 "with events and a quarantine")
