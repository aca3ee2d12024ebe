"""How a driver JVM compiles: C1 only for the project's short-lived drivers, the JVM's default for long-running ones.

Most of the project's drivers live seconds to minutes: an available-now catch-up (one per landing when a job
catches up on data), a backfill, a reprocess, lake maintenance, an on-call action, a ``sql`` query. HotSpot's
tiered JIT spends much of such a life compiling with C2, its optimizing compiler, on the same cores that run the
batch, for code that would pay that back only over a long life. ``-XX:TieredStopAtLevel=1`` keeps the quick C1
compiler only: a short catch-up ends sooner, and a long one loses nothing, as the work of a catch-up is the Python
workers' parse and the I/O, not JIT-compiled Java (docs/benchmarks.md, "a short-lived driver compiles with C1").

``-XX:TieredStopAtLevel=1`` also shrinks HotSpot's code cache to its non-tiered default, 48 MB, which Spark and
Delta fill within a minute of batches: the JVM then spends its time flushing compiled code (its ``Sweeper thread``)
and compiling it again (with flushing off, it stops compiling: "CodeCache is full. Compiler has been disabled"). So the
options keep the tiered default's size, ``-XX:ReservedCodeCacheSize=240m`` (reserved address space; only the
code compiled takes memory; docs/benchmarks.md, "The code cache of a C1-only JVM", has the measurements).

A long-running driver (a continuous job's, a standby's) keeps the JVM's default, as its
JVM lives for days. Neither Spark nor the JDK chooses a JIT by a process's expected life, hence this module.
A user's ``spark.driver.extraJavaOptions`` come after these options on the JVM's command line, so
``-XX:TieredStopAtLevel=4`` there gives a short-lived driver the default JIT back.
"""

from __future__ import annotations

SHORT_LIVED_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


def java_options(long_running: bool = False) -> str:
    """The JIT's JVM options for a driver: C1 only unless ``long_running``."""
    return "" if long_running else SHORT_LIVED_OPTIONS
