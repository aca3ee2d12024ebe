"""What runs in the driver and on the executors holds no tooling (the benchmark, sample data, test harnesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

from spark_jobs.launch import code_zip
from tests.helpers.project import PROJECT_ROOT
from tools.sample_data import write_sample_landing

# Runs the real command line in this process's interpreter and, at exit, writes the modules it loaded.
PROBE = """
import atexit, json, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "spark_jobs"
runpy.run_module("spark_jobs", run_name="__main__", alter_sys=True)
"""


def test_a_run_of_a_job_loads_no_tooling_module(tmp_path):
    landing = tmp_path / "landing"
    write_sample_landing(landing, files=2, records_per_file=5, seed=3, include_bad_files=False)
    loaded = tmp_path / "modules.json"

    done = subprocess.run([sys.executable, "-c", PROBE, str(loaded), "run", "cloudtrail_etl", "--input", str(landing),
                           "--lake", str(tmp_path / "lake"), "--trigger", "available-now"],
                          cwd=PROJECT_ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["job"], summary["rows"]["cloudtrail_events"]) == ("cloudtrail_etl", 10)
    modules = json.loads(loaded.read_text())
    assert "pyspark.sql" in modules and "spark_jobs.driver.runner" in modules  # the run really ran
    assert [m for m in modules if m == "tools" or m.startswith("tools.")] == []


def test_the_executors_code_zip_holds_only_the_product(tmp_path):
    built = code_zip.build(tmp_path / "zips")

    with zipfile.ZipFile(built) as archive:
        names = archive.namelist()
    assert names and all(name.startswith("spark_jobs/") and name.endswith(".py") for name in names)
    assert [n for n in names if "/bench/" in n or "sample_data" in n or "broker" in n or "local_airflow" in n] == []
    assert "spark_jobs/driver/runner.py" in names and "spark_jobs/jobs/cloudtrail_etl.py" in names
