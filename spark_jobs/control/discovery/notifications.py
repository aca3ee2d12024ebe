"""File-notification mode: a bucket's new objects from its S3 event notifications on an SQS queue, no listing.

Set up on AWS: the bucket sends ``s3:ObjectCreated:*`` events for the landing's prefix to an SQS queue, and the
job runs with ``--queue-url`` (or ``$<JOB>_QUEUE_URL``). Each trigger receives up to a micro-batch of
messages (hidden from other receivers for ``visibility_seconds``); the planner
(:class:`~spark_jobs.control.discovery.planner.Discovery`) decides each message's fate, and a message leaves the
queue only when its object is durably accounted for:

- **loaded**: its file is in a manifest (written before its offset is returned); the message is deleted once the
  batch holding the file has committed;
- **skipped on purpose**: the file is already in a manifest (``duplicate``: a redelivery, or a message that came
  back after its visibility timeout) or delivered before the stream's declared start (``before_start``), or the
  message names no input file (below); the decision is recorded in the checkpoint (``discovery/skipped.json``)
  before the message is deleted;
- **everything else stays**: a file left for a later micro-batch or a later run (``deferred``) is made visible
  again at once, and whatever a killed driver had received comes back after the visibility timeout. An event
  time ahead of the run's clock changes nothing: an available-now run is bounded by how many messages the queue
  held when it started, not by event times.

So a kill -9 at any moment loses and duplicates nothing.

What is not a new input file is skipped with a count per reason: ``test_event`` (S3's ``s3:TestEvent``),
``not_created`` (another event type), ``outside_input`` (another bucket or prefix), ``folder`` (a key ending in
``/``), ``hidden`` (a name Spark's file source skips), ``pattern`` (not the job's ``pathGlobFilter``),
``unreadable`` (a body that is not an S3 event). A file whose object is gone when it is read becomes a
quarantine row (``file_gone``), not an error.

The queue is read through boto3 with the standard AWS settings (``$AWS_ENDPOINT_URL_SQS`` /
``$AWS_ENDPOINT_URL``, the region, the credential chain), like every other client here.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from urllib.parse import unquote_plus, urlparse

from spark_jobs.control.checkpoint.listing import glob_to_regex, hidden
from spark_jobs.control.discovery.listing import Candidate

UTC = dt.timezone.utc
RECEIVE_BATCH = 10  # SQS's most per ReceiveMessage


def sqs_client():
    """A boto3 SQS client with the region of :class:`~spark_jobs.model.object_store.S3Settings` (boto3 reads
    ``$AWS_ENDPOINT_URL_SQS``/``$AWS_ENDPOINT_URL`` and the credentials itself)."""
    import boto3

    from spark_jobs.model.object_store import S3Settings

    return boto3.client("sqs", region_name=S3Settings.from_environment().region)


def _event_ms(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        return None


class NotificationQueue:
    """The S3 event notifications of a landing on a bucket.

    :param queue_url: the SQS queue's URL.
    :param root: the landing (``s3a://bucket/prefix``): events for other buckets or prefixes are dropped.
    :param glob: the job's ``pathGlobFilter`` (names that do not match are dropped), or ``None``.
    :param visibility_seconds: how long a received message stays hidden (a batch commits well within it).
    :param client: a boto3 SQS client (default: one from the environment).
    """

    def __init__(self, queue_url: str, root: str, glob: str | None = None, *, visibility_seconds: int = 600,
                 client=None) -> None:
        parsed = urlparse(root)
        self.queue_url = queue_url
        self.scheme, self.bucket, self.prefix = parsed.scheme or "s3a", parsed.netloc, parsed.path.strip("/")
        self.matcher = glob_to_regex(glob) if glob else None
        self.visibility_seconds = visibility_seconds
        self.client = client or sqs_client()
        self.receipts: dict[str, list[str]] = {}
        self.message_ids: dict[str, str] = {}  # receipt -> message id (the same across redeliveries)
        self.unloadable: list[tuple[str, str]] = []  # (receipt, reason) of messages that name no input file
        self.dropped: Counter = Counter()
        self.oldest_sent_ms: int | None = None
        self.budget: int | None = None

    def prepare_available_now(self) -> None:
        """An available-now run takes at most as many messages as the queue holds now (it ends however fast more
        come): each message admitted or dropped counts against that budget; a message released for a later
        micro-batch does not."""
        self.budget = int(self.backlog().get("visible") or 0)

    def _spend(self, messages: int) -> None:
        if self.budget is not None:
            self.budget = max(0, self.budget - messages)

    def _reason(self, record: dict) -> tuple[str | None, str | None]:
        """Why an event record is not an input file (``None`` if it is one), and its key."""
        if not str(record.get("eventName", "")).startswith("ObjectCreated:"):
            return "not_created", None
        s3 = record.get("s3") or {}
        bucket = (s3.get("bucket") or {}).get("name")
        key = unquote_plus(str((s3.get("object") or {}).get("key") or ""))
        head = f"{self.prefix}/" if self.prefix else ""
        if bucket != self.bucket or not key.startswith(head):
            return "outside_input", None
        if key.endswith("/"):
            return "folder", None
        parts = key[len(head):].split("/")
        if any(hidden(part) for part in parts):
            return "hidden", None
        if self.matcher is not None and self.matcher.match(parts[-1]) is None:
            return "pattern", None
        return None, key

    def receive(self, max_files: int, layout) -> tuple[list[Candidate], dict]:
        """Up to ``max_files`` new-object events as candidates (their receipts kept in :attr:`receipts`); messages
        that hold no input file are kept in :attr:`unloadable` for :meth:`settle`, their records counted in
        :attr:`dropped`."""
        self.receipts, self.message_ids, self.unloadable, found, polls = {}, {}, [], [], 0
        self.oldest_sent_ms, self.dropped = None, Counter()
        started = time.monotonic()
        want = max_files if self.budget is None else min(max_files, self.budget)
        while len(found) < want:
            polls += 1
            reply = self.client.receive_message(QueueUrl=self.queue_url,
                                                MaxNumberOfMessages=min(RECEIVE_BATCH, want - len(found)),
                                                WaitTimeSeconds=0, VisibilityTimeout=self.visibility_seconds,
                                                AttributeNames=["SentTimestamp"])
            messages = reply.get("Messages") or []
            if not messages:
                break
            for message in messages:
                sent = int((message.get("Attributes") or {}).get("SentTimestamp") or 0) or None
                if sent is not None:
                    self.oldest_sent_ms = sent if self.oldest_sent_ms is None else min(self.oldest_sent_ms, sent)
                before = Counter(self.dropped)
                files = self._files(message, layout, sent)
                receipt = message["ReceiptHandle"]
                self.message_ids[receipt] = str(message.get("MessageId") or receipt)
                if not files:
                    reasons = self.dropped - before
                    self.unloadable.append((receipt, min(reasons) if reasons else "unreadable"))
                for candidate in files:
                    found.append(candidate)
                    self.receipts.setdefault(candidate.key, []).append(message["ReceiptHandle"])
        stats = {"mode": "notifications", "received": len(found), "polls": polls, "requests": polls,
                 "dropped": dict(self.dropped), "seconds": round(time.monotonic() - started, 3)}
        return found, stats

    def _files(self, message: dict, layout, sent_ms: int | None) -> list[Candidate]:
        try:
            body = json.loads(message.get("Body") or "")
            if isinstance(body, dict) and body.get("Type") == "Notification":  # through SNS
                body = json.loads(body.get("Message") or "")
        except ValueError:
            self.dropped["unreadable"] += 1
            return []
        if not isinstance(body, dict):
            self.dropped["unreadable"] += 1
            return []
        if body.get("Event") == "s3:TestEvent":
            self.dropped["test_event"] += 1
            return []
        records = body.get("Records")
        if not isinstance(records, list):
            self.dropped["unreadable"] += 1
            return []
        files = []
        for record in records:
            reason, key = self._reason(record if isinstance(record, dict) else {})
            if reason is not None:
                self.dropped[reason] += 1
                continue
            name = f"{self.scheme}://{self.bucket}/{key}"
            size = int(((record.get("s3") or {}).get("object") or {}).get("size") or 0)
            moment = _event_ms(record.get("eventTime")) or sent_ms or 0
            delivered = layout.delivery_time(name) if layout is not None else None
            files.append(Candidate(name, size, moment, moment if delivered is None else
                                   int(delivered.timestamp() * 1000), delivered is not None))
        return files

    def settle(self, admitted: set[str], skipped: dict[str, str], record) -> dict:
        """Each message received by the last :meth:`receive`, after admission: the messages of ``admitted`` files
        stay hidden (deleted when their batch commits); those of ``skipped`` files (key -> reason) and those that
        name no input file are passed to ``record`` (a list of ``(message_id, reason, key)``, which makes the
        decision durable) and then deleted; every other message is made visible again for a later micro-batch
        or run. Returns the messages by fate: ``deleted`` per reason, ``deferred``."""
        decided = [(receipt, reason, None) for receipt, reason in self.unloadable]
        decided += [(r, reason, key) for key, reason in skipped.items() for r in self.receipts.get(key, ())]
        deferred = [r for key, receipts in self.receipts.items() if key not in admitted and key not in skipped
                    for r in receipts]
        if decided:
            record([(self.message_ids.get(r, r), reason, key) for r, reason, key in decided])
            self.delete([r for r, _reason, _key in decided])
        self._spend(len(decided) + sum(len(self.receipts.get(key, ())) for key in admitted))
        for receipt in deferred:
            try:
                self.client.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=receipt,
                                                      VisibilityTimeout=0)
            except Exception:  # noqa: BLE001 - it comes back after its visibility timeout anyway
                pass
        return {"deleted": dict(Counter(reason for _r, reason, _k in decided)), "deferred": len(deferred)}

    def delete(self, receipts: list[str]) -> None:
        """Delete messages by receipt, ten per request; a receipt gone stale (the message came back and was
        received again) fails alone, harmlessly: the message is dropped as seen when it comes back."""
        for start in range(0, len(receipts), RECEIVE_BATCH):
            chunk = receipts[start:start + RECEIVE_BATCH]
            self.client.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(chunk)])

    def backlog(self) -> dict:
        """The queue's approximate backlog: messages waiting, messages received and not deleted yet, and how
        long the oldest message of the last receive had waited."""
        attributes = self.client.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessages",
                                                     "ApproximateNumberOfMessagesNotVisible"]).get("Attributes", {})
        now_ms = int(time.time() * 1000)
        return {"queue_url": self.queue_url, "visible": int(attributes.get("ApproximateNumberOfMessages", 0)),
                "in_flight": int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
                "oldest_message_age_seconds": None if self.oldest_sent_ms is None
                else round((now_ms - self.oldest_sent_ms) / 1000, 1)}
