"""The product's layers hold: import-linter's contracts in ``.importlinter``, and no import cycle.

The layers, lowest first: ``spark_jobs.model``, ``spark_jobs.registry`` (declarations: no pyspark, no Airflow),
``spark_jobs.launch`` (no pyspark), then ``spark_jobs.control`` (no pyspark) beside ``spark_jobs.transforms`` (neither
imports the other), ``spark_jobs.driver``, ``spark_jobs.jobs``, ``spark_jobs.cli``; ``tools`` is never imported by ``spark_jobs``, and the Airflow plugins import
neither pyspark nor the driver. Imports inside functions count: import-linter reads every import statement.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.project import PROJECT_ROOT


def _env() -> dict[str, str]:
    paths = [str(PROJECT_ROOT), str(PROJECT_ROOT / "plugins")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def test_every_layer_contract_is_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-logo", "--no-cache"], cwd=PROJECT_ROOT, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"an import breaks a layer contract (.importlinter):\n{done.stdout}{done.stderr}"


def _cycles(graph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm over the import graph)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.find_modules_directly_imported_by(node) & modules:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_in_the_product_or_the_tools():
    import grimp

    sys.setrecursionlimit(10_000)
    if str(PROJECT_ROOT / "plugins") not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT / "plugins"))
    graph = grimp.build_graph("spark_jobs", "tools", "streaming", cache_dir=None)
    modules = {m for m in graph.modules if m.split(".")[0] in ("spark_jobs", "tools", "streaming")}
    cycles = _cycles(graph, modules)
    details = []
    for cycle in cycles:
        members = set(cycle)
        details.append(" <-> ".join(cycle) + ": " + "; ".join(
            f"{a} imports {b} (line {d['line_number']})" for a in cycle
            for b in sorted(graph.find_modules_directly_imported_by(a) & members)
            for d in graph.get_import_details(importer=a, imported=b)[:1]))
    assert cycles == [], "import cycles:\n" + "\n".join(details)
