"""A backfill driver's lower CPU priority reaches every thread of its JVM, and the threads started later."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.control.catchup.priority import is_lowered, lower_threads, parse_priority, thread_nice

THREADED = """
import sys, threading, time
for _ in range(2):
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()  # started after the change
print("spawned", flush=True)
time.sleep(600)
"""


def threads(pid: int) -> list[int]:
    return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))


@pytest.mark.parametrize("priority", ["idle", "nice:19"])
def test_every_thread_of_a_running_process_and_its_later_threads_run_at_the_lower_priority(priority):
    nice, idle = parse_priority(priority)
    child = subprocess.Popen([sys.executable, "-c", THREADED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        assert len(threads(child.pid)) == 3
        if idle:
            assert not any(is_lowered(t, nice, idle) for t in threads(child.pid))
        assert lower_threads(child.pid, nice, idle) == 3
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "spawned"
        assert len(threads(child.pid)) == 4 and all(is_lowered(t, nice, idle) for t in threads(child.pid))
        if idle:
            assert {os.sched_getscheduler(t) for t in threads(child.pid)} == {os.SCHED_IDLE}
        else:
            assert {thread_nice(t) for t in threads(child.pid)} == {19}
    finally:
        child.kill()
        child.wait()


def test_outside_spark_submit_only_the_process_itself_is_lowered():
    code = ("import json, os; from spark_jobs.control.catchup.priority import lower_priority; "
            "print(json.dumps(lower_priority('idle')), os.sched_getscheduler(0) == os.SCHED_IDLE)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report, idle = done.stdout.rsplit(" ", 1)
    assert idle.strip() == "True"
    assert json.loads(report)["jvm_pid"] is None and json.loads(report)["jvm_threads"] == 0


@pytest.mark.parametrize("text, expected", [("idle", (0, True)), ("normal", (0, False)), ("nice:10", (10, False)),
                                            (" NICE:1 ", (1, False))])
def test_priorities_parse(text, expected):
    assert parse_priority(text) == expected


@pytest.mark.parametrize("text", ["nice:0", "nice:20", "nice", "low", "nice:-5", "idle; rm -rf /"])
def test_a_bad_priority_is_refused_naming_it(text):
    with pytest.raises(UsageError, match=f"backfill priority {text!r} is not one of: idle, normal or nice:N"):
        parse_priority(text)
