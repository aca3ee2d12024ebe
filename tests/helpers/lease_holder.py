"""A stand-in driver for the supervisor's own tests (no Spark): ``lease_holder.py CONTROL HOLD EXIT TTL``.

It takes the job's real single-writer lease, renews it every ttl/3 like the runner, prints one
line, holds it for HOLD seconds (forever if negative), then exits with EXIT (releasing the lease
when EXIT is 0). SIGTERM: release and exit 0, as a driver that stops after its micro-batch. A lease held by
another live driver: exit 3 with the CLI's one-line error, as ``python -m spark_jobs run`` does. An optional fifth
argument is the trigger it says it runs (the lease's ``details.trigger``; default a streaming one).
"""

import signal
import sys
import time

from spark_jobs.control.checkpoint.lease import Lease, LeaseHeld
from spark_jobs.control.supervision.ownership import LEASE_HELD_EXIT_STATUS

control, hold, code, ttl = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
trigger = sys.argv[5] if len(sys.argv) > 5 else "processing-time:1s"
try:
    lease = Lease.acquire(control, "cloudtrail_etl", ttl, details={"trigger": trigger})
except LeaseHeld as held:
    print(f"error: {held}", file=sys.stderr, flush=True)
    sys.exit(LEASE_HELD_EXIT_STATUS)
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
