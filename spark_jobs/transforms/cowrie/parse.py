"""The Cowrie SSH honeypot's JSON log to one typed row per line: the ``cowrie_honeypot`` job's parser.

Cowrie writes one JSON object per line to ``cowrie.json`` and rotates it daily to
``cowrie.json.YYYY-MM-DD``; the landing folder receives the rotated files (gzipped or not, one
sub-folder per sensor if several), never the live ``cowrie.json``, which is still being written.
The ``eventid`` picks the shape of a line (``cowrie.session.connect``, ``cowrie.login.failed``,
``cowrie.command.input``, ``cowrie.session.file_download``, ...), and each shape has its own keys.

Rows: one per non-blank line, with the fields of every shape typed (:data:`FIELDS`), the time of the event
(``timestamp``) and its UTC ``date``; a line that cannot be an event has a reason code (:data:`REASONS`), a
detail and the raw line. How a line is split, typed and judged is every JSON-lines log's
(:mod:`spark_jobs.transforms.json_lines`); the tables, keys and routes are the registry's
(``COWRIE_HONEYPOT``, a :func:`~spark_jobs.model.jobs.file_log_type`).

**What identifies an event.** Cowrie writes no event id. An event is identified by where and when
it happened: its ``sensor`` (the honeypot), ``session`` (the connection), ``eventid`` (what
happened) and ``timestamp`` (UTC, to the microsecond, as Cowrie writes it). ``event_id`` is the
SHA-256 (hex) of the JSON array ``[sensor, session, eventid, timestamp]``, the timestamp written
back as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (so ``Z`` and ``+00:00``, or a shorter fraction, give the
same id; a missing sensor or session is ``null`` in it). A line delivered again (a file landing
again under a new name, a copy in two sensors' folders, a backfill beside the live stream) is the
same event and adds nothing, even when re-serialized with other key order or extra fields. Two
distinct events would share an id only if one session logged the same ``eventid`` twice in the same
microsecond; each event is a separate log call stamped with its own clock reading, so this is not
expected (and the first line of such a pair would win). Measured on the real log
(``../shared/data/real/applogs/kareiva_cowrie-logs``, 2 files, 4,148 non-blank lines): 4,148
distinct ids, so no two lines share one; no exact duplicate line and
no two lines equal as JSON objects; even ``timestamp`` alone is unique there. A hash of the whole
record was rejected: a shipper that adds or reorders a field would make the same event two rows.

Every field of the 14 real shapes has a column: ``_rescued_data`` is NULL for all real lines.
"""

from __future__ import annotations

import datetime as dt

from spark_jobs.transforms.json_lines import (
    BOOLEAN, DOUBLE, INT, LONG, STRING, STRINGS, JsonLinesLog, sha256_of, utc_micros,
)

# name -> the Spark type of its column. A value of another JSON type goes to _rescued_data.
FIELDS = {
    # every shape
    "eventid": STRING, "session": STRING, "sensor": STRING, "src_ip": STRING, "message": STRING,
    "system": STRING, "isError": BOOLEAN,
    # session.connect, direct-tcpip.request / .data
    "src_port": INT, "dst_ip": STRING, "dst_port": INT, "protocol": STRING, "data": STRING,
    # login.success / .failed
    "username": STRING, "password": STRING,
    # command.input / .failed
    "input": STRING,
    # session.closed, log.open / .closed
    "duration": DOUBLE, "ttylog": STRING, "size": LONG,
    # client.version (and Cowrie 2's client.kex), client.size
    "version": STRING, "hassh": STRING, "hasshAlgorithms": STRING, "kexAlgs": STRINGS, "keyAlgs": STRINGS,
    "encCS": STRINGS, "macCS": STRINGS, "compCS": STRINGS, "langCS": STRINGS, "width": INT, "height": INT,
    # session.file_download (.failed)
    "url": STRING, "shasum": STRING, "outfile": STRING, "unique": BOOLEAN,
}


def event_id(row: dict, record: dict, moment: dt.datetime) -> str:
    """The id of an event (see the module docstring): SHA-256 of ``[sensor, session, eventid, UTC time]``."""
    return sha256_of([row["sensor"], row["session"], row["eventid"], utc_micros(moment)])


COWRIE = JsonLinesLog(kind="eventid", fields=FIELDS, event_key=event_id)
REASONS = COWRIE.reasons
# Cowrie log files (Spark's binaryFile rows) to one row per non-blank line, every column of both tables.
transform = COWRIE.transform
