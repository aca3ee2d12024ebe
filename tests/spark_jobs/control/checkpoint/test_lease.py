"""The single-writer lease: refused second driver, takeovers, fencing of a paused or replaced holder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta

import fsspec
import pytest

from spark_jobs.control.checkpoint.lease import Lease, LeaseHeld, LeaseLost, iso, parse_iso, read_lease, utc_now
from spark_jobs.model.policies import HealthThresholds
from tests.helpers.processes import wait_for


class HandClock:
    """A lease's clocks (:class:`~spark_jobs.control.checkpoint.lease.Clock`) moved by the test: both start at the
    real time and run only in :meth:`advance`, so a lease's ttl is passed, not waited out."""

    def __init__(self) -> None:
        self.wall: datetime = utc_now()
        self.seconds = time.monotonic()

    def now(self) -> datetime:
        return self.wall

    def monotonic(self) -> float:
        return self.seconds

    def advance(self, seconds: float) -> None:
        self.seconds += seconds  # the monotonic first: a renewal that sees the new wall time reads it after this
        self.wall += timedelta(seconds=seconds)


@pytest.fixture(params=["local", "memory"])
def control_dir(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path / "control" / "job")
        return
    url = f"memory://lease-{uuid.uuid4().hex}/control/job"
    yield url
    fsspec.filesystem("memory").rm(url.split("/control")[0], recursive=True)


def test_default_ttl_comes_from_the_registry():
    assert HealthThresholds().lease_ttl_seconds == 30


def test_acquire_writes_generation_one(control_dir):
    lease = Lease.acquire(control_dir, "job", ttl_seconds=30, details={"query_id": "q1"})
    info = read_lease(control_dir)
    assert (info.generation, info.owner, info.job, info.pid, info.host, info.released, info.details) == (
        1, lease.info.owner, "job", os.getpid(), socket.gethostname(), False, {"query_id": "q1"})
    assert info.alive_locally() is True
    assert info.expired() is False
    fs, path = fsspec.core.url_to_fs(control_dir)
    assert [name.rsplit("/", 1)[-1] for name in fs.ls(f"{path}/lease", detail=False)] == ["0000000001.json"]


def test_second_acquire_is_refused_with_the_holder(control_dir):
    first = Lease.acquire(control_dir, "job", ttl_seconds=30)
    with pytest.raises(LeaseHeld) as refused:
        Lease.acquire(control_dir, "job", ttl_seconds=30)
    assert refused.value.holder.owner == first.info.owner
    message = str(refused.value)
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in message
    assert "heartbeat" in message and "s ago" in message
    first.check()  # the holder is unaffected


def test_released_lease_is_taken_over_at_once(control_dir):
    first = Lease.acquire(control_dir, "job", ttl_seconds=30)
    first.release()
    assert read_lease(control_dir).released is True
    second = Lease.acquire(control_dir, "job", ttl_seconds=30)
    assert second.info.generation == 2
    with pytest.raises(LeaseLost):
        first.check()


def test_expired_heartbeat_is_taken_over_and_the_old_holder_is_fenced(control_dir):
    clock = HandClock()
    first = Lease.acquire(control_dir, "job", ttl_seconds=0.5, clock=clock)
    with pytest.raises(LeaseHeld):
        Lease.acquire(control_dir, "job", ttl_seconds=0.5, clock=clock)
    clock.advance(0.4)
    with pytest.raises(LeaseHeld):  # within the ttl
        Lease.acquire(control_dir, "job", ttl_seconds=0.5, clock=clock)
    clock.advance(0.3)
    info = read_lease(control_dir)
    assert info.expired(clock.now()) is True
    assert info.expired(parse_iso(info.heartbeat_at) + timedelta(seconds=0.4)) is False
    second = Lease.acquire(control_dir, "job", ttl_seconds=30, clock=clock)
    assert second.info.generation == 2
    with pytest.raises(LeaseLost, match="renewal was 0.7 s ago, more than the ttl of 0.5 s"):
        first.check()
    with pytest.raises(LeaseLost):
        first.renew()
    assert read_lease(control_dir).owner == second.info.owner


def test_check_fails_after_a_newer_generation_even_when_own_renewal_is_fresh(control_dir):
    first = Lease.acquire(control_dir, "job", ttl_seconds=30)
    fs, path = fsspec.core.url_to_fs(control_dir)
    record = dict(first.info.to_dict(), generation=2, owner="someone-else")
    fs.pipe_file(f"{path}/lease/0000000002.json", json.dumps(record).encode())
    with pytest.raises(LeaseLost, match="generation 2 was taken"):
        first.check()
    with pytest.raises(LeaseLost):
        first.renew()
    first.release()  # does not touch the newer generation
    assert read_lease(control_dir).owner == "someone-else"


def test_paused_holder_that_wakes_up_cannot_write_even_if_nobody_took_over(control_dir):
    clock = HandClock()
    lease = Lease.acquire(control_dir, "job", ttl_seconds=0.3, clock=clock)
    clock.advance(0.25)
    lease.check()  # within the ttl: still its own (not at it exactly: a float's sum may land either side)
    clock.advance(0.25)  # as if SIGSTOPped for longer than the ttl
    with pytest.raises(LeaseLost, match="renewal was 0.5 s ago"):
        lease.check()
    assert read_lease(control_dir).generation == 1  # nobody took over
    with pytest.raises(LeaseLost):
        lease.renew()  # once lost, always lost for this holder


def test_renew_moves_the_heartbeat_and_merges_details(control_dir):
    clock = HandClock()
    lease = Lease.acquire(control_dir, "job", ttl_seconds=30, details={"query_id": "q"}, clock=clock)
    before = read_lease(control_dir).heartbeat_at
    clock.advance(5)
    lease.renew({"last_batch": 4})
    after = read_lease(control_dir)
    assert (before, after.heartbeat_at) == (iso(clock.now() - timedelta(seconds=5)), iso(clock.now()))
    assert after.details == {"query_id": "q", "last_batch": 4}
    assert after.generation == 1


def test_heartbeat_thread_keeps_a_short_lease_alive(control_dir):
    clock = HandClock()
    lease = Lease.acquire(control_dir, "job", ttl_seconds=1.0, clock=clock)
    lease.start_heartbeat(0.01)
    try:
        # 1.25 s on the lease's clocks, past its ttl, in steps the thread renews: a renewal may read the monotonic
        # clock just before a step, so its own age stays under three steps, 0.75 s, within the ttl.
        for _ in range(5):
            clock.advance(0.25)
            wait_for(lambda: read_lease(control_dir).heartbeat_at == iso(clock.now()), 30,
                     "the heartbeat thread to renew the lease at the moved clock")
        lease.check()
        with pytest.raises(LeaseHeld):
            Lease.acquire(control_dir, "job", ttl_seconds=1.0, clock=clock)
    finally:
        lease.release()
    assert read_lease(control_dir).released is True


def test_dead_pid_on_this_host_is_taken_over_without_waiting_for_the_ttl(tmp_path):
    control = str(tmp_path / "control")
    code = ("import sys; from spark_jobs.control.checkpoint.lease import Lease; "
            "Lease.acquire(sys.argv[1], 'job', ttl_seconds=3600); print('held', flush=True)")
    child = subprocess.run([sys.executable, "-c", code, control], capture_output=True, text=True, timeout=60)
    assert child.stdout == "held\n", child.stderr
    stale = read_lease(control)
    assert (stale.released, stale.heartbeat_age() < 3600, stale.alive_locally()) == (False, True, False)
    taken = Lease.acquire(control, "job", ttl_seconds=30)
    assert taken.info.generation == 2


def test_kill_9_of_a_holder_is_taken_over_at_once(tmp_path):
    control = str(tmp_path / "control")
    code = ("import sys, time; from spark_jobs.control.checkpoint.lease import Lease; "
            "Lease.acquire(sys.argv[1], 'job', ttl_seconds=3600); print('held', flush=True); time.sleep(600)")
    child = subprocess.Popen([sys.executable, "-c", code, control], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "held\n"
        with pytest.raises(LeaseHeld, match=f"pid {child.pid} "):
            Lease.acquire(control, "job", ttl_seconds=30)
        child.kill()
        deadline = time.monotonic() + 10  # the signal is delivered asynchronously
        while read_lease(control).alive_locally() and time.monotonic() < deadline:
            time.sleep(0.01)
        # not reaped yet (no wait()): a zombie counts as dead
        assert read_lease(control).alive_locally() is False
        assert Lease.acquire(control, "job", ttl_seconds=30).info.generation == 2
    finally:
        child.kill()
        child.wait()


def test_lease_of_another_host_is_judged_by_the_heartbeat_only(control_dir):
    fs, path = fsspec.core.url_to_fs(control_dir)
    lease = Lease.acquire(control_dir, "job", ttl_seconds=30)
    record = dict(lease.info.to_dict(), host="another-host", pid=1)
    fs.pipe_file(f"{path}/lease/0000000001.json", json.dumps(record).encode())
    info = read_lease(control_dir)
    assert (info.alive_locally(), info.expired()) == (None, False)
    with pytest.raises(LeaseHeld, match="on host another-host"):
        Lease.acquire(control_dir, "job", ttl_seconds=30)


def test_concurrent_acquires_have_exactly_one_winner(tmp_path):
    control = str(tmp_path / "control")
    code = ("import sys, time; from spark_jobs.control.checkpoint.lease import Lease, LeaseHeld\n"
            "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
            "try:\n    Lease.acquire(sys.argv[1], 'job', ttl_seconds=3600)\n    print('won', flush=True)\n"
            "    sys.stdin.read()\n"  # hold the lease until the test has every answer
            "except LeaseHeld:\n    print('refused', flush=True)\n")
    start = str(time.time() + 3.0)
    children = [subprocess.Popen([sys.executable, "-c", code, control, start], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for _ in range(4)]
    try:
        outcomes = sorted(child.stdout.readline().strip() for child in children)
    finally:
        for child in children:
            child.communicate(timeout=60)
    assert outcomes == ["refused", "refused", "refused", "won"]
    assert read_lease(control).generation == 1


def test_unreadable_newest_generation_counts_as_expired_but_keeps_its_number(control_dir):
    fs, path = fsspec.core.url_to_fs(control_dir)
    fs.makedirs(f"{path}/lease", exist_ok=True)
    fs.pipe_file(f"{path}/lease/0000000003.json", b"{torn")
    assert read_lease(control_dir) is None
    assert Lease.acquire(control_dir, "job", ttl_seconds=30).info.generation == 4


def test_only_the_last_generations_are_kept(control_dir):
    for _ in range(13):
        Lease.acquire(control_dir, "job", ttl_seconds=30).release()
    fs, path = fsspec.core.url_to_fs(control_dir)
    names = sorted(name.rsplit("/", 1)[-1] for name in fs.ls(f"{path}/lease", detail=False))
    assert names[-1] == "0000000013.json"
    assert len(names) == 11
