"""The suite's tiers, by where a test lives: tests/ mirrors the tree, and the folders that mirror the parts which
start no JVM and no Airflow are the fast tier (``pytest -m fast``; ``make test-fast`` runs it guarded by
tests/helpers/fast_tier.py). tests/conftest.py marks each test from its path with :func:`in_fast_tier`.

A test of a JVM-free part that needs Spark or a running Airflow lives with the layer that brings them (the driver's,
the CLI's, the jobs', the DAGs' folders). tests/test_tiers.py fails a module outside the fast tier that shows no sign
of needing a JVM or an Airflow (:func:`needs_of`): move it into a fast folder, or, when it must stay out (it waits
out real time), say why in its module constant ``NOT_IN_THE_FAST_TIER``.
"""

from __future__ import annotations

import ast
from pathlib import Path

# Folders under tests/ whose every module is in the fast tier (with their subfolders); the modules directly in
# tests/ (the checks of the project itself: layers, links, helpers, tiers) are fast too.
FAST_FOLDERS = (
    "docker",                   # docker-compose.yml, Dockerfile, the image's entrypoint
    "plugins/hooks",            # the Airflow side's pure parts: the REST client, notifiers, operators
    "plugins/notifiers",        # (spark-submit a stand-in), triggers
    "plugins/operators",
    "plugins/triggers",
    "spark_jobs/control",       # the control plane (no pyspark: .importlinter)
    "spark_jobs/launch",        # spark-submit's command line, the code zip (building the class archive starts a JVM)
    "spark_jobs/model",         # the declarations
    "spark_jobs/registry",
    "spark_jobs/transforms",    # the transforms' pure-Python parts (the Spark ones are tested with their jobs)
    "tools",                    # tooling that starts no JVM (sample data, the standalone connection)
)
# Fixtures that start a JVM (a SparkSession, a Kafka broker) or parse the DAG folder / migrate Airflow's DB.
HEAVY_FIXTURES = frozenset({"spark", "run_job", "tables", "kafka_broker", "run_kafka_job", "s3_spark", "run_job_s3",
                            "dagbag", "migrated_db"})
# Imports that bring pyspark or start a JVM or an Airflow.
HEAVY_IMPORTS = ("pyspark", "delta", "py4j", "spark_jobs.driver", "spark_jobs.jobs", "spark_jobs.cli",
                 "tools.local_airflow", "tools.standalone", "tools.kafka_broker",
                 "tests.helpers.spark_fixtures", "tests.helpers.kafka_fixtures", "tests.helpers.analytics",
                 "tests.helpers.cowrie", "tests.helpers.catchup_runs", "tests.helpers.table_rows", "tests.helpers.kills",
                 "tests.helpers.real_airflow")  # its HarnessAirflow starts make airflow's harness
# Commands that start a Spark driver or an Airflow: as a word of a command line, or run_cli's first argument.
HEAVY_WORDS = frozenset({"spark-submit", "java", "dags", "run", "supervise", "backfill", "sql", "lake", "reprocess",
                         "state"})
HEAVY_CALLS = frozenset({"driver_command"})


def in_fast_tier(relative: str) -> bool:
    """Whether the test module at ``relative`` (its path under tests/, as posix) is in the fast tier."""
    folder = relative.rpartition("/")[0]
    return folder == "" or any(folder == f or folder.startswith(f + "/") for f in FAST_FOLDERS)


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        return [node.module]
    return []


def needs_of(path: Path) -> set[str]:
    """What the test module at ``path`` shows that needs a JVM or an Airflow, read from its source: the fixtures it
    asks for, the modules it imports (inside functions too), the commands it runs. Empty: it looks JVM-free."""
    tree = ast.parse(path.read_text(), filename=str(path))
    needs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            needs |= {f"fixture {a.arg}" for a in node.args.args if a.arg in HEAVY_FIXTURES}
        needs |= {f"import {m}" for m in _imported(node)
                  if any(m == h or m.startswith(h + ".") for h in HEAVY_IMPORTS)}
        if isinstance(node, (ast.List, ast.Tuple)):
            words = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            needs |= {f"runs {w}" for w in words & HEAVY_WORDS}
        if isinstance(node, ast.Constant) and node.value in ("spark-submit", "java"):
            needs.add(f"runs {node.value}")
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in HEAVY_CALLS:
                needs.add(f"calls {name}")
            first = node.args[0] if node.args else None
            if name == "run_cli" and isinstance(first, ast.Constant) and first.value in HEAVY_WORDS:
                needs.add(f"runs spark_jobs {first.value}")
    return needs


def declared_not_fast(path: Path) -> str | None:
    """The module's ``NOT_IN_THE_FAST_TIER`` (why it stays out of the fast tier), or None."""
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NOT_IN_THE_FAST_TIER" for t in node.targets)
                and isinstance(node.value, ast.Constant)):
            return node.value.value
    return None
