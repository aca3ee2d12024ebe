"""Plant a job's state in a lake without running it: checkpoint files, the driver's lease, the
supervisor's state and progress rows, in the formats Spark, the runner and the supervisor write.

A real run is not needed to look stalled or lagging: the health checks read only these files (and
the landing folder). The lease names a live process of this host (the test's own by default), so
every reader on the host (an Airflow API server, ``python -m spark_jobs status``) sees a live driver.
"""

from __future__ import annotations

import json
import os
import socket
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

from spark_jobs.control.checkpoint.lease import _process_start
from spark_jobs.control.monitoring.progress import append_rows, progress_row
from spark_jobs.registry import get_job

JOB = get_job("cloudtrail_etl")
QUERY_ID = "5c1f0a8e-7d7b-4a51-9c55-0d3c2b6f9e11"
RUN_ID = "0b8f4a52-1e62-4c0e-a3f1-6f0f3d1a2b7c"


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")


class PlantedLake:
    """A lake and landing folder under ``root`` whose job state the test writes by hand.

    :param root: an empty folder.
    """

    def __init__(self, root: Path, job=JOB) -> None:
        self.root = Path(root)
        self.job = job
        self.lake = self.root / "lake"
        self.landing = self.root / "landing"
        self.checkpoint = self.lake / "checkpoints" / job.name
        self.control = self.lake / "control" / job.name
        self.landing.mkdir(parents=True, exist_ok=True)
        self._files = 0

    def new_files(self, count: int) -> list[Path]:
        """``count`` landed files (empty deliveries: the listing counts them like any other)."""
        made = []
        for _ in range(count):
            self._files += 1
            path = self.landing / f"123456789012_CloudTrail_us-east-1_20240301T{self._files:04d}Z_x.json.gz"
            path.write_bytes(b"")
            made.append(path)
        return made

    def commit_batches(self, batches: int, files_per_batch: int, committed_ago: float = 0.0) -> None:
        """A checkpoint whose batches ``0..batches-1`` each read ``files_per_batch`` new files and were
        committed, the last one ``committed_ago`` seconds ago."""
        for folder in ("offsets", "commits", "sources/0"):
            (self.checkpoint / folder).mkdir(parents=True, exist_ok=True)
        (self.checkpoint / "metadata").write_text(json.dumps({"id": QUERY_ID}) + "\n")
        start = len(list((self.checkpoint / "commits").iterdir()))
        now = time.time()
        for batch in range(start, start + batches):
            files = self.new_files(files_per_batch)
            (self.checkpoint / "sources" / "0" / str(batch)).write_text("v1\n" + "\n".join(
                json.dumps({"path": f.as_uri(), "timestamp": int(f.stat().st_mtime * 1000), "batchId": batch})
                for f in files))
            meta = {"batchWatermarkMs": 0, "batchTimestampMs": int(now * 1000), "conf": {}}
            (self.checkpoint / "offsets" / str(batch)).write_text(
                "v1\n" + json.dumps(meta) + "\n" + json.dumps({"logOffset": batch}))
            commit = self.checkpoint / "commits" / str(batch)
            commit.write_text("v1\n" + json.dumps({"nextBatchWatermarkMs": 0}))
            os.utime(commit, (now - committed_ago, now - committed_ago))

    def hold_lease(self, started_ago: float = 0.0, pid: int | None = None, ttl: float = 3600.0,
                   released: bool = False, trigger: str = "processing-time:10s", version: str | None = None) -> None:
        """A lease generation held by ``pid`` (default: this test process, which is alive), a driver of
        ``trigger`` (the continuous one's by default) that names its code ``version`` when given."""
        pid = pid or os.getpid()
        lease_dir = self.control / "lease"
        lease_dir.mkdir(parents=True, exist_ok=True)
        generation = len(list(lease_dir.glob("*.json"))) + 1
        now = datetime.now(timezone.utc)
        record = {"generation": generation, "owner": f"planted{generation}", "job": self.job.name, "pid": pid,
                  "host": socket.gethostname(), "started_at": _iso(now - timedelta(seconds=started_ago)),
                  "heartbeat_at": _iso(now), "ttl_seconds": ttl, "released": released,
                  "details": {"query_id": QUERY_ID, "run_id": RUN_ID, "spark_ui": "http://127.0.0.1:4040",
                              "trigger": trigger, **({"version": version} if version else {})},
                  "pid_start": _process_start(pid)}
        (lease_dir / f"{generation:010d}.json").write_text(json.dumps(record))

    def release_lease(self) -> None:
        self.hold_lease(released=True)

    def supervisor(self, **fields) -> dict:
        """``supervisor.json`` as the supervisor writes it, with ``fields`` over a running state."""
        state = {"job": self.job.name, "state": "running", "consecutive_failures": 0, "is_backing_off": False,
                 "next_attempt_at": None, "restarts_in_window": 0, "window_seconds": 1800.0, "max_restarts": 5,
                 "last_reason": None, "last_exit_code": None, "driver_pid": os.getpid(),
                 "updated_at": _iso(datetime.now(timezone.utc)), "restarts_total": 0, **fields}
        self.control.mkdir(parents=True, exist_ok=True)
        (self.control / "supervisor.json").write_text(json.dumps(state))
        return state

    def progress(self, rates: list[tuple[float, float]], first_batch: int = 0, rows: dict[str, int] | None = None,
                 backlog: list[int] | None = None, seconds_apart: float = 10.0) -> list[dict]:
        """Append one progress row per (input rate, processing rate), as the recorder writes them
        (built by the recorder's own :func:`progress_row` from a progress object of these numbers)."""
        start = datetime.now(timezone.utc) - timedelta(seconds=seconds_apart * len(rates))
        made = []
        for index, (came, went) in enumerate(rates):
            batch = first_batch + index
            carried = dict(rows or {"cloudtrail_events": 100 + batch, "cloudtrail_quarantine": batch % 3})
            files = 4
            progress = SimpleNamespace(
                id=QUERY_ID, runId=RUN_ID, name=self.job.name, batchId=batch, batchDuration=int(files / went * 1000),
                timestamp=_iso(start + timedelta(seconds=seconds_apart * index)).replace("+00:00", "Z"),
                durationMs={"addBatch": int(files / went * 800), "latestOffset": 40 + batch, "queryPlanning": 25,
                            "walCommit": 30, "commitOffsets": 20, "triggerExecution": int(files / went * 1000)},
                eventTime={}, stateOperators=[], numInputRows=files, inputRowsPerSecond=came,
                processedRowsPerSecond=went,
                sources=[SimpleNamespace(description="FileStreamSource[file:/landing]", startOffset=str(batch - 1),
                                         endOffset=str(batch), latestOffset=str(batch), numInputRows=files,
                                         inputRowsPerSecond=came, processedRowsPerSecond=went, metrics={})],
                sink=SimpleNamespace(description="ForeachBatchSink", numOutputRows=-1, metrics={}))
            made.append(progress_row(progress, job=self.job, stream=self.job.name, rows=carried,
                                     rows_inserted=carried, input_files=files,
                                     backlog_files=backlog[index] if backlog else 0))
        append_rows(self.lake, made)
        return made

    def quarantined(self, reasons: dict[str, int]) -> None:
        """One Delta commit to the job's quarantine table of ``n`` records per reason (the columns of its key and
        ``detail``; the health checks read ``reason`` only)."""
        import pyarrow as pa
        from deltalake import write_deltalake

        [table] = self.job.quarantine_tables
        reasons_of = [reason for reason, n in reasons.items() for _ in range(n)]
        start = getattr(self, "_quarantined", 0)
        self._quarantined = start + len(reasons_of)
        write_deltalake(str(self.lake / "tables" / table), pa.table({
            "source_file": [f"s3://bucket/file{start + i}.json.gz" for i in range(len(reasons_of))],
            "position": pa.array(range(start, start + len(reasons_of)), pa.int64()),
            "reason": reasons_of, "detail": [f"the detail of {r}" for r in reasons_of]}), mode="append")

    def discovering(self, committed_ago: float, read_landed_ago: float, waiting: int, waiting_landed_ago: float) -> None:
        """A stream reading through discovery (the landing source's manifests, not Spark's file source): batch 0
        read two files that landed ``read_landed_ago`` and 10 s later, and was committed ``committed_ago`` seconds
        ago; then ``waiting`` files landed ``waiting_landed_ago`` seconds ago (10 s apart) and wait."""
        from spark_jobs.control.discovery.planner import Discovery, offset
        from spark_jobs.control.discovery.settings import discovery_settings

        now, base = time.time(), datetime(2024, 3, 1, tzinfo=timezone.utc)

        def deliver(moment: datetime, landed: float) -> None:
            path = (self.landing / "AWSLogs" / "111122223333" / "CloudTrail" / "us-east-1" / f"{moment:%Y/%m/%d}"
                    / f"111122223333_CloudTrail_us-east-1_{moment:%Y%m%dT%H%MZ}_x.json.gz")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"{}")
            os.utime(path, (landed, landed))

        for index in range(2):
            deliver(base + timedelta(minutes=5 * index), now - read_landed_ago + 10 * index)
        settings = discovery_settings(self.job, str(self.landing), str(self.checkpoint),
                                      dict(self.job.file_source_options))
        end = Discovery(settings).latest(offset(0), None)
        for folder, line in (("offsets", json.dumps(end)), ("commits", "{}")):  # batch 0 planned and committed
            (self.checkpoint / folder).mkdir(parents=True, exist_ok=True)
            (self.checkpoint / folder / "0").write_text(
                "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0}) + "\n" + line + "\n")
        (self.checkpoint / "metadata").write_text(json.dumps({"id": QUERY_ID}) + "\n")
        os.utime(self.checkpoint / "commits" / "0", (now - committed_ago, now - committed_ago))
        for index in range(waiting):
            deliver(base + timedelta(hours=1, minutes=5 * index), now - waiting_landed_ago + 10 * index)

    # -- the states --------------------------------------------------------------------------------

    def stalled(self) -> None:
        """A live driver that committed nothing for 20 minutes while 6 files wait (limit 15 min)."""
        self.commit_batches(3, files_per_batch=2, committed_ago=20 * 60)
        self.new_files(6)
        self.hold_lease(started_ago=30 * 60)
        self.supervisor(restarts_in_window=1, restarts_total=1, last_reason="the driver was killed by SIGKILL")
        self.event("restart", reason="the driver was killed by SIGKILL", ago=25 * 60)
        self.quarantined({"invalid_json": 3, "bad_event_time": 1})

    def event(self, kind: str, reason: str, ago: float, **fields) -> dict:
        """One line of ``events.jsonl`` as the supervisor appends it, ``ago`` seconds ago."""
        from spark_jobs.control.supervision.state import append_event, utc_iso

        return append_event(str(self.control), {"time": utc_iso(datetime.now(timezone.utc) - timedelta(seconds=ago)),
                                                "job": self.job.name, "kind": kind, "reason": reason,
                                                "outcome": "restarting", **fields})

    def lagging(self, healthy_before: int = 0) -> None:
        """A live driver that commits, but whose last 6 batches processed rows slower than they came,
        with 40 files waiting (after ``healthy_before`` batches that kept up)."""
        self.commit_batches(6 + healthy_before, files_per_batch=4, committed_ago=2)
        self.new_files(40)
        self.hold_lease(started_ago=120 + 10 * healthy_before)
        self.supervisor()
        kept_up = [(0.4 + 0.02 * i, 3.0 - 0.04 * i) for i in range(healthy_before)]
        self.progress(kept_up + [(5.0, 2.0), (5.5, 2.2), (6.0, 2.1), (6.5, 1.9), (7.0, 2.0), (7.5, 1.8)],
                      backlog=[i % 2 for i in range(healthy_before)] + [12, 18, 24, 30, 35, 40])

    def healthy(self) -> None:
        """A live driver keeping up: batches processed faster than rows arrived, nothing waits."""
        self.commit_batches(4, files_per_batch=4, committed_ago=1)
        self.hold_lease(started_ago=60)
        self.supervisor()
        self.progress([(0.4, 3.0), (0.4, 3.2), (0.4, 2.9), (0.4, 3.1)], backlog=[0, 0, 0, 0])

    def deploying(self) -> None:
        """Healthy, on version v3 on probation (from v2, handed over 40 s ago after batch 1: batches 2 and 3 since),
        after a rollout to v4 that was rolled back; written by the rollout's own functions."""
        from spark_jobs.control.rollout.request import request_rollout, update_rollout

        self.healthy()
        self.hold_lease(started_ago=40, version="v3")
        control = str(self.control)
        bad = request_rollout(control, self.job.name, "v4", "v2", "alice", "a new field")
        for phase in ("preflight", "handover", "probation"):
            update_rollout(control, bad, phase)
        update_rollout(control, bad, "rolled_back", ended_at="2026-12-07T10:04:37.000+00:00",
                       outcome="version v4 failed on probation: the driver exited with status 1; v2 starts again")
        good = request_rollout(control, self.job.name, "v3", "v2", "bob", "parser fix")
        handed_over = _iso(datetime.now(timezone.utc) - timedelta(seconds=40))
        update_rollout(control, good, "probation", batch_before=1, previous_version="v2", handed_over_at=handed_over)

    def catch_up(self) -> None:
        """The stalled driver committed again and nothing waits any more."""
        self.commit_batches(2, files_per_batch=4, committed_ago=0)
        waiting = set(self.landing.iterdir()) - self._ingested()
        for path in waiting:
            path.unlink()

    def _ingested(self) -> set[Path]:
        found = set()
        for log in (self.checkpoint / "sources" / "0").iterdir():
            for line in log.read_text().splitlines()[1:]:
                found.add(Path(json.loads(line)["path"].removeprefix("file://")))
        return found
