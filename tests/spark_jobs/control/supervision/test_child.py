"""A driver's process group as :mod:`spark_jobs.control.supervision.child` sees it: its live processes, not its
zombies nor anyone else's, until a kill leaves none."""

from __future__ import annotations

import os
import sys
import time

from spark_jobs.control.supervision.child import ChildProcess, group_members

# A driver that starts a long-lived process and a short one it never reaps (a zombie), then says their pids.
DRIVER = """
import os, subprocess, sys, time
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
quick = subprocess.Popen([sys.executable, "-c", "pass"])
os.waitid(os.P_PID, quick.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped: a zombie of this group
open(sys.argv[1], "w").write(f"{sleeper.pid} {quick.pid}")
time.sleep(120)
"""


def test_the_group_is_its_live_processes_until_a_kill_leaves_none(tmp_path):
    pids = tmp_path / "pids"
    child = ChildProcess([sys.executable, "-c", DRIVER, str(pids)], tmp_path / "driver.log")
    driver = child.start()
    try:
        deadline = time.monotonic() + 30
        while not pids.exists() or not pids.read_text():
            assert time.monotonic() < deadline, child.log_tail()
            time.sleep(0.05)
        sleeper, zombie = map(int, pids.read_text().split())

        assert child.members() == group_members(driver) == sorted([driver, sleeper])
        assert [child.owns(pid) for pid in (driver, sleeper, zombie, os.getpid(), None)] == [
            True, True, False, False, False]
    finally:
        child.kill()
    assert child.members() == group_members(driver) == []
    assert not child.owns(sleeper)
