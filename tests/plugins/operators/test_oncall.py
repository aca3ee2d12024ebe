"""The on-call operator's waits for the checkpoint's lease (``stop``: the continuous driver's gone; ``restart``: a
newer one): read once a second until it is what the action waits for, or a timeout. The actions themselves run
against a real Airflow in ``tests/dags/test_continuous_supervision.py``."""

from __future__ import annotations

import threading
import time

import pytest
from tenacity import RetryError

from spark_jobs.control.checkpoint.lease import Lease
from streaming.operators.oncall import _lease_once


def test_the_wait_ends_with_the_lease_it_waits_for(tmp_path):
    lease = Lease.acquire(str(tmp_path), "cloudtrail_etl", 60)
    releaser = threading.Timer(1.5, lease.release)
    releaser.start()
    try:
        started = time.monotonic()
        found = _lease_once(str(tmp_path), lambda lease: lease is None or lease.released, 10)
        waited = time.monotonic() - started
    finally:
        releaser.cancel()
    assert (found.generation, found.released) == (lease.info.generation, True)
    assert 1.5 <= waited < 5


def test_the_wait_gives_up_after_its_timeout(tmp_path):
    Lease.acquire(str(tmp_path), "cloudtrail_etl", 60)
    started = time.monotonic()
    with pytest.raises(RetryError):
        _lease_once(str(tmp_path), lambda lease: lease is None, 2.5)
    assert 2 <= time.monotonic() - started < 4  # reads at 0, 1 and 2 s: the next would come after the timeout


def test_an_approved_destructive_rollout_writes_the_destructive_request_for_the_supervisor(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from spark_jobs.control.oncall.requests import check_request
    from spark_jobs.control.rollout.preflight_state import write_preflight
    from spark_jobs.control.rollout.request import read_rollout
    from spark_jobs.control.supervision.state import SupervisorState, write_supervisor_state
    from spark_jobs.launch.releases import RELEASES_ENV, add_release
    from spark_jobs.model.lake import Lake
    from streaming.operators.oncall import OncallActionOperator
    from tests.helpers.project import PROJECT_ROOT

    monkeypatch.setenv(RELEASES_ENV, str(tmp_path / "releases"))
    add_release("v3", package_dir=PROJECT_ROOT / "spark_jobs", root=tmp_path / "releases")
    lake = Lake(tmp_path / "lake")
    control = str(lake.control_path("cloudtrail_etl"))
    write_supervisor_state(control, SupervisorState("cloudtrail_etl", 1800, 5, state="running"))
    write_preflight(control, "v3", "c0de", [{"code": "output_schema_changed", "explanation": "a column type",
                                             "action": "..."}], ["outputs"], 1.0)
    request = check_request("cloudtrail_etl", "rollout_destructive", "a column type", version="v3", lake=lake)

    done = OncallActionOperator(task_id="act")._perform(request, SimpleNamespace(triggered_by="alice"), {})

    assert done["rollout"] == read_rollout(control)
    assert {k: done["rollout"][k] for k in ("version", "destructive", "by", "reason", "phase")} == {
        "version": "v3", "destructive": True, "by": "alice", "reason": "a column type", "phase": "requested"}
