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


# Real code changes the deploy tests roll out, as release_with's ``changes``: each is one version's whole change from
# this checkout (version 1).
_BASIC_CREATION_DATE = ('F.try_to_timestamp(ctx["attributes"]["creationDate"])',
                        'F.coalesce(F.try_to_timestamp(ctx["attributes"]["creationDate"]), F.try_to_timestamp('
                        'ctx["attributes"]["creationDate"], F.lit("yyyyMMdd\'T\'HHmmssX")))')
#: v2, compatible: a parser fix; a session's creation date in ISO 8601's basic format (``20240302T090000Z``) is read,
#: where v1 leaves it NULL.
PARSER_FIX = {"transforms/cloudtrail/parse.py": [_BASIC_CREATION_DATE]}
#: v3, incompatible: v2 with ``readOnly`` written as a string (the table's column is a boolean): refused in pre-flight.
COLUMN_TYPE_CHANGE = {"transforms/cloudtrail/parse.py": [
    _BASIC_CREATION_DATE, ('rec["readOnly"].try_cast("boolean")', 'rec["readOnly"].try_cast("string")')]}
#: v4: v2 with a bug in the batch writer: its first batch fails, before anything is committed.
FIRST_BATCH_CRASH = {"transforms/cloudtrail/parse.py": [_BASIC_CREATION_DATE], "driver/write/batch.py": [(
    '    spark = frame.sparkSession\n    pipelined =',
    '    raise RuntimeError("v4: a bug in the batch writer")\n    spark = frame.sparkSession\n    pipelined =')]}
#: v5: v2 with a parser that quarantines every event (its eventTime is never read).
QUARANTINES_EVERYTHING = {"transforms/cloudtrail/parse.py": [
    _BASIC_CREATION_DATE, ('event_time = F.try_to_timestamp(rec["eventTime"])',
                             'event_time = F.try_to_timestamp(F.concat(rec["eventTime"], F.lit("?")))')]}
