"""Where the suite's CPU goes, per test and per module: ``pytest --cpu-report FILE`` (``make test
PYTEST_ARGS='--cpu-report .spark/cpu.jsonl'``), then ``python -m tests.helpers.cpu_report FILE``.

The suite is CPU-bound on 2 cores (docs/benchmarks.md, "How long the tests take"), so a module's wall time
says little about what it costs: it waits while the other worker's drivers run. What it costs is the CPU of
the processes it starts, and most of those are never waited for by the test (a ``python -m spark_jobs``
driver's JVM is reaped by init; a module's Airflow and the drivers its tasks start live in their own
sessions), so ``os.times()``'s children are no measure. Instead each pytest worker reads ``/proc`` twice a
second and charges every process to the test named by ``PYTEST_CURRENT_TEST`` in the environment the
process was started with (pytest sets it in ``os.environ`` during each test's setup, call and teardown, and
every descendant inherits it: the drivers of a module's Airflow are charged to the test whose fixture
started that Airflow), if the process also carries this worker's ``PYTEST_CPU_REPORT_SESSION`` (the
other worker's processes, or another pytest's on the machine, do not). Lines appended to FILE (both xdist workers append to it):

- per test: ``self_s`` (the worker's own CPU), ``session_jvm_s`` (its SparkSession JVM's, pyspark's gateway,
  which lives across tests), ``wall_s``;
- per test, at the session's end: ``processes_s`` and ``processes``, the CPU and count of the processes
  charged to it (the worker's own SparkSession JVM excepted).

What a process uses after the last look before it ends (up to half a second) is not seen, and one that
lives less than that may be missed (spark-submit's launcher JVM, a ``ps``). The looks cost ~1% of a core; nothing at all without ``--cpu-report``. Neither pytest nor xdist
measures CPU, hence this module.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LOOK_SECONDS = 0.5


def session_jvm_pid() -> int | None:
    """The pid of this process's SparkSession JVM, or None before pyspark started one."""
    # Never import pyspark here (the fast tier refuses it); this thread may look while the test's thread is still
    # importing it (a partly initialised module, without SparkContext yet).
    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    gateway = getattr(context, "_gateway", None)
    process = getattr(gateway, "proc", None)
    return getattr(process, "pid", None)


def _stat(pid: int | str) -> tuple[int, float] | None:
    """(start time in ticks, CPU seconds so far) of a process, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


# Set in each reporting pytest process's environment, so its descendants say whose they are (the other
# xdist worker's, or another pytest's on the same machine, carry another value or none).
SESSION_ENV = "PYTEST_CPU_REPORT_SESSION"


def _test_environment(pid: str) -> tuple[str | None, str | None]:
    """(reporting session, test node id) from the environment ``pid`` was started with."""
    try:
        entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None, None
    found = dict(e.decode(errors="replace").split("=", 1) for e in entries
                 if e.startswith((b"PYTEST_CURRENT_TEST=", SESSION_ENV.encode() + b"=")))
    test = found.get("PYTEST_CURRENT_TEST")
    return found.get(SESSION_ENV), test.rsplit(" ", 1)[0] if test else None


class CpuReport:
    """The plugin: per-test lines as each test ends, per-process charges at the session's end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.session = os.environ[SESSION_ENV] = str(os.getpid())
        self.processes: dict[int, list] = {}  # pid -> [start ticks, CPU seconds, test or None]
        self.charged: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        self.stopping = threading.Event()
        self.looker = threading.Thread(target=self._look_on, name="cpu-report", daemon=True)

    def _write(self, rows: list[dict]) -> None:
        with self.path.open("a") as handle:  # short lines in one write each: the workers' lines do not interleave
            for row in rows:
                handle.write(json.dumps(row) + "\n")

    def _look_on(self) -> None:
        while not self.stopping.wait(LOOK_SECONDS):
            self.look()

    def look(self) -> None:
        """Read every process's CPU; charge a new one to the test in its environment (if this session's)."""
        skip = {os.getpid(), session_jvm_pid()}
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in skip:
                continue
            pid, stat = int(name), _stat(name)
            if stat is None:
                continue
            known = self.processes.get(pid)
            if known and known[0] == stat[0]:
                known[1] = stat[1]
                continue
            if known:  # the pid was reused: the earlier process ended
                self._settle(known)
            session, test = _test_environment(name)
            self.processes[pid] = [stat[0], stat[1], test if session == self.session else None]

    def _settle(self, process: list) -> None:
        if process[2]:
            self.charged[process[2]][0] += process[1]
            self.charged[process[2]][1] += 1

    def pytest_sessionstart(self, session) -> None:
        self.looker.start()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        start, times, jvm = time.monotonic(), os.times(), self._jvm_seconds()
        yield
        after = os.times()
        self._write([{"test": item.nodeid, "worker": self.worker, "wall_s": round(time.monotonic() - start, 2),
                      "self_s": round(after.user + after.system - times.user - times.system, 2),
                      "session_jvm_s": round(self._jvm_seconds() - jvm, 2)}])

    @staticmethod
    def _jvm_seconds() -> float:
        pid = session_jvm_pid()
        stat = _stat(pid) if pid else None
        return stat[1] if stat else 0.0

    def pytest_sessionfinish(self, session) -> None:
        self.stopping.set()
        self.looker.join(5)
        self.look()
        for process in self.processes.values():
            self._settle(process)
        self._write([{"test": test, "worker": self.worker, "processes_s": round(cpu, 2), "processes": count}
                     for test, (cpu, count) in self.charged.items()])


def add_option(parser) -> None:
    """The ``--cpu-report FILE`` option."""
    parser.addoption("--cpu-report", metavar="FILE",
                     help="append each test's CPU-seconds to FILE as JSON lines (tests/helpers/cpu_report.py; "
                          "summary: python -m tests.helpers.cpu_report FILE)")


def install(config) -> None:
    """Register the plugin when ``--cpu-report FILE`` was given (in each xdist worker, not in the controller)."""
    path = config.getoption("--cpu-report")
    xdist_controller = getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")
    if path and not xdist_controller:
        config.pluginmanager.register(CpuReport(Path(path).resolve()), "cpu-report")


# The same as a plugin of its own (``pytest -p tests.helpers.cpu_report``), for a run without this suite's conftest.
pytest_addoption = add_option
pytest_configure = install

PARTS = ("self_s", "session_jvm_s", "processes_s")


def summarize(path: Path, top: int = 40) -> str:
    """Per module: CPU seconds (the worker, its SparkSession JVM, the processes charged to it), wall seconds,
    tests and processes, the most expensive first."""
    modules: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    tests: dict[str, set[str]] = defaultdict(set)
    for line in path.read_text().splitlines():
        row = json.loads(line)
        module = row["test"].split("::")[0]
        for key in (*PARTS, "wall_s", "processes"):
            modules[module][key] += row.get(key, 0)
        tests[module].add(row["test"])
    cost = {module: sum(parts[p] for p in PARTS) for module, parts in modules.items()}
    lines = [f"{'cpu_s':>7} {'self':>6} {'jvm':>6} {'procs':>6} {'wall_s':>7} {'tests':>5} {'n':>4}  module"]

    def line(total: float, parts: dict, n_tests: int, name: str) -> str:
        return (f"{total:7.0f} {parts['self_s']:6.0f} {parts['session_jvm_s']:6.0f} {parts['processes_s']:6.0f} "
                f"{parts['wall_s']:7.0f} {n_tests:5d} {int(parts['processes']):4d}  {name}")

    for module in sorted(cost, key=lambda m: -cost[m])[:top]:
        lines.append(line(cost[module], modules[module], len(tests[module]), module))
    everything = defaultdict(float)
    for parts in modules.values():
        for key, value in parts.items():
            everything[key] += value
    lines.append(line(sum(cost.values()), everything, sum(map(len, tests.values())), f"(all {len(modules)} modules)"))
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        sys.exit("usage: python -m tests.helpers.cpu_report FILE (the file pytest --cpu-report FILE wrote)")
    print(summarize(Path(sys.argv[1])))
