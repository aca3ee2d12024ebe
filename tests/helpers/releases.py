"""Releases of real code changes for the deploy tests: the project's ``spark_jobs`` package copied, a few exact text
replacements made in it (each must match once), kept as a release (:mod:`spark_jobs.launch.releases`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from spark_jobs.launch.releases import Release, add_release
from tests.helpers.project import PROJECT_ROOT


def release_with(root: Path, name: str, changes: dict[str, list[tuple[str, str]]]) -> Release:
    """Release ``name`` in ``root``: this checkout's package with ``changes`` ({module path under spark_jobs/:
    [(old text, new text), ...]}) made; a replacement whose old text is not in the module exactly once fails."""
    work = root / f".work-{name}" / "spark_jobs"
    shutil.copytree(PROJECT_ROOT / "spark_jobs", work, ignore=shutil.ignore_patterns("__pycache__"))
    for module, replacements in changes.items():
        path = work / module
        text = path.read_text()
        for old, new in replacements:
            assert text.count(old) == 1, f"{module}: {old!r} is there {text.count(old)} times"
            text = text.replace(old, new)
        path.write_text(text)
    try:
        return add_release(name, package_dir=work, root=root, by="test")
    finally:
        shutil.rmtree(work.parent)
