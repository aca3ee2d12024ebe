"""Where the suite's CPU goes, per test and per module: ``pytest --cpu-report FILE`` (``make test
PYTEST_ARGS='--cpu-report .spark/cpu.jsonl'``), then ``python -m tests.cpu_report FILE``.

The suite is CPU-bound on 2 cores (docs/benchmarks.md, "How long the tests take"), so a module's wall time
says little about what it costs: it waits while the other worker's drivers run. What it costs is the CPU of
the processes it starts. For each test (setup, call and teardown) this records, as one JSON line appended to
FILE (both xdist workers append to the same file):

- ``self_s``: the pytest worker's own CPU;
- ``children_s``: the CPU of the child processes the worker waited for during the test, with their own
  waited-for descendants (``os.times()``: a ``python -m spark_jobs`` driver and its JVM, ``airflow dags
  test`` and its spark-submits, a module's Airflow when the module's teardown stops it);
- ``session_jvm_s``: the CPU of the worker's own SparkSession JVM (pyspark's gateway) during the test.

What it cannot see: processes the worker never waits for (a JVM whose Python driver was killed with
kill -9 is reaped by init). What it places late: a child is counted when it is reaped, so session-wide
servers (the S3 server, the Kafka broker) land on the test whose teardown stops them, and a module's
Airflow (``tools.local_airflow`` keeps pid files, not the ``Popen``; Python reaps such children when the
next subprocess starts) on a test that runs after it. Per module it is a floor; the run's total holds. Neither pytest nor xdist measures CPU, hence this module; it reads only
``/proc`` and ``os.times()``, and costs nothing unless ``--cpu-report`` is given.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _session_jvm_seconds() -> float:
    """CPU seconds of this process's SparkSession JVM so far (0 before pyspark started one)."""
    if "pyspark" not in sys.modules:  # never import pyspark here (the fast tier refuses it)
        return 0.0
    gateway = getattr(sys.modules["pyspark"].SparkContext, "_gateway", None)
    process = getattr(gateway, "proc", None)
    if process is None:
        return 0.0
    try:
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _now() -> tuple[float, float, float, float]:
    times = os.times()
    return time.monotonic(), times.user + times.system, times.children_user + times.children_system, \
        _session_jvm_seconds()


class CpuReport:
    """The plugin: one JSON line per test appended to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        before = _now()
        yield
        after = _now()
        wall, own, children, jvm = (b - a for a, b in zip(before, after))
        line = json.dumps({"test": item.nodeid, "worker": self.worker, "wall_s": round(wall, 2),
                           "self_s": round(own, 2), "children_s": round(children, 2),
                           "session_jvm_s": round(jvm, 2)})
        with self.path.open("a") as handle:  # one short line per write: the workers' lines do not interleave
            handle.write(line + "\n")


def add_option(parser) -> None:
    """The ``--cpu-report FILE`` option."""
    parser.addoption("--cpu-report", metavar="FILE",
                     help="append each test's CPU-seconds to FILE as JSON lines (tests/cpu_report.py; "
                          "summary: python -m tests.cpu_report FILE)")


def install(config) -> None:
    """Register the plugin when ``--cpu-report FILE`` was given."""
    path = config.getoption("--cpu-report")
    if path:
        config.pluginmanager.register(CpuReport(Path(path).resolve()), "cpu-report")


# The same as a plugin of its own (``pytest -p tests.cpu_report``), for a run without this suite's conftest.
pytest_addoption = add_option
pytest_configure = install


def summarize(path: Path, top: int = 40) -> str:
    """Per module: CPU seconds (all three parts), wall seconds and tests, the most expensive first."""
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0, 0])
    for line in path.read_text().splitlines():
        row = json.loads(line)
        totals = modules[row["test"].split("::")[0]]
        for index, key in enumerate(("self_s", "children_s", "session_jvm_s", "wall_s")):
            totals[index + 1] += row[key]
        totals[0] += row["self_s"] + row["children_s"] + row["session_jvm_s"]
        totals[5] += 1
    ranked = sorted(modules.items(), key=lambda item: -item[1][0])
    lines = [f"{'cpu_s':>7} {'self':>6} {'children':>8} {'jvm':>6} {'wall_s':>7} {'tests':>5}  module"]
    for module, (cpu, own, children, jvm, wall, tests) in ranked[:top]:
        lines.append(f"{cpu:7.0f} {own:6.0f} {children:8.0f} {jvm:6.0f} {wall:7.0f} {tests:5d}  {module}")
    total = [sum(values[i] for values in modules.values()) for i in range(6)]
    lines.append(f"{total[0]:7.0f} {total[1]:6.0f} {total[2]:8.0f} {total[3]:6.0f} {total[4]:7.0f} "
                 f"{int(total[5]):5d}  (all {len(modules)} modules)")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        sys.exit("usage: python -m tests.cpu_report FILE (the file pytest --cpu-report FILE wrote)")
    print(summarize(Path(sys.argv[1])))
