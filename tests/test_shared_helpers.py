"""Test modules share code only through tests/helpers/: none imports from another test module or a conftest.py,
and none imports a private (``_``-prefixed) name, even from tests/helpers/.

A helper pulled out of another test module ties the two together: moving, renaming or deleting the one breaks the
other, and running the importer imports (and may start) the other's fixtures. A shared helper lives in
``tests/helpers/<what it is>.py`` under a public name.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.project import PROJECT_ROOT

TESTS = PROJECT_ROOT / "tests"
HELPERS = "tests.helpers"


def _is_helpers(module: str) -> bool:
    return module == HELPERS or module.startswith(HELPERS + ".")


def foreign_imports(tests: Path) -> list[str]:
    """Every import under ``tests`` of a test module, a conftest.py or a private name, as ``file:line: import``.

    :param tests: the tests folder (its package is ``tests``).
    """
    found = []
    for path in sorted(tests.rglob("*.py")):
        where = path.relative_to(tests.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = [alias.name for alias in node.names]
                if node.level:
                    found.append(f"{where}:{node.lineno}: from {'.' * node.level}{module} import {', '.join(names)} "
                                 "(a relative import of a test module)")
                elif module == "tests":
                    found += [f"{where}:{node.lineno}: from tests import {name}" for name in names if name != "helpers"]
                elif module.startswith("tests.") and not _is_helpers(module):
                    found.append(f"{where}:{node.lineno}: from {module} import {', '.join(names)}")
                elif _is_helpers(module):
                    found += [f"{where}:{node.lineno}: from {module} import {name} (a private name)"
                              for name in names if name.startswith("_")]
            elif isinstance(node, ast.Import):
                found += [f"{where}:{node.lineno}: import {alias.name}" for alias in node.names
                          if alias.name.startswith("tests.") and not _is_helpers(alias.name)]
    return found


def test_test_modules_share_code_only_through_tests_helpers():
    assert foreign_imports(TESTS) == [], "move what is shared to tests/helpers/ under a public name"


def test_the_scan_names_each_import_of_another_test_module_or_a_private_name(tmp_path):
    tests = tmp_path / "tests"
    (tests / "helpers").mkdir(parents=True)
    (tests / "helpers" / "kills.py").write_text("from tests.helpers.processes import batch_ids\n")
    (tests / "jobs").mkdir()
    (tests / "jobs" / "test_a.py").write_text(
        "import os\n"
        "from tests.helpers.kills import kill_mid_batch\n"
        "from tests.jobs.test_b import _start\n"
        "from tests.helpers.kills import _whole\n"
        "import tests.jobs.conftest\n"
        "from .test_b import run\n"
        "from tests import conftest\n")
    assert foreign_imports(tests) == [
        "tests/jobs/test_a.py:3: from tests.jobs.test_b import _start",
        "tests/jobs/test_a.py:4: from tests.helpers.kills import _whole (a private name)",
        "tests/jobs/test_a.py:5: import tests.jobs.conftest",
        "tests/jobs/test_a.py:6: from .test_b import run (a relative import of a test module)",
        "tests/jobs/test_a.py:7: from tests import conftest",
    ]
