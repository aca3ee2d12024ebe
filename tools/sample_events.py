"""Generated ``cloudtrail_events`` rows for the analytics jobs, with planted patterns and what they must give.

The analytics jobs read ``cloudtrail_events`` (a Delta table), so their tests and benchmark write
rows of it directly, one Delta commit at a time (each commit one micro-batch when read with
``maxFilesPerTrigger=1``), instead of running ``cloudtrail_etl`` first. :func:`event_stream` makes
the commits: clean, in-order traffic of a few accounts, and on request

- late events: some far behind (every window of theirs already closed), some behind the watermark
  only far enough to miss their tumbling window while a sliding window of theirs is still open, and
  some behind the watermark whose windows are all still open (they must count);
- a burst of failed ``ConsoleLogin`` events by one user from one IP (and near misses that must not
  fire: too few, or split across two windows);
- calls by an account's root identity (and root calls made by an AWS service, which must not fire).

:func:`expected_late` says, by Spark's rule (see :mod:`spark_jobs.transforms.windows`), which
(event, window) pairs a run that reads one commit per micro-batch drops, and :func:`expected_counts`
the window counts that remain. Everything here is standard library; :func:`append_commits` writes
the commits with Spark.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from spark_jobs.model.streams import EventTimeSpec, duration_seconds

ACCOUNTS = ("111122223333", "444455556666", "777788889999")  # the last one is not in reference/accounts.csv
START = datetime(2024, 3, 4, 6, 0, tzinfo=UTC)
_CALLS = (("ec2.amazonaws.com", "DescribeInstances"), ("s3.amazonaws.com", "GetObject"),
          ("iam.amazonaws.com", "ListUsers"), ("sts.amazonaws.com", "AssumeRole"),
          ("kms.amazonaws.com", "Decrypt"), ("lambda.amazonaws.com", "ListFunctions20150331"))
_ERRORS = ("AccessDenied", "ThrottlingException")


@dataclass
class EventStream:
    """Commits of ``cloudtrail_events`` rows and what was planted in them.

    :param commits: each commit's rows (dicts of ``cloudtrail_events`` columns; the rest are NULL).
    :param late: eventIDs planted to be dropped for at least one window.
    :param open_late: eventIDs planted behind the watermark whose windows are all still open.
    :param alerts: the alerts the planted patterns must fire: (rule, account, subject, source_ip,
        window start) each.
    """

    commits: list[list[dict]] = field(default_factory=list)
    late: set[str] = field(default_factory=set)
    open_late: set[str] = field(default_factory=set)
    alerts: set[tuple] = field(default_factory=set)

    @property
    def events(self) -> list[dict]:
        return [row for commit in self.commits for row in commit]


def _event_id(seed: int, *parts) -> str:
    digest = hashlib.sha256("|".join(map(str, (seed, *parts))).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def event(event_id: str, when: datetime, account: str, source: str, name: str, *, error: str | None = None,
          user: str = "alice", ip: str = "198.51.100.7", identity: str = "IAMUser", invoked_by: str | None = None,
          response: dict | None = None, error_message: str | None = None, event_type: str = "AwsApiCall",
          region: str = "us-east-1") -> dict:
    """One ``cloudtrail_events`` row (the columns the analytics jobs read; the others stay NULL)."""
    arn = f"arn:aws:iam::{account}:root" if identity == "Root" else f"arn:aws:iam::{account}:user/{user}"
    return {"eventID": event_id, "eventTime": when, "date": when.date(), "eventSource": source, "eventName": name,
            "eventType": event_type, "errorCode": error, "errorMessage": error_message, "awsRegion": region,
            "sourceIPAddress": invoked_by or ip, "recipientAccountId": account, "userIdentity_type": identity,
            "userIdentity_arn": arn, "userIdentity_accountId": account,
            "userIdentity_userName": None if identity == "Root" else user,
            "userIdentity_principalId": account if identity == "Root" else f"AIDA{account}{user}",
            "userIdentity_invokedBy": invoked_by, "responseElements": json.dumps(response) if response else None,
            "_source_file": f"generated/{event_id}.json", "_record_index": 0}


def event_stream(*, commits: int = 8, per_commit: int = 30, step: timedelta = timedelta(minutes=20),
                 start: datetime = START, seed: int = 11, accounts: tuple[str, ...] = ACCOUNTS,
                 late: bool = False, event_time: EventTimeSpec | None = None, bursts: bool = False,
                 root: bool = False) -> EventStream:
    """In-order traffic: commit ``k`` holds ``per_commit`` events of ``accounts`` between ``start + k*step``
    and ``start + (k+1)*step``, plus the planted patterns asked for.

    :param late: plant late events (needs ``event_time``: its watermark and windows), from commit 3 on.
    :param bursts: plant a failed-login burst (commit 2, spilling into 3) and two near misses.
    :param root: plant root use (commit 4) and root calls by an AWS service.
    """
    rng = random.Random(seed)
    stream = EventStream()
    for k in range(commits):
        base = start + k * step
        rows = []
        for i in range(per_commit):
            source, name = rng.choice(_CALLS)
            when = base + timedelta(seconds=rng.randrange(int(step.total_seconds())))
            rows.append(event(_event_id(seed, k, i), when, accounts[i % len(accounts)], source, name,
                              error=rng.choice(_ERRORS) if rng.random() < 0.15 else None,
                              user=rng.choice(("alice", "bob", "carol"))))
        stream.commits.append(sorted(rows, key=lambda r: (r["eventTime"], r["eventID"])))
    if late:
        _plant_late(stream, event_time, step, seed)
    if bursts:
        _plant_bursts(stream, step, seed, accounts[0])
    if root:
        _plant_root(stream, step, seed, accounts[1])
    return stream


def _plant_late(stream: EventStream, event_time: EventTimeSpec, step: timedelta, seed: int) -> None:
    """Late events in commits 3.. (see :func:`expected_late` for which windows they miss)."""
    delay = timedelta(seconds=duration_seconds(event_time.watermark_delay))
    widest = max(timedelta(seconds=duration_seconds(w.size)) for w in event_time.windows)
    for k in range(3, len(stream.commits)):
        watermark = max(r["eventTime"] for c in stream.commits[:k - 1] for r in c) - delay
        planted = [
            ("far", watermark - widest - timedelta(minutes=7)),      # every window closed
            ("far-twin", watermark - widest - timedelta(minutes=7)),  # the same second: one key, two events
            ("edge", watermark - timedelta(minutes=1)),              # tumbling closed (or not), sliding open
            ("open", _open_time(watermark, event_time)),             # behind the watermark, windows open
        ]
        for tag, when in planted:
            if when is None:
                continue
            row = event(_event_id(seed, "late", k, tag), when, ACCOUNTS[k % 2], "ec2.amazonaws.com",
                        "DescribeInstances", user="late-user")
            stream.commits[k].append(row)
            late_windows = [w for w in windows_of(when, event_time) if w[2] <= watermark]
            (stream.late if late_windows else stream.open_late).add(row["eventID"])


def _open_time(watermark: datetime, event_time: EventTimeSpec) -> datetime | None:
    """A time behind ``watermark`` whose every window ends after it (None if there is none)."""
    for seconds in range(1, 3600):
        when = watermark - timedelta(seconds=seconds)
        if all(end > watermark for _, _, end in windows_of(when, event_time)):
            return when
    return None


def _plant_bursts(stream: EventStream, step: timedelta, seed: int, account: str) -> None:
    failure = {"ConsoleLogin": "Failure"}

    def login(tag, when, user, ip):
        return event(_event_id(seed, "login", tag), when, account, "signin.amazonaws.com", "ConsoleLogin",
                     user=user, ip=ip, response=failure, error_message="Failed authentication")

    base = START + 2 * step + timedelta(minutes=12)  # a 10-minute window starting at :10
    burst = [login(f"b{i}", base + timedelta(seconds=40 * i), "mallory", "203.0.113.9") for i in range(6)]
    stream.commits[2].extend(burst[:4])  # the burst spans two micro-batches
    stream.commits[3].extend(burst[4:])
    stream.alerts.add(("console_login_burst", account, "mallory", "203.0.113.9", _floor(base, 600)))
    few = [login(f"f{i}", base + timedelta(seconds=30 * i), "bob", "203.0.113.10") for i in range(4)]
    split_base = START + 2 * step + timedelta(minutes=8)  # 3 before :10, 3 after: two windows
    split = [login(f"s{i}", split_base + timedelta(minutes=i * 0.6), "trent", "203.0.113.11") for i in range(6)]
    stream.commits[2].extend(few + split)


def _plant_root(stream: EventStream, step: timedelta, seed: int, account: str) -> None:
    base = START + 4 * step + timedelta(minutes=3)
    uses = [event(_event_id(seed, "root", i), base + timedelta(minutes=i), account, "iam.amazonaws.com",
                  "CreateAccessKey", identity="Root") for i in range(3)]
    by_service = [event(_event_id(seed, "root-svc", i), base + timedelta(minutes=i), ACCOUNTS[0],
                        "s3.amazonaws.com", "PutObject", identity="Root", invoked_by="s3.amazonaws.com")
                  for i in range(2)]
    stream.commits[4].extend(uses + by_service)
    stream.alerts.add(("root_identity_use", account, f"arn:aws:iam::{account}:root", "", _floor(base, 3600)))


def _floor(moment: datetime, seconds: int) -> datetime:
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, UTC)


def windows_of(when: datetime, event_time: EventTimeSpec) -> list[tuple[str, datetime, datetime]]:
    """Every (window kind, start, end) ``when`` falls in, as Spark's ``window()`` assigns them."""
    found = []
    epoch = when.timestamp()
    for spec in event_time.windows:
        size = duration_seconds(spec.size)
        slide = size if spec.tumbling else duration_seconds(spec.slide)
        last = epoch - epoch % slide
        start = last
        while start > epoch - size:
            found.append((spec.name, datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(start + size, UTC)))
            start -= slide
    return found


def batch_watermarks(stream: EventStream, event_time: EventTimeSpec) -> list[datetime | None]:
    """The watermark late input is dropped by in each micro-batch of a run reading one commit per batch:
    batch N uses batch N-1's watermark (``max event time of batches < N-1`` minus the delay); None: none yet."""
    delay = timedelta(seconds=duration_seconds(event_time.watermark_delay))
    marks: list[datetime | None] = []
    for n in range(len(stream.commits)):
        seen = [r["eventTime"] for c in stream.commits[:max(0, n - 1)] for r in c]
        marks.append(max(seen) - delay if seen else None)
    return marks


def expected_late(stream: EventStream, event_time: EventTimeSpec) -> set[tuple[str, str, datetime]]:
    """(eventID, window kind, window start) of every pair Spark drops (``window end <= watermark``)."""
    dropped = set()
    for commit, watermark in zip(stream.commits, batch_watermarks(stream, event_time)):
        if watermark is None:
            continue
        for row in commit:
            for kind, start, end in windows_of(row["eventTime"], event_time):
                if end <= watermark:
                    dropped.add((row["eventID"], kind, start))
    return dropped


def expected_counts(stream: EventStream, event_time: EventTimeSpec) -> Counter:
    """Window counts after the late pairs are dropped: (kind, start, account, source, name, is_error) -> n."""
    late = expected_late(stream, event_time)
    counts: Counter = Counter()
    for row in stream.events:
        for kind, start, _ in windows_of(row["eventTime"], event_time):
            if (row["eventID"], kind, start) not in late:
                counts[(kind, start, row["recipientAccountId"], row["eventSource"], row["eventName"],
                        row["errorCode"] is not None)] += 1
    return counts


def append_commits(spark, table_path, commits: list[list[dict]]) -> None:
    """Append each commit to the ``cloudtrail_events`` Delta table at ``table_path`` as one Delta commit
    of one file (the table must exist: see :func:`spark_jobs.driver.job_modules.prepare_source`)."""
    schema = spark.read.format("delta").load(str(table_path)).schema
    for rows in commits:
        dates = {row["date"] for row in rows}
        if len(dates) > 1:
            raise ValueError(f"a commit spans dates {sorted(dates)}: it would be two files, two micro-batches")
        (spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").mode("append")
         .save(str(table_path)))
