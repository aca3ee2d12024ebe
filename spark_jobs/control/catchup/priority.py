"""Lower the CPU priority of a backfill's driver, so the live job keeps the cores it needs.

Priorities (the registry's :attr:`~spark_jobs.model.jobs.JobSpec.backfill_priority`, ``backfill --priority``):

- ``idle``: Linux's ``SCHED_IDLE`` policy (``chrt --idle 0``): the driver gets only the CPU time that
  normal processes leave (a weight of 3 against 1024 for nice 0 and 15 for nice 19). It works whatever
  nice value the machine runs everything at: a sandbox or container that starts every process at nice
  19 leaves no lower nice to go to (measured on these machines), but ``SCHED_IDLE`` is still lower.
  On a machine kept busy by other work the backfill then crawls: use ``nice:N`` there.
- ``nice:N`` (1-19): CPU nice ``N`` (never lowered: a process already at a higher nice keeps it).
- ``normal``: the live job's priority.

Spark has no setting for this (``local[N]`` caps the cores a local driver uses, not its priority), and
the Spark provider's ``SparkSubmitOperator`` only runs a binary named ``spark-submit``, so ``nice
spark-submit`` / ``chrt spark-submit`` are not an option there. So the Python driver lowers the
priority itself, before its SparkSession starts: its own (a JVM it launches inherits it), and, under
``spark-submit``, that of every thread of the JVM, which is its *parent* and already runs. On Linux
both nice and the scheduling policy belong to each thread, and a new thread inherits them from the
thread that creates it; the executor and task threads of a local Spark, and the Python workers the
JVM forks, are all created after this by threads that were changed, so the whole driver runs at the
lower priority. Raising one's own nice or choosing ``SCHED_IDLE`` needs no privilege. No pyspark.
"""

from __future__ import annotations

import logging
import os
import re

import psutil

from spark_jobs.model.errors import UsageError

log = logging.getLogger("spark_jobs")
PRIORITIES = "idle, normal or nice:N (N from 1 to 19)"


def parse_priority(text: str) -> tuple[int, bool]:
    """``(nice, idle)`` of a priority: ``idle`` -> ``(0, True)``, ``nice:10`` -> ``(10, False)``, ``normal`` -> ``(0, False)``.

    :raises UsageError: naming the value and the valid ones.
    """
    value = str(text).strip().lower()
    if value in ("idle", "normal"):
        return 0, value == "idle"
    match = re.fullmatch(r"nice:(\d{1,2})", value)
    if match and 1 <= int(match.group(1)) <= 19:
        return int(match.group(1)), False
    raise UsageError(f"backfill priority {text!r} is not one of: {PRIORITIES}")


def _threads(pid: int) -> list[int]:
    try:
        return sorted(thread.id for thread in psutil.Process(pid).threads())
    except psutil.Error:
        return []


def _is_spark_submit_jvm(pid: int) -> bool:
    try:
        command = psutil.Process(pid).cmdline()
    except psutil.Error:
        return False
    return command[:1] != [] and command[0].endswith("java") and "org.apache.spark.deploy.SparkSubmit" in command


def thread_nice(tid: int) -> int | None:
    """The nice value of one thread (Linux keeps it per thread), or ``None`` when it is gone."""
    try:
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:
        return None


def is_lowered(tid: int, nice: int, idle: bool) -> bool:
    """Whether a thread runs at (or below) the priority ``(nice, idle)``."""
    try:
        if idle and os.sched_getscheduler(tid) != os.SCHED_IDLE:
            return False
    except OSError:
        return False
    return not nice or (thread_nice(tid) or 0) >= nice  # SCHED_IDLE alone: the nice value does not matter


def lower_threads(pid: int, nice: int, idle: bool) -> int:
    """Put every thread of process ``pid`` at the priority ``(nice, idle)`` (threads it starts later inherit
    it); returns how many of its threads are at it afterwards."""
    lowered = 0
    for tid in _threads(pid):
        try:
            if nice and (thread_nice(tid) or 0) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            if idle:
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            lowered += is_lowered(tid, nice, idle)
        except OSError:  # the thread ended meanwhile
            continue
    return lowered


def lower_priority(priority: str, parent_jvm: bool = True) -> dict:
    """Run this process, and under spark-submit every thread of the parent JVM, at ``priority``.

    :param priority: ``idle``, ``nice:N`` or ``normal`` (nothing changes).
    :param parent_jvm: also lower the parent process's threads when it is spark-submit's JVM.
    :returns: what was done, for the log: ``priority``, ``pid``, ``jvm_pid`` and ``jvm_threads`` (the JVM's
        threads at the lower priority afterwards).
    """
    nice, idle = parse_priority(priority)
    done = {"priority": priority, "pid": os.getpid(), "jvm_pid": None, "jvm_threads": 0}
    if not nice and not idle:
        return done
    lower_threads(os.getpid(), nice, idle)
    parent = os.getppid()
    if parent_jvm and _is_spark_submit_jvm(parent):
        done["jvm_pid"] = parent
        done["jvm_threads"] = lower_threads(parent, nice, idle)
    log.info("running at priority %s (the live job keeps priority): %s", priority, done)
    return done
