"""A stand-in for spark-submit's process tree (no Spark): ``submit_like.py LINGER COMMAND...``.

Under spark-submit the supervisor's child is the JVM, and the Python driver, the process that holds the lease and
the pid ``status`` shows, is the JVM's child in the same process group. This parent plays the JVM: it starts
COMMAND as its child and waits; when the child ends (killed by a person, say) it lingers LINGER seconds, as a JVM
runs its shutdown hooks, then exits with the child's status (128 + signal for a killed one). SIGTERM it passes to the
child, as a JVM's shutdown ends its Python driver. Killed itself (the OOM killer's choice), it leaves its child to the
supervisor, which kills the group.
"""

import signal
import subprocess
import sys
import time

linger, command = float(sys.argv[1]), sys.argv[2:]
child = subprocess.Popen(command)
signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
print(f"parent pid of the driver {child.pid}", flush=True)
code = child.wait()
time.sleep(linger)
sys.exit(128 - code if code < 0 else code)
