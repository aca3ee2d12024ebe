"""CloudTrail deliveries landing while a test runs: one gzipped file every few seconds from a thread, each of a few
fresh events, written atomically (a hidden temporary file renamed), with what landed and when."""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path

ACCOUNT_FOLDER = Path("AWSLogs") / "123456789012" / "CloudTrail" / "us-east-1" / "2024" / "03" / "02"
# A session's creation date in ISO 8601's basic format: version 1's parser leaves it NULL, the parser fix of
# tools/releases.py (PARSER_FIX) reads it.
BASIC_CREATION_DATE = "20240302T090000Z"


class LiveLanding:
    """Files landing in ``landing`` (under the CloudTrail folder layout), one every ``every`` seconds once
    :meth:`start` ran; the first event of each has a session whose creation date is :data:`BASIC_CREATION_DATE`.

    :ivar expected: every good event's id landed so far.
    :ivar landed: (file name, the time it landed) of every file, oldest first.
    :ivar bad: (file name, record index, reason) of every record landed to be quarantined.
    """

    def __init__(self, landing: Path, prefix: str, every: float, records: int = 3) -> None:
        self.folder = Path(landing) / ACCOUNT_FOLDER
        self.folder.mkdir(parents=True, exist_ok=True)
        self.prefix, self.every, self.records = prefix, every, records
        self.expected: list[str] = []
        self.landed: list[tuple[str, float]] = []
        self.bad: list[tuple[str, int, str]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def land_one(self, bad_event_time: bool = False) -> str:
        """Land one file (with ``bad_event_time``, one more record whose eventTime is not a time); its name."""
        n = len(self.landed)
        minute = n % 60
        ids = [f"{self.prefix}-{n}-{r}" for r in range(self.records)]
        records = [{"eventVersion": "1.08", "eventID": event_id, "eventTime": f"2024-03-02T10:{minute:02d}:{r:02d}Z",
                    "eventSource": "s3.amazonaws.com", "eventName": "GetObject", "awsRegion": "us-east-1"}
                   for r, event_id in enumerate(ids)]
        records[0]["userIdentity"] = {"type": "AssumedRole", "sessionContext": {
            "attributes": {"creationDate": BASIC_CREATION_DATE, "mfaAuthenticated": "false"}}}
        name = f"123456789012_CloudTrail_us-east-1_20240302T10{minute:02d}Z_{self.prefix}{n:05d}.json.gz"
        if bad_event_time:
            records.append({**records[-1], "eventID": f"{self.prefix}-{n}-bad", "eventTime": "yesterday"})
            self.bad.append((name, len(records) - 1, "bad_event_time"))
        final = self.folder / name
        temp = final.with_name("." + final.name + ".tmp")
        temp.write_bytes(gzip.compress(json.dumps({"Records": records}).encode()))
        temp.rename(final)
        self.landed.append((name, time.time()))
        self.expected += ids
        return name

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.every):
                self.land_one()

        self._stop.clear()
        self._thread = threading.Thread(target=loop, name="lander", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
