"""A driver's version: a release's name when its release.json matches the code, else $SPARK_JOBS_VERSION, else the
code hash; the code hash is always the package's own."""

from __future__ import annotations

import json

import pytest

from spark_jobs.launch import code_zip
from spark_jobs.launch.version import CodeVersion, check_name, version_of


@pytest.fixture
def package(tmp_path):
    """A release folder holding a small package ``spark_jobs`` (two modules)."""
    pkg = tmp_path / "v2" / "spark_jobs"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "registry.py").write_text("JOBS = {}\n")
    return pkg


def test_a_checkout_without_name_is_named_by_its_code_hash(package):
    code = code_zip.code_hash(package)[:16]

    assert version_of(package, environ={}) == CodeVersion(f"code-{code}", code, "code")


def test_the_environment_names_a_checkout(package):
    code = code_zip.code_hash(package)[:16]

    assert version_of(package, environ={"SPARK_JOBS_VERSION": " 2026.12.07-1 "}) == CodeVersion(
        "2026.12.07-1", code, "environment")


def test_a_release_names_its_code_and_wins_over_the_environment(package):
    code = code_zip.code_hash(package)[:16]
    (package.parent / "release.json").write_text(json.dumps({"name": "v2", "code": code}))

    assert version_of(package, environ={"SPARK_JOBS_VERSION": "other"}) == CodeVersion("v2", code, "release")


def test_a_release_whose_code_was_changed_after_is_not_that_release(package):
    code = code_zip.code_hash(package)[:16]
    (package.parent / "release.json").write_text(json.dumps({"name": "v2", "code": code}))
    (package / "registry.py").write_text("JOBS = {'changed': 1}\n")

    changed = version_of(package, environ={})
    assert changed.name == f"code-{changed.code}" and changed.code != code


def test_the_commit_metadata_names_version_and_code(package):
    assert json.loads(CodeVersion("v2", "0123456789abcdef", "release").user_metadata()) == {
        "version": "v2", "code": "0123456789abcdef"}


@pytest.mark.parametrize("bad", ["", "-v2", "v 2", "v2/../x", "x" * 65])
def test_a_bad_name_is_refused_naming_it_and_the_rule(bad):
    with pytest.raises(ValueError, match="cannot name a version: use 1-64 letters"):
        check_name(bad)
