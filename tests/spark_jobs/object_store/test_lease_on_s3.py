"""The single-writer lease on S3 (the real S3-compatible server): an exclusive create is S3's conditional put
(``If-None-Match: *``), a second driver is refused, a killed driver's lease is taken over at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from spark_jobs.control.checkpoint import lease as lease_module
from spark_jobs.control.checkpoint.lease import Lease, LeaseHeld, LeaseLost, read_lease
from tests.helpers.project import PROJECT_ROOT, run_cli


def test_a_second_create_of_a_key_is_refused_by_the_server(s3_env, bucket):
    import fsspec

    fs, path = fsspec.core.url_to_fs(f"{bucket('probe')}/control/key.json")
    with fs.open(path, "xb") as handle:
        handle.write(b"first")
    with pytest.raises(FileExistsError):
        with fs.open(path, "xb") as handle:
            handle.write(b"second")
    assert fs.cat_file(path) == b"first"


def test_second_holder_refused_then_a_killed_holders_lease_taken_over(s3_env, bucket, tmp_path):
    control = f"{bucket('lease')}/lake/control/cloudtrail_etl"
    first = Lease.acquire(control, "cloudtrail_etl", ttl_seconds=60)
    assert lease_module._PROBED[("S3FileSystem", control.split("/")[2])] is True  # the server refused the probe
    with pytest.raises(LeaseHeld) as held:
        Lease.acquire(control, "cloudtrail_etl", ttl_seconds=60)
    assert held.value.holder.generation == 1 and held.value.holder.pid == os.getpid()
    first.release()

    # Another process takes it, then dies by kill -9: its lease is taken over at once (same host, pid gone).
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from spark_jobs.control.checkpoint.lease import Lease
        Lease.acquire({control!r}, "cloudtrail_etl", ttl_seconds=600)
        print("held", flush=True)
        time.sleep(600)
        """)], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LeaseHeld):
            Lease.acquire(control, "cloudtrail_etl", ttl_seconds=60)
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(30)
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
    taken = Lease.acquire(control, "cloudtrail_etl", ttl_seconds=60)
    assert (taken.info.generation, read_lease(control).owner) == (3, taken.info.owner)

    # The replaced holder's next check fails closed: a newer generation exists on the bucket.
    stale = Lease(taken._fs, taken._lease_dir, lease_module.LeaseInfo(**{**taken.info.to_dict(), "generation": 2}),
                  control)
    with pytest.raises(LeaseLost):
        stale.check()
    taken.release()


def test_a_second_driver_on_a_checkpoint_in_a_bucket_exits_3(s3_env, bucket):
    lake = f"{bucket('lake')}/lake"
    trail = bucket("trail")
    s3 = s3_env
    held = Lease.acquire(f"{lake}/control/cloudtrail_etl", "cloudtrail_etl", ttl_seconds=60)
    try:
        import fsspec

        fs, path = fsspec.core.url_to_fs(f"{trail}/AWSLogs/111122223333/CloudTrail/us-east-1/2024/03/01/x.json")
        fs.pipe_file(path, b'{"Records": []}')
        refused = run_cli("run", "cloudtrail_etl", "--input", f"{trail}/AWSLogs/", "--lake", lake, timeout=120)
    finally:
        held.release()
    assert refused.returncode == 3, refused.stderr[-2000:]
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(f"error: job cloudtrail_etl is already running: its checkpoint is held by pid {os.getpid()}")
    assert f"(in {lake}/control/cloudtrail_etl)" in line and s3["AWS_SECRET_ACCESS_KEY"] not in refused.stderr
