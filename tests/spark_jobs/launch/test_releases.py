"""Releases: kept from git, a built zip or a folder, found by name, refused with the way out; a release's driver
environment puts it first and keeps the project's home."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spark_jobs.launch import code_zip
from spark_jobs.launch.releases import add_release, driver_env, find_release, list_releases
from spark_jobs.launch.submit import APPLICATION
from spark_jobs.launch.version import version_of
from spark_jobs.model.errors import UsageError
from tests.helpers.project import PROJECT_ROOT
from tools.releases import release_with


def test_a_release_from_git_holds_that_commits_package_and_names_its_code(tmp_path):
    head = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()

    release = add_release("v1", git_ref="HEAD", root=tmp_path, by="alice")

    assert (release.name, release.by, release.made_from) == ("v1", "alice", f"git HEAD ({head[:12]})")
    assert release.code == code_zip.code_hash(release.folder / "spark_jobs")[:16]
    assert version_of(release.folder / "spark_jobs", environ={}).name == "v1"
    assert [r.name for r in list_releases(tmp_path)] == ["v1"] and find_release("v1", tmp_path) == release
    assert json.loads((release.folder / "release.json").read_text())["code"] == release.code


def test_a_release_from_the_code_zip_is_the_same_code(tmp_path):
    built = code_zip.build(tmp_path / "zips")

    release = add_release("2026.12.07-1", zip_path=built, root=tmp_path / "releases")

    assert release.code == code_zip.code_hash()[:16] and built.name == f"spark_jobs-{release.code}.zip"


def test_bad_requests_are_refused_naming_the_value_and_the_way_out(tmp_path):
    add_release("v1", package_dir=PROJECT_ROOT / "spark_jobs", root=tmp_path)

    with pytest.raises(UsageError, match=r"unknown version 'v9' \(releases in .*: v1\); make it first with "
                                         r"`python -m spark_jobs release add v9 --git <ref>`"):
        find_release("v9", tmp_path)
    with pytest.raises(UsageError, match="release 'v1' exists already .*a release never changes"):
        add_release("v1", package_dir=PROJECT_ROOT / "spark_jobs", root=tmp_path)
    with pytest.raises(UsageError, match="git does not know 'no-such-ref'"):
        add_release("v2", git_ref="no-such-ref", root=tmp_path)
    with pytest.raises(UsageError, match="give exactly one of --git REF, --zip FILE or --folder DIR"):
        add_release("v2", root=tmp_path)
    with pytest.raises(UsageError, match="cannot name a version"):
        add_release("../v2", git_ref="HEAD", root=tmp_path)
    assert [r.name for r in list_releases(tmp_path)] == ["v1"]  # nothing half-made left


def test_a_driver_of_a_release_imports_the_release_whatever_its_folder(tmp_path):
    release = add_release("v1", package_dir=PROJECT_ROOT / "spark_jobs", root=tmp_path)

    said = subprocess.run([sys.executable, "-c", "import spark_jobs, spark_jobs.model.lake as l; "
                           "print(spark_jobs.__file__); print(l.PROJECT_ROOT)"], cwd=PROJECT_ROOT,
                          env=driver_env(release), capture_output=True, text=True, check=True).stdout.split()

    assert said == [str(release.folder / "spark_jobs" / "__init__.py"), str(PROJECT_ROOT)]


def test_spark_submits_application_file_runs_the_release_on_the_path_not_the_checkout(tmp_path):
    """spark-submit runs the checkout's ``spark_jobs/__main__.py`` as a file, whatever version the driver is: with a
    release first on the driver's PYTHONPATH, that file must hand over to the release's package."""
    release = release_with(tmp_path, "v2", {"cli/list_jobs.py": [
        ('print(f"{job.name}: {job.description}")', 'print(f"{job.name} (v2): {job.description}")')]})

    def listed(env: dict) -> str:
        return subprocess.run([sys.executable, APPLICATION, "list"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, check=True).stdout

    assert "cloudtrail_etl (v2): " in listed(driver_env(release))
    checkout = listed({k: v for k, v in driver_env(release).items() if k != "PYTHONPATH"})
    assert "cloudtrail_etl: " in checkout and "(v2)" not in checkout  # no release on the path: the checkout's
