"""The project's Python code as one zip for Spark's executors, named by its content (never stale).

Usage::

    python -m spark_jobs.launch.code_zip        # builds it if needed and prints its path

On a cluster the executors run on other machines (or containers) that do not have this project on
their Python path, yet they unpickle the job's functions (the decode UDF, the analytics' state
functions) by module name. Spark's own answer is a zip of the package in ``py_files``
(``--py-files``, ``SparkContext.addPyFile``): Spark serves it from the driver, every executor fetches
it and puts it on its Python workers' path. This module makes that zip:

- **from the code the driver runs**: :func:`spark_jobs.driver.session.build_session` calls :func:`build` at
  every driver start (every supervisor restart included) and ships the result with ``addPyFile``,
  so the executors always run exactly the driver's code; no build step can be forgotten, and a
  spark-submit of a job (:mod:`spark_jobs.launch.submit`) needs no ``--py-files``;
- **named by a hash of its content** (``spark_jobs-<sha256[:16]>.zip``): the same code gives the same
  name and the same bytes (sorted entries, fixed timestamps), so a zip is built once per code version,
  and a changed file gives a new name, never an overwritten file an executor might be reading;
- written atomically (a temp file renamed into place) into ``.spark/pyfiles/`` (git-ignored; ``make
  clean`` removes it). Old zips are left for drivers still serving them.

Only ``*.py`` files go in (no ``__pycache__``, no bench reports): ``zipimport`` loads pure Python, and
nothing the executors run reads a data file beside its module. No pyspark here.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import zipfile
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT

PACKAGE_DIR = Path(__file__).resolve().parents[1]
DEFAULT_OUT = PROJECT_ROOT / ".spark" / "pyfiles"
OUT_ENV = "SPARK_JOBS_PYFILES_DIR"
# Any fixed time (zip's epoch): the bytes depend on the code alone.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def source_files(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """The package's ``*.py`` files, sorted (what goes into the zip)."""
    return sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)


def _sources(package_dir: Path) -> list[tuple[str, bytes]]:
    """(name in the zip, bytes) of every source file, read once: the name and the content agree."""
    return [(path.relative_to(package_dir.parent).as_posix(), path.read_bytes()) for path in source_files(package_dir)]


def _hash(sources: list[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, data in sources:
        encoded = name.encode()
        digest.update(len(encoded).to_bytes(4, "big") + encoded + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def code_hash(package_dir: Path = PACKAGE_DIR) -> str:
    """The sha256 of the package's code as it is on disk now (each ``*.py`` file's name and bytes), hex: what
    names its zip, and a driver's version (:mod:`spark_jobs.launch.version`)."""
    return _hash(_sources(package_dir))


def zip_name(package_dir: Path = PACKAGE_DIR) -> str:
    """``<package>-<sha256[:16]>.zip`` for the code as it is on disk now (the hash covers each file's name and bytes)."""
    return f"{package_dir.name}-{code_hash(package_dir)[:16]}.zip"


def build(out_dir: Path | None = None, package_dir: Path = PACKAGE_DIR) -> Path:
    """The zip of the package's current code: built unless a zip of exactly this code exists.

    :param out_dir: where zips go (default ``$SPARK_JOBS_PYFILES_DIR``, else ``<project>/.spark/pyfiles``).
    :param package_dir: the package to zip (default: ``spark_jobs``).
    :returns: the zip's path; its top-level folder is the package, as ``import spark_jobs`` needs.
    """
    out_dir = Path(out_dir or os.environ.get(OUT_ENV) or DEFAULT_OUT)
    sources = _sources(package_dir)
    target = out_dir / f"{package_dir.name}-{_hash(sources)[:16]}.zip"
    if target.is_file():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=out_dir)
    try:
        with os.fdopen(handle, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in sources:
                info = zipfile.ZipInfo(name, _ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, data)
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


def main(argv: list[str] | None = None) -> int:
    """Build the zip if needed and print its path; exit 2 for any argument (argparse's usage)."""
    argparse.ArgumentParser(prog="python -m spark_jobs.launch.code_zip",
                            description="builds the executors' code zip if needed, prints its path").parse_args(argv)
    print(build())
    return 0


if __name__ == "__main__":
    sys.exit(main())
