"""Releases of real code changes, for the rollout tests and trials: this checkout's ``spark_jobs`` package copied, a
few exact text replacements made in it (each must match once), kept as a release (:mod:`spark_jobs.launch.releases`).

The changes the deploy tests and ``trial rollout`` / ``trial rollout-kills`` (:mod:`tools.bench.rollouts`) roll out
are named here, so the two use the very same versions:

- :data:`PARSER_FIX` (version 2): a trimmed session creation date, a compatible parser fix;
- :data:`EVENT_TIME_CHECK` (with the fix, version 2b): the missing-eventTime rule on the trimmed text, a second
  compatible change (two releases to alternate between);
- :data:`FIRST_BATCH_BUG` (with the fix, version 4): the batch writer raises, a version that crashes in its first
  batch.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from spark_jobs.launch.releases import Release, add_release
from spark_jobs.model.lake import PROJECT_ROOT

PARSE = "transforms/cloudtrail/parse.py"
PARSER_FIX = ('F.try_to_timestamp(ctx["attributes"]["creationDate"])',
              'F.try_to_timestamp(F.trim(ctx["attributes"]["creationDate"]))')
EVENT_TIME_CHECK = ('(rec["eventTime"].isNull(), F.lit(reasons.MISSING_EVENT_TIME)',
                    '(F.trim(rec["eventTime"]).isNull(), F.lit(reasons.MISSING_EVENT_TIME)')
FIRST_BATCH_BUG = ('    spark = frame.sparkSession\n    pipelined =',
                   '    raise RuntimeError("v4: a bug in the batch writer")\n    spark = frame.sparkSession\n    pipelined =')

# name -> the changes of the versions the rollout trials use
COMPATIBLE = {"v2": {PARSE: [PARSER_FIX]}, "v2b": {PARSE: [PARSER_FIX, EVENT_TIME_CHECK]}}
CRASHES_IN_FIRST_BATCH = {"v4": {PARSE: [PARSER_FIX], "driver/write/batch.py": [FIRST_BATCH_BUG]}}


def release_with(root: Path, name: str, changes: dict[str, list[tuple[str, str]]]) -> Release:
    """Release ``name`` in ``root``: this checkout's package with ``changes`` ({module path under spark_jobs/:
    [(old text, new text), ...]}) made.

    :raises ValueError: a replacement whose old text is not in the module exactly once (the checkout moved on: update
        the change).
    """
    work = root / f".work-{name}" / "spark_jobs"
    shutil.copytree(PROJECT_ROOT / "spark_jobs", work, ignore=shutil.ignore_patterns("__pycache__"))
    try:
        for module, replacements in changes.items():
            path = work / module
            text = path.read_text()
            for old, new in replacements:
                if text.count(old) != 1:
                    raise ValueError(f"{module}: {old!r} is there {text.count(old)} times, not once")
                text = text.replace(old, new)
            path.write_text(text)
        return add_release(name, package_dir=work, root=root, by="test")
    finally:
        shutil.rmtree(work.parent)
