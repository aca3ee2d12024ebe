"""Releases of real code changes, for the rollout tests and trials: this checkout's ``spark_jobs`` package copied, a
few exact text replacements made in it (each must match once), kept as a release (:mod:`spark_jobs.launch.releases`).

The changes the deploy tests and ``trial rollout`` / ``trial rollout-kills`` (:mod:`tools.bench.rollouts`) roll out
are named here, so the two use the very same versions; each is one version's whole change from this checkout
(version 1):

- :data:`PARSER_FIX` (v2): a session's creation date in ISO 8601's basic format (``20240302T090000Z``) is read,
  where v1 leaves it NULL, a compatible parser fix;
- :data:`SECOND_FIX` (v2b): v2 with the missing-eventTime rule on the trimmed text, a second compatible change (two
  releases to alternate between);
- :data:`COLUMN_TYPE_CHANGE` (v3): v2 with ``readOnly`` written as a string (the table's column is a boolean),
  refused in pre-flight;
- :data:`FIRST_BATCH_CRASH` (v4): v2 with a bug in the batch writer: its first batch fails, before anything is
  committed;
- :data:`QUARANTINES_EVERYTHING` (v5): v2 with a parser that quarantines every event (its eventTime is never read).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from spark_jobs.launch.releases import Release, add_release
from spark_jobs.model.lake import PROJECT_ROOT

PARSE = "transforms/cloudtrail/parse.py"
_BASIC_CREATION_DATE = ('F.try_to_timestamp(ctx["attributes"]["creationDate"])',
                        'F.coalesce(F.try_to_timestamp(ctx["attributes"]["creationDate"]), F.try_to_timestamp('
                        'ctx["attributes"]["creationDate"], F.lit("yyyyMMdd\'T\'HHmmssX")))')
_EVENT_TIME_CHECK = ('(rec["eventTime"].isNull(), F.lit(reasons.MISSING_EVENT_TIME)',
                     '(F.trim(rec["eventTime"]).isNull(), F.lit(reasons.MISSING_EVENT_TIME)')
_FIRST_BATCH_BUG = ('    spark = frame.sparkSession\n    pipelined =',
                    '    raise RuntimeError("v4: a bug in the batch writer")\n    spark = frame.sparkSession\n'
                    '    pipelined =')

PARSER_FIX = {PARSE: [_BASIC_CREATION_DATE]}
SECOND_FIX = {PARSE: [_BASIC_CREATION_DATE, _EVENT_TIME_CHECK]}
COLUMN_TYPE_CHANGE = {PARSE: [_BASIC_CREATION_DATE,
                              ('rec["readOnly"].try_cast("boolean")', 'rec["readOnly"].try_cast("string")')]}
FIRST_BATCH_CRASH = {PARSE: [_BASIC_CREATION_DATE], "driver/write/batch.py": [_FIRST_BATCH_BUG]}
QUARANTINES_EVERYTHING = {PARSE: [_BASIC_CREATION_DATE, (
    'event_time = F.try_to_timestamp(rec["eventTime"])',
    'event_time = F.try_to_timestamp(F.concat(rec["eventTime"], F.lit("?")))')]}

# name -> the changes of the versions the rollout trials use
COMPATIBLE = {"v2": PARSER_FIX, "v2b": SECOND_FIX}
CRASHES_IN_FIRST_BATCH = {"v4": FIRST_BATCH_CRASH}


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
