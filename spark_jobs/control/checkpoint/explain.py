"""Spark's start-up errors about a checkpoint, in plain words, with the ways out.

The names are Spark 4.2's error conditions (``error/error-conditions.json`` in
``spark-common-utils``) and the plain messages of its checkpoint logs (``OffsetSeqLog``,
``CommitLog``, ``HDFSMetadataLog``, the file source's log and Hadoop's checksummed filesystem).
"""

from __future__ import annotations

import re

REPROCESS = ("start a new checkpoint and reprocess: move the checkpoint (<lake>/checkpoints/<job>) and the job's "
             "tables aside, then run the job again so it reads the input from the start into a new checkpoint")
REVERT = "revert the code change and restart: the job resumes from this checkpoint where it stopped"
INCOMPATIBLE_WAYS = f"Two ways out: {REVERT}; or keep the change and {REPROCESS}."
DOCTOR = ("Run `python -m spark_jobs checkpoint inspect <job>` to see what is damaged and "
          "`python -m spark_jobs checkpoint repair <job>` (dry run; --apply to fix what is provably safe).")

# (pattern, what it means, the way out); the first match wins.
_KNOWN: tuple[tuple[str, str, str], ...] = (
    (r"STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
     "A stateful operator of the query (an aggregation, a deduplication, a join, a state function) was added, "
     "removed or changed since the checkpoint was written: the state kept in the checkpoint belongs to the old operators.",
     INCOMPATIBLE_WAYS),
    (r"STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY",
     "The query has stateful operators but the checkpoint holds no state for them: either the query ran "
     "without them before, or the checkpoint's state/ folder was deleted.",
     INCOMPATIBLE_WAYS + " If state files were deleted, restore them from a backup instead."),
    (r"STATE_STORE_(KEY|VALUE)_SCHEMA_NOT_COMPATIBLE|Provided (key |value )?schema does(n't| not) match|"
     r"STATE_STORE_COLUMN_FAMILY_SCHEMA_INCOMPATIBLE|STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION|"
     r"STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE",
     "The columns a stateful operator keeps in its state (its key or its value) changed since the checkpoint was "
     "written, so the stored state cannot be read by the new query.",
     INCOMPATIBLE_WAYS),
    (r"STATE_STORE_INVALID_CONFIG_AFTER_RESTART",
     "A state store setting changed between restarts; Spark keeps the one stored in the checkpoint.",
     "Set it back to the stored value, or keep the new one and " + REPROCESS + "."),
    (r"sources in the checkpoint offsets and now there are|number of sources",
     "The query reads a different number of sources than when the checkpoint was written (a source was added "
     "or removed): the checkpoint's offsets belong to the old sources.",
     INCOMPATIBLE_WAYS),
    (r"STREAMING_CHECKPOINT_MISSING_METADATA_FILE",
     "The checkpoint's `metadata` file (the stream's id) is gone while its offsets and commits are still there.",
     "`python -m spark_jobs checkpoint repair <job> --apply` restores it when the tables prove the id; otherwise "
     + REPROCESS + "."),
    (r"CONCURRENT_STREAM_LOG_UPDATE|Multiple streaming jobs detected",
     "Another driver wrote the same batch to this checkpoint first: two drivers ran on one checkpoint.",
     "Stop the other driver (see `python -m spark_jobs checkpoint inspect <job>`: driver) and start one again; "
     "the checkpoint itself is fine."),
    (r"MALFORMED_LOG_FILE|Log file was malformed|Incomplete log file|INVALID_LOG_VERSION|UnsupportedLogVersion|"
     r"Checksum error|ChecksumException|CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED",
     "A file of the checkpoint's logs (offsets, commits, or the file source's log) is empty, cut short or does "
     "not match its checksum: an interrupted write or a damaged disk.",
     DOCTOR),
    (r"(com\.fasterxml\.jackson|json4s|JsonParseException|MismatchedInputException|Unexpected end-of-input)",
     "A file of the checkpoint's logs holds cut-off JSON (an interrupted write).",
     DOCTOR),
    (r"CANNOT_LOAD_STATE_STORE|CANNOT_READ_DELTA_FILE_NOT_EXISTS|CANNOT_READ_MISSING_SNAPSHOT_FILE",
     "The state of a stateful operator cannot be loaded: state files in the checkpoint are missing or damaged.",
     "Restore the checkpoint's state/ folder from a backup, or " + REPROCESS + "."),
    (r"DELTA_FAILED_TO_MERGE_FIELDS|schema mismatch detected when writing to the Delta table|"
     r"DELTA_SCHEMA_CHANGED|A schema mismatch detected",
     "The job's output columns changed incompatibly with the table it writes (a changed output schema).",
     "Two ways out: revert the code change; or keep it, write to new tables (or migrate the tables' schema), "
     "and " + REPROCESS + "."),
)
_COMPILED = tuple((re.compile(p, re.IGNORECASE), what, way) for p, what, way in _KNOWN)


def explain_start_failure(message: str) -> str | None:
    """Spark's error about the checkpoint in plain words and the way out; ``None`` for any other error.

    :param message: the error's text (its first line is enough when it holds the condition's name).
    """
    for pattern, what, way in _COMPILED:
        if pattern.search(message or ""):
            return f"{what} {way}"
    return None
