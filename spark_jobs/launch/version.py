"""Which version of the code a driver runs: its name and its code hash.

A version of a job is its code and its registry entry, and both are the ``spark_jobs`` package (docs/deploying.md).
A driver's version is, first found:

1. the ``release.json`` beside the package (``<releases>/<name>/release.json``: a release made by
   ``python -m spark_jobs release add``, :mod:`spark_jobs.launch.releases`), when its code hash is the package's;
2. ``$SPARK_JOBS_VERSION`` (a container image built from a tag sets it);
3. ``code-<sha256[:16]>``: the package's code hash (:func:`spark_jobs.launch.code_zip.code_hash`, the hash that
   names the executors' code zip), so that a checkout with changed files is never taken for another version.

The code hash is always the package's own, whatever the name says. Every ``streaming_progress`` row carries the
name (``version``), and every Delta commit of a batch carries both as its commit info's ``userMetadata``
(:data:`USER_METADATA_CONF`). No pyspark here.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.launch.code_zip import PACKAGE_DIR, code_hash

VERSION_ENV = "SPARK_JOBS_VERSION"
RELEASE_FILE = "release.json"
#: Delta's SQL setting whose value every commit of the session records as ``commitInfo.userMetadata``.
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class CodeVersion:
    """A driver's version.

    :param name: the team's name of it (``v2``, a tag, a short commit), or ``code-<hash[:16]>``.
    :param code: the package's code hash (sha256 hex, first 16).
    :param source: where the name came from: ``release``, ``environment`` or ``code``.
    """

    name: str
    code: str
    source: str

    def user_metadata(self) -> str:
        """What each Delta commit of a batch records: ``{"code": ..., "version": ...}``."""
        return json.dumps({"version": self.name, "code": self.code}, sort_keys=True)


def check_name(name: str) -> str:
    """``name`` if it can name a version, else :class:`ValueError` naming it and the rule."""
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(f"{name!r} cannot name a version: use 1-64 letters, digits, '.', '_' or '-', starting with "
                         "a letter or digit (a git tag or a short commit: v2, 2026.12.07-1, 3f9c2e1)")
    return name


def read_release(folder: Path) -> dict | None:
    """``<folder>/release.json``, or None when there is none (or it is not JSON)."""
    try:
        return json.loads((Path(folder) / RELEASE_FILE).read_text())
    except (OSError, ValueError):
        return None


def version_of(package_dir: Path = PACKAGE_DIR, environ: dict | None = None) -> CodeVersion:
    """The version of the package in ``package_dir`` (see the module docstring)."""
    environ = os.environ if environ is None else environ
    code = code_hash(package_dir)[:16]
    release = read_release(Path(package_dir).parent)
    if release and release.get("code") == code and isinstance(release.get("name"), str):
        return CodeVersion(release["name"], code, "release")
    named = (environ.get(VERSION_ENV) or "").strip()
    if named:
        return CodeVersion(check_name(named), code, "environment")
    return CodeVersion(f"code-{code}", code, "code")


@functools.lru_cache(maxsize=1)
def current() -> CodeVersion:
    """This process's version (read once: the code a process runs does not change under it)."""
    return version_of()
