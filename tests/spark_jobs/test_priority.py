"""A backfill driver's lower CPU priority reaches every thread of its JVM, and the threads started later."""

from __future__ import annotations

import os
import subprocess
import sys

from spark_jobs.priority import lower_priority, renice_threads, thread_nice

THREADED = """
import sys, threading, time
for _ in range(2):
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()  # started after the renice
print("spawned", flush=True)
time.sleep(600)
"""


def test_every_thread_of_a_running_process_and_its_later_threads_run_at_the_lower_priority():
    child = subprocess.Popen([sys.executable, "-c", THREADED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        threads = sorted(int(t) for t in os.listdir(f"/proc/{child.pid}/task"))
        assert len(threads) == 3 and {thread_nice(t) for t in threads} == {os.getpriority(os.PRIO_PROCESS, 0)}
        assert renice_threads(child.pid, 7) == 3
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "spawned"
        now = sorted(int(t) for t in os.listdir(f"/proc/{child.pid}/task"))
        assert len(now) == 4 and {thread_nice(t) for t in now} == {7}
        assert renice_threads(child.pid, 3) == 0  # never lowered back
    finally:
        child.kill()
        child.wait()


def test_lower_priority_renices_this_process_and_outside_spark_submit_no_parent():
    code = ("import json, os; from spark_jobs.priority import lower_priority; "
            "print(json.dumps(lower_priority(9)), os.getpriority(os.PRIO_PROCESS, 0))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report, nice = done.stdout.rsplit(" ", 1)
    assert int(nice) == 9
    assert '"jvm_pid": null' in report and '"jvm_threads": 0' in report
    assert lower_priority(0)["jvm_threads"] == 0  # 0: nothing to do (the live job's priority)
