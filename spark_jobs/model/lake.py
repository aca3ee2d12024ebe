"""Where tables and checkpoints live: the one place that turns names into paths.

Layout under the lake root (``--lake``, else ``$LAKE_ROOT``, else ``./lake``)::

    tables/<table>/                 the table (a Delta table)
    checkpoints/<job>/              the streaming checkpoint of the job
    control/<job>/                  beside the checkpoint, never in it: the single-writer lease,
                                    the supervisor's state and its event log
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def resolve_lake_root(lake: str | os.PathLike | None = None) -> Path:
    """The lake root: ``lake`` if given, else ``$LAKE_ROOT``, else ``./lake`` (absolute)."""
    chosen = lake or os.environ.get("LAKE_ROOT") or "lake"
    return Path(chosen).expanduser().resolve()


@dataclass(frozen=True)
class Lake:
    """Paths inside one lake root.

    :param root: an absolute folder; created on first write.
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
