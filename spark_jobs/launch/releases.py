"""Releases: versions of the ``spark_jobs`` package kept where a driver can start from them.

Usage::

    python -m spark_jobs release add v2 --git v2            # git archive v2 spark_jobs, kept as release v2
    python -m spark_jobs release add v2 --zip spark_jobs-<hash>.zip
    python -m spark_jobs release list

A release is ``<releases>/<name>/spark_jobs/`` (the package: the jobs' code and their registry entries) beside a
``release.json`` (its name, code hash, where it came from, who made it and when). ``<releases>`` is
``$SPARK_JOBS_RELEASES``, else ``<project>/.spark/releases``. A release is written into a temp folder and renamed
into place (a reader sees all of it or none), and never changed after: a changed file is a new version.

A driver of a release runs the project's usual command with the release first on ``PYTHONPATH`` and
``$SPARK_JOBS_HOME`` naming the project (its jars, scratch folders and logs): :func:`driver_env`. Its version is the
release's name (:mod:`spark_jobs.launch.version`). No pyspark here.
"""

from __future__ import annotations

import datetime as dt
import getpass
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.launch.code_zip import code_hash
from spark_jobs.launch.version import RELEASE_FILE, check_name, read_release
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import HOME_ENV, PROJECT_ROOT

RELEASES_ENV = "SPARK_JOBS_RELEASES"
PACKAGE = "spark_jobs"


@dataclass(frozen=True)
class Release:
    """One kept version: its name, folder (holding ``spark_jobs/``), code hash and where it came from."""

    name: str
    folder: Path
    code: str
    made_from: str
    made_at: str | None = None
    by: str | None = None


def releases_root(root: str | os.PathLike | None = None) -> Path:
    """Where releases are kept: ``root``, else ``$SPARK_JOBS_RELEASES``, else ``<project>/.spark/releases``."""
    return Path(root or os.environ.get(RELEASES_ENV) or PROJECT_ROOT / ".spark" / "releases").resolve()


def _of(folder: Path) -> Release | None:
    said = read_release(folder)
    if not said or not (folder / PACKAGE).is_dir():
        return None
    return Release(said.get("name", folder.name), folder, said.get("code", ""), said.get("made_from", "?"),
                   said.get("made_at"), said.get("by"))


def list_releases(root: str | os.PathLike | None = None) -> list[Release]:
    """Every release kept, by name."""
    base = releases_root(root)
    found = [_of(folder) for folder in sorted(base.iterdir())] if base.is_dir() else []
    return [release for release in found if release is not None]


def find_release(name: str, root: str | os.PathLike | None = None) -> Release:
    """The release called ``name``.

    :raises UsageError: naming the unknown version, the known ones, and how to make one.
    """
    release = _of(releases_root(root) / check_name(name)) if _valid(name) else None
    if release is None:
        known = ", ".join(r.name for r in list_releases(root)) or "none yet"
        raise UsageError(f"unknown version {name!r} (releases in {releases_root(root)}: {known}); make it first with "
                         f"`python -m spark_jobs release add {name} --git <ref>` or `--zip <file>`")
    return release


def _valid(name: str) -> bool:
    try:
        check_name(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return True


def add_release(name: str, *, git_ref: str | None = None, zip_path: str | os.PathLike | None = None,
                package_dir: str | os.PathLike | None = None, root: str | os.PathLike | None = None,
                repo: str | os.PathLike = PROJECT_ROOT, by: str | None = None) -> Release:
    """Keep the package of ``git_ref`` (``git archive``), of a built zip (one top folder ``spark_jobs/``, as
    :mod:`spark_jobs.launch.code_zip` builds) or of a folder as release ``name``; exactly one of the three.

    :raises UsageError: a bad or taken name, none or several sources, a ref git does not know, a zip or folder
        without the package.
    """
    _valid(name)
    if sum(x is not None for x in (git_ref, zip_path, package_dir)) != 1:
        raise UsageError("give exactly one of --git REF, --zip FILE or --folder DIR")
    base = releases_root(root)
    target = base / name
    if target.exists():
        raise UsageError(f"release {name!r} exists already ({target}); a release never changes: name the new code "
                         "another version")
    base.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=base))
    try:
        if git_ref is not None:
            made_from = _from_git(git_ref, Path(repo), temp)
        elif zip_path is not None:
            made_from = _from_zip(Path(zip_path), temp)
        else:
            made_from = _from_folder(Path(package_dir), temp)
        if not (temp / PACKAGE / "__main__.py").is_file() or not (temp / PACKAGE / "registry.py").is_file():
            raise UsageError(f"{made_from} holds no {PACKAGE} package with a registry (no {PACKAGE}/__main__.py and "
                             f"{PACKAGE}/registry.py)")
        said = {"name": name, "code": code_hash(temp / PACKAGE)[:16], "made_from": made_from,
                "made_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "by": by or getpass.getuser()}
        (temp / RELEASE_FILE).write_text(json.dumps(said, indent=1, sort_keys=True) + "\n")
        os.chmod(temp, 0o755)
        os.rename(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return _of(target)


def _from_git(ref: str, repo: Path, into: Path) -> str:
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                            capture_output=True, text=True)
    if commit.returncode != 0:
        raise UsageError(f"git does not know {ref!r} in {repo}; give a tag, a branch or a commit")
    sha = commit.stdout.strip()
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha, PACKAGE], capture_output=True)
    if archive.returncode != 0:
        raise UsageError(f"git archive {ref} {PACKAGE} failed: {archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return f"git {ref} ({sha[:12]})"


def _from_zip(path: Path, into: Path) -> str:
    if not zipfile.is_zipfile(path):
        raise UsageError(f"{str(path)!r} is not a zip file; give the zip `python -m spark_jobs.launch.code_zip` built")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        if any(n.startswith("/") or ".." in Path(n).parts for n in names):
            raise UsageError(f"{str(path)!r} holds paths outside its folder; refused")
        archive.extractall(into)
    return f"zip {path.name}"


def _from_folder(package: Path, into: Path) -> str:
    if package.name != PACKAGE or not package.is_dir():
        raise UsageError(f"{str(package)!r} is not a {PACKAGE} package folder")
    shutil.copytree(package, into / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return f"folder {package}"


def driver_env(release: Release, env: dict | None = None) -> dict:
    """The environment of a driver of ``release``: the release first on ``PYTHONPATH``, ``$SPARK_JOBS_HOME`` this
    project (a driver of a release finds the jars and scratch folders of the home it runs in), and
    ``PYTHONSAFEPATH`` (no working folder on ``sys.path``, whatever folder the driver starts in)."""
    env = dict(os.environ if env is None else env)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != release.folder]
    env["PYTHONPATH"] = os.pathsep.join([str(release.folder), *rest])
    env[HOME_ENV] = str(PROJECT_ROOT)
    env["PYTHONSAFEPATH"] = "1"  # `python -m` in the project's folder would otherwise import the checkout's package
    return env
