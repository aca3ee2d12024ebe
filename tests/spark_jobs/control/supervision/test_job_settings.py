"""A continuous job's settings kept beside its checkpoint (``settings.json``): the warm standby's precedence (this
run, on-call's choice, the registry) and ``python -m spark_jobs standby``, which shows and switches it."""

from __future__ import annotations

import json

import pytest

from spark_jobs.control.supervision.job_settings import parse_switch, read_settings, set_warm_standby, warm_standby
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from tests.helpers.project import run_cli

JOB = get_job("cloudtrail_etl")  # its registry entry keeps a warm standby
OTHER = get_job("cloudtrail_activity")  # its registry entry keeps none


def test_this_run_then_oncall_then_the_registry(tmp_path):
    control = str(Lake(tmp_path / "lake").control_path(JOB.name))
    assert warm_standby(JOB, control).describe() == "on (the registry's default)"
    assert warm_standby(OTHER, control).describe() == "off (the registry's default)"
    assert warm_standby(JOB, control, default=False).value is False  # a policy made from the registry's, overridden
    set_warm_standby(control, False, by="alice", reason="memory is short")
    chosen = warm_standby(JOB, control)
    assert (chosen.value, chosen.source, chosen.by) == (False, "on-call", "alice")
    assert read_settings(control)["warm_standby"]["reason"] == "memory is short"
    assert warm_standby(JOB, control, this_run=True).describe() == "on (this run's param)"
    set_warm_standby(control, None, by="bob")
    assert read_settings(control) == {} and warm_standby(JOB, control).source == "registry"


@pytest.mark.parametrize("text, value", [("on", True), ("OFF", False), ("default", None), ("true", True), ("no", False)])
def test_switch_words(text, value):
    assert parse_switch(text) is value


def test_a_switch_that_is_not_one_is_named():
    with pytest.raises(ValueError, match="'sometimes' is not on, off or default"):
        parse_switch("sometimes")


def test_the_standby_command_shows_and_switches_it_for_later_runs(tmp_path):
    lake = tmp_path / "lake"
    shown = run_cli("standby", JOB.name, "--lake", str(lake))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [f"{JOB.name}: warm standby on (the registry's default)", "  now: -"]
    switched = run_cli("standby", JOB.name, "off", "--by", "carol", "--lake", str(lake))
    assert switched.returncode == 0, switched.stderr
    assert switched.stdout.startswith(f"{JOB.name}: warm standby off (set by carol at ")
    kept = json.loads((Lake(lake).control_path(JOB.name) / "settings.json").read_text())
    assert (kept["warm_standby"]["value"], kept["warm_standby"]["by"]) == (False, "carol")
    wrong = run_cli("standby", JOB.name, "sometimes", "--lake", str(lake))
    assert wrong.returncode == 2 and "invalid choice: 'sometimes'" in wrong.stderr
