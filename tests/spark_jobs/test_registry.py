"""The registry: one declaration per job, cheap to import."""

import subprocess
import sys

import pytest

from spark_jobs.errors import UsageError
from spark_jobs.registry import JOBS, all_tables, get_job
from tests.conftest import PROJECT_ROOT


def test_every_job_has_a_module_with_transform_and_one_output_per_table():
    for job in JOBS.values():
        module = __import__(job.module, fromlist=["transform"])
        assert callable(module.transform)
        assert list(module.OUTPUTS) == [t.name for t in job.tables]


def test_table_names_are_unique_across_jobs():
    assert len(all_tables()) == sum(len(job.tables) for job in JOBS.values())


def test_unknown_job_names_the_value_and_the_known_jobs():
    with pytest.raises(UsageError, match="unknown job .nope.; known jobs: cloudtrail_activity, cloudtrail_alerts, cloudtrail_etl, word_count"):
        get_job("nope")


def test_importing_the_registry_does_not_import_pyspark():
    code = "import sys, spark_jobs.registry; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
