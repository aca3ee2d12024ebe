"""Why a file or record went to quarantine: stable codes in the ``reason`` column.

The ``detail`` column beside it says what exactly was wrong (offset, value, parser message).
File-level reasons have ``record_index`` NULL; record-level reasons name the record's position.
"""

# File level: nothing (or not everything) of the file could be split into records.
UNREADABLE_FILE = "unreadable_file"  # corrupt or truncated gzip; records before the damage are kept
INVALID_JSON = "invalid_json"  # the file (or a JSON line) is not valid JSON
NO_RECORDS = "no_records"  # valid JSON, but no "Records" array of events
EMPTY_FILE = "empty_file"  # zero bytes, or only white space
FILE_GONE = "file_gone"  # listed or notified, but deleted before it could be read

# Record level: one event that could not become a row of cloudtrail_events.
INVALID_UTF8 = "invalid_utf8"  # the record holds bytes that are not UTF-8
NOT_AN_OBJECT = "not_an_object"  # an element of Records that is not a JSON object
MISSING_EVENT_TIME = "missing_event_time"
BAD_EVENT_TIME = "bad_event_time"  # eventTime present but not a timestamp
MISSING_EVENT_ID = "missing_event_id"

FILE_LEVEL = (UNREADABLE_FILE, INVALID_JSON, NO_RECORDS, EMPTY_FILE, FILE_GONE)
RECORD_LEVEL = (INVALID_UTF8, NOT_AN_OBJECT, MISSING_EVENT_TIME, BAD_EVENT_TIME, MISSING_EVENT_ID)
ALL = FILE_LEVEL + RECORD_LEVEL
