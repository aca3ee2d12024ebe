"""Lower the CPU priority of a backfill's driver, so the live job keeps the cores it needs.

Spark has no setting for this (``local[N]`` caps the cores a local driver uses, not its priority
against other processes), and the Spark provider's ``SparkSubmitOperator`` only runs a binary named
``spark-submit``, so ``nice spark-submit ...`` is not an option there. So the Python driver lowers
the priority itself, before its SparkSession starts:

- its own process (a JVM it launches, ``python -m spark_jobs backfill``, inherits it);
- under ``spark-submit``, the JVM is the driver's *parent* and already runs: every thread of it is
  reniced. On Linux ``nice`` is a property of each thread, and a new thread inherits it from the
  thread that creates it; the executor and task threads of a local Spark, and the Python workers the
  JVM forks, are all created after this, by threads that were reniced, so the whole driver runs at
  the lower priority.

Raising one's own nice value needs no privilege; lowering it back does, so this is one-way. No pyspark
here (the CLI calls it before Spark starts).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("spark_jobs")


def _threads(pid: int) -> list[int]:
    try:
        return sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if tid.isdigit())
    except OSError:
        return []


def _is_spark_submit_jvm(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(part.endswith(b"java") for part in command[:1]) and b"org.apache.spark.deploy.SparkSubmit" in command


def thread_nice(tid: int) -> int | None:
    """The nice value of one thread (``/proc/<tid>/stat``), or ``None`` when it is gone."""
    try:
        text = Path(f"/proc/{tid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2:].split()[16])


def renice_threads(pid: int, nice: int) -> int:
    """Raise the nice value of every thread of process ``pid`` to ``nice`` (threads it starts later inherit
    it from the thread that starts them); returns how many were changed."""
    changed = 0
    for tid in _threads(pid):
        try:
            if (thread_nice(tid) or 0) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                changed += 1
        except OSError:  # the thread ended meanwhile
            continue
    return changed


def lower_priority(nice: int, parent_jvm: bool = True) -> dict:
    """Raise this process's nice value to ``nice`` (never lower it), and under spark-submit every thread
    of the parent JVM's too.

    :param nice: the nice value to reach (0-19); 0 or less changes nothing.
    :param parent_jvm: also renice the parent process's threads when it is spark-submit's JVM.
    :returns: what was done: ``nice``, ``pid``, ``jvm_pid`` and ``jvm_threads`` reniced (for the log).
    """
    done = {"nice": nice, "pid": os.getpid(), "jvm_pid": None, "jvm_threads": 0}
    if nice <= 0:
        return done
    nice = min(nice, 19)
    if os.getpriority(os.PRIO_PROCESS, 0) < nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    parent = os.getppid()
    if parent_jvm and _is_spark_submit_jvm(parent):
        done["jvm_pid"] = parent
        done["jvm_threads"] = renice_threads(parent, nice)
    log.info("running at nice %d (the live job keeps priority): %s", nice, done)
    return done
