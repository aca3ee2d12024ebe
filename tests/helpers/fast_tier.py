"""The fast tier's guard: its tests import no pyspark and start no JVM, spark-submit or Airflow.

The fast tier (``make test-fast``; the folders of tests/helpers/tiers.py) promises the
declarations and the control plane checked in under a minute. A test added to it that quietly starts a
JVM or an Airflow would break that promise without anyone noticing, so under ``pytest --fast`` it fails,
naming what it started:

- in the test process, an import hook refuses ``pyspark`` and ``py4j`` (the refusal is also recorded,
  so a test that catches the ImportError fails all the same);
- in child processes, stand-ins for ``java``, ``spark-submit``, ``spark-class``, ``pyspark`` and
  ``airflow`` come first on ``PATH``, and ``JAVA_HOME`` points at them (Spark's launch scripts run
  ``$JAVA_HOME/bin/java``): each records its command line and exits 97 without starting anything.

After each phase of each test (setup, call, teardown) whatever was recorded fails that test.
"""

from __future__ import annotations

import importlib.abc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

FORBIDDEN_MODULES = ("pyspark", "py4j")
STAND_INS = ("java", "spark-submit", "spark-class", "pyspark", "airflow")
EXIT_CODE = 97
STAND_IN = """#!/bin/sh
echo "$(basename "$0") $*" >> '{record}'
echo "the fast tier starts no $(basename "$0") (tests/helpers/fast_tier.py): move this test out of the fast folders (tests/helpers/tiers.py)" >&2
exit {code}
"""


class _RefuseImports(importlib.abc.MetaPathFinder):
    """A meta path finder that refuses the forbidden modules and records each attempt."""

    def __init__(self, guard: "FastTierGuard") -> None:
        self.guard = guard

    def find_spec(self, name, path=None, target=None):
        if name.split(".", 1)[0] in FORBIDDEN_MODULES:
            self.guard.record(f"import {name}")
            raise ImportError(f"the fast tier imports no {name} (tests/helpers/fast_tier.py): move this test out of "
                              f"the fast folders (tests/helpers/tiers.py)")
        return None


class FastTierGuard:
    """Installed by :func:`install_guard`; a pytest plugin that fails a test whatever it recorded.

    :param root: a scratch folder for the stand-ins and the record (removed at the end of the run).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.record_file = root / "record"
        self.record_file.touch()
        self._in_process: list[str] = []

    def record(self, what: str) -> None:
        self._in_process.append(what)

    def install(self) -> None:
        loaded = sorted(name for name in sys.modules if name.split(".", 1)[0] in FORBIDDEN_MODULES)
        if loaded:
            raise pytest.UsageError(f"the fast tier's guard came too late: {', '.join(loaded)} already imported")
        bin_dir = self.root / "bin"
        bin_dir.mkdir()
        for name in STAND_INS:
            stand_in = bin_dir / name
            stand_in.write_text(STAND_IN.format(record=self.record_file, code=EXIT_CODE))
            stand_in.chmod(0o755)
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        os.environ["JAVA_HOME"] = str(self.root)
        sys.meta_path.insert(0, _RefuseImports(self))

    def take(self) -> list[str]:
        """What was recorded since the last call (and forget it)."""
        found, self._in_process = self._in_process, []
        text = self.record_file.read_text()
        if text:
            self.record_file.write_text("")
            found += [f"started: {line}" for line in text.splitlines()]
        return found

    def _check(self, item, phase: str):
        self.take()  # anything from before this phase is already reported
        try:
            return (yield)
        finally:
            found = self.take()
            if found:
                pytest.fail(f"{item.nodeid} is in the fast tier but did, in its {phase}: "
                            f"{'; '.join(found)[:2000]} (a JVM, pyspark or Airflow belongs in the full suite: "
                            f"move it out of the fast folders of tests/helpers/tiers.py)", pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        return (yield from self._check(item, "setup"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        return (yield from self._check(item, "call"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        return (yield from self._check(item, "teardown"))

    def pytest_unconfigure(self, config):
        shutil.rmtree(self.root, ignore_errors=True)


def install_guard(config: pytest.Config) -> FastTierGuard:
    """Guard this run (``pytest --fast``): called from ``pytest_configure``, before any test module is imported."""
    scratch = Path(os.environ.get("SPARK_LOCAL_DIRS") or tempfile.gettempdir()).parent
    scratch.mkdir(parents=True, exist_ok=True)
    guard = FastTierGuard(Path(tempfile.mkdtemp(prefix="fast-tier-", dir=scratch)))
    guard.install()
    config.pluginmanager.register(guard, "fast-tier-guard")
    return guard
