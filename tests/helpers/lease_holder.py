"""A stand-in driver for the supervisor's own tests (no Spark): ``lease_holder.py CONTROL HOLD EXIT TTL``.

It takes the job's real single-writer lease, renews it every ttl/3 like the runner, prints one
line, holds it for HOLD seconds (forever if negative), then exits with EXIT (releasing the lease
when EXIT is 0). SIGTERM: release and exit 0, as a driver that stops after its micro-batch. A lease held by
another live driver: exit 3 with the CLI's one-line error, as ``python -m spark_jobs run`` does. An optional fifth
argument is the trigger it says it runs (the lease's ``details.trigger``; default a streaming one). A last argument
``--standby`` (what the supervisor appends for a warm standby) makes it one: it says so in ``standby.json`` and takes
the lease the moment it is free (every 0.2 s), as ``run --standby`` does. With ``$LEASE_HOLDER_COMMITTED`` set, its
lease says, as a runner's does once its first batch is committed, ``last_committed_batch`` 0 and the code ``version``
it runs (a release's name when the supervisor started it from one); a driver of the version named by
``$LEASE_HOLDER_CRASH_VERSION`` exits 1 the moment it holds the lease (a new version crashing in its first batch). A
``--preflight`` after ``--standby`` (a rollout's new version) is one that passes its pre-flight, after
``$LEASE_HOLDER_PREFLIGHT_SECONDS`` (default 0) of checks.
"""

import os
import signal
import sys
import time

from spark_jobs.control.checkpoint.lease import Lease, LeaseHeld
from spark_jobs.control.supervision.ownership import LEASE_HELD_EXIT_STATUS
from spark_jobs.control.supervision.standby_state import announce_standby, withdraw_standby

preflight = "--preflight" in sys.argv[1:]  # after --standby: a rollout's new version
standby = "--standby" in sys.argv[1:]
args = [arg for arg in sys.argv[1:] if arg not in ("--standby", "--preflight")]
control, hold, code, ttl = args[0], float(args[1]), int(args[2]), float(args[3])
trigger = args[4] if len(args) > 4 else "processing-time:1s"
details = {"trigger": trigger}
if os.environ.get("LEASE_HOLDER_COMMITTED") or os.environ.get("LEASE_HOLDER_CRASH_VERSION"):
    from spark_jobs.launch.version import current

    details.update(last_committed_batch=0, version=current().name)
if standby:
    signal.signal(signal.SIGTERM, lambda *_: (withdraw_standby(control), sys.exit(143)))
    if preflight:
        time.sleep(float(os.environ.get("LEASE_HOLDER_PREFLIGHT_SECONDS", "0")))
    announce_standby(control, 0.0)
while True:
    try:
        lease = Lease.acquire(control, "cloudtrail_etl", ttl, details=details)
        break
    except LeaseHeld as held:
        if not standby:
            print(f"error: {held}", file=sys.stderr, flush=True)
            sys.exit(LEASE_HELD_EXIT_STATUS)
        time.sleep(0.2)
if details.get("version") and details["version"] == os.environ.get("LEASE_HOLDER_CRASH_VERSION"):
    print(f"error: version {details['version']} crashes in its first batch", file=sys.stderr, flush=True)
    os._exit(1)  # the lease stays unreleased, its holder gone: as a driver that dies in its first batch
if standby:
    withdraw_standby(control)
lease.start_heartbeat()
print(f"holding lease generation {lease.info.generation} as pid {lease.info.pid}", flush=True)


def stop(*_):
    lease.release()
    print("stopped by SIGTERM", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
deadline = time.monotonic() + hold if hold >= 0 else float("inf")
while time.monotonic() < deadline:
    time.sleep(0.05)
if code == 0:
    lease.release()
else:
    print(f"error: stand-in driver failing with status {code}", file=sys.stderr, flush=True)
sys.exit(code)
