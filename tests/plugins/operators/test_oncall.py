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
