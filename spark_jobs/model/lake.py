"""Where tables and checkpoints live: the one place that turns names into paths.

Layout under the lake root (``--lake``, else ``$LAKE_ROOT``, else ``./lake``)::

    tables/<table>/                 the table (a Delta table)
    checkpoints/<job>/              the streaming checkpoint of the job
    control/<job>/                  beside the checkpoint, never in it: the single-writer lease,
                                    the supervisor's state and its event log

The root is a local folder (a :class:`~pathlib.Path`) or an object store's URL (``s3a://bucket/lake``):
then the paths are ``universal_pathlib`` paths (``str()`` gives the URL, ``/`` and ``is_dir()`` work
through fsspec), see :mod:`spark_jobs.model.object_store` and docs/object-store.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from upath import UPath

from spark_jobs.model.object_store import is_url

# The project's home (the jars, the venv, the scratch folders): the checkout this package is in, or, for a driver
# started from a release of another version (docs/deploying.md), the home that release runs in.
HOME_ENV = "SPARK_JOBS_HOME"
PROJECT_ROOT = Path(os.environ.get(HOME_ENV) or Path(__file__).resolve().parents[2])


def resolve_lake_root(lake: str | os.PathLike | None = None) -> Path:
    """The lake root: ``lake`` if given, else ``$LAKE_ROOT``, else ``./lake`` (absolute); a URL
    (``s3a://bucket/lake``) stays a URL, as a ``UPath``."""
    chosen = lake or os.environ.get("LAKE_ROOT") or "lake"
    return as_path(chosen)


def as_path(where: str | os.PathLike) -> Path:
    """A local path made absolute, or a URL as a ``UPath`` (no trailing slash)."""
    if isinstance(where, UPath) and not isinstance(where, Path):
        return where
    if is_url(where):
        return UPath(str(where).rstrip("/"))
    return Path(where).expanduser().resolve()


@dataclass(frozen=True)
class Lake:
    """Paths inside one lake root.

    :param root: an absolute folder or an object store's URL (a ``UPath``); created on first write.
    """

    root: Path

    @classmethod
    def at(cls, lake: str | os.PathLike | None = None) -> "Lake":
        return cls(resolve_lake_root(lake))

    def table_path(self, table: str) -> Path:
        return self.root / "tables" / table

    def checkpoint_path(self, job: str) -> Path:
        return self.root / "checkpoints" / job

    def control_path(self, job: str) -> Path:
        return self.root / "control" / job
