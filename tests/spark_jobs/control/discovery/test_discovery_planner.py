"""Discovery without Spark: which files each offset stands for, the window per stem, restarts and the move from
Spark's file source (spark_jobs/control/discovery/planner.py, state.py, listing.py)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from spark_jobs.control.discovery.listing import Candidate, LocalStore
from spark_jobs.control.discovery.planner import Discovery, offset
from spark_jobs.control.discovery.settings import discovery_settings
from spark_jobs.control.discovery.state import DiscoveryLog
from spark_jobs.control.checkpoint.store import Location
from spark_jobs.registry import get_job

JOB = get_job("cloudtrail_etl")
UTC = dt.timezone.utc
STEM = "AWSLogs/111122223333/CloudTrail/us-east-1"
NOW = dt.datetime(2026, 11, 27, tzinfo=UTC)


def deliver(root: Path, moment: dt.datetime, stem: str = STEM, tag: str = "x") -> str:
    """A CloudTrail-named file delivered at ``moment`` under ``stem``; returns its key as the source names it."""
    region = stem.rsplit("/", 1)[-1]
    path = root / stem / f"{moment:%Y/%m/%d}" / f"111122223333_CloudTrail_{region}_{moment:%Y%m%dT%H%MZ}_{tag}.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{}")
    return f"file:{path}"


class Recording(LocalStore):
    """A local store that records the folders it lists."""

    listed: list[str] = []

    def list_folder(self, folder, start_after=None):
        Recording.listed.append(folder)
        return super().list_folder(folder, start_after)


def discovery(root: Path, checkpoint: Path, **given) -> Discovery:
    options = {**JOB.file_source_options, "maxFilesPerTrigger": str(given.pop("max_files", 1000)),
               "latestFirst": str(given.pop("latest_first", False)).lower()}
    settings = discovery_settings(JOB, str(root), str(checkpoint), options, **given)
    return Discovery(settings, store_factory=Recording, clock=lambda: dt.datetime(2026, 11, 27, tzinfo=UTC))


def drain(found: Discovery, start: dict) -> tuple[dict, list[list[str]]]:
    """Call ``latest`` until nothing new, committing each offset as Spark would; the keys of each batch."""
    batches = []
    while True:
        end = found.latest(start, found.settings.max_files)
        if end == start:
            return start, batches
        batches.append([f.key for f in found.files(start, end)])
        start = end


@pytest.fixture()
def landing(tmp_path) -> tuple[Path, Path]:
    return tmp_path / "landing", tmp_path / "checkpoint"


def test_files_are_admitted_once_oldest_first_a_micro_batch_at_a_time(landing):
    root, checkpoint = landing
    base = dt.datetime(2024, 3, 1, tzinfo=UTC)
    keys = [deliver(root, base + dt.timedelta(minutes=5 * i), tag=str(i)) for i in range(7)]
    end, batches = drain(discovery(root, checkpoint, max_files=3), offset(0))
    assert batches == [keys[0:3], keys[3:6], keys[6:7]]
    assert end == offset(3)
    more = deliver(root, base + dt.timedelta(hours=2), tag="late-but-inside")
    assert drain(discovery(root, checkpoint, max_files=3), end)[1] == [[more]]


def test_a_manifest_made_before_a_crash_is_the_offset_again(landing):
    root, checkpoint = landing
    base = dt.datetime(2024, 3, 1, tzinfo=UTC)
    first = [deliver(root, base + dt.timedelta(minutes=i), tag=str(i)) for i in range(2)]
    end = discovery(root, checkpoint).latest(offset(0), None)  # Spark died before logging this offset
    deliver(root, base + dt.timedelta(minutes=30), tag="after")
    again = discovery(root, checkpoint)
    assert again.latest(offset(0), None) == end
    assert [f.key for f in again.files(offset(0), end)] == first


def test_a_known_stem_is_listed_from_its_window_a_new_stem_whole(landing):
    root, checkpoint = landing
    history = dt.datetime(2023, 1, 1, tzinfo=UTC)
    for day in range(0, 400, 7):  # a year of history, then today's files
        deliver(root, history + dt.timedelta(days=day), tag=f"h{day}")
    now = history + dt.timedelta(days=400)
    deliver(root, now, tag="now")
    end, _ = drain(discovery(root, checkpoint), offset(0))
    Recording.listed = []
    fresh = deliver(root, now + dt.timedelta(hours=1), tag="fresh")
    old = deliver(root, history + dt.timedelta(days=1), tag="late")  # behind the stem's one-day window
    new_stem = [deliver(root, history + dt.timedelta(days=d), "AWSLogs/111122223333/CloudTrail/eu-west-1", f"e{d}")
                for d in (3, 200)]
    found = discovery(root, checkpoint)
    assert drain(found, end)[1] == [sorted(new_stem, key=lambda k: k.split("_")[-2]) + [fresh]]
    days = sorted(f for f in set(Recording.listed) if f.startswith(f"{STEM}/") and f.count("/") == 6)
    # the window's day folders only (the cut's day, a day of slack before it, today): not the year behind it
    assert days == [f"{STEM}/{now - dt.timedelta(days=1):%Y/%m/%d}", f"{STEM}/{now:%Y/%m/%d}"]
    assert old not in json.dumps([f.row() for f in found.files(end, offset(end["manifest"] + 1))])
    assert found.log.status()["skipped_old"] >= 1


def test_a_file_list_spanning_more_than_the_lookback_is_admitted_once_and_the_run_ends(landing):
    root, checkpoint = landing
    ages = (5, 0)  # days before now: the older one falls behind its stem's cut once the newer one is admitted
    keys = [deliver(root, NOW - dt.timedelta(days=d), tag=f"d{d}") for d in ages]
    listed = root.parent / "missed.json"
    listed.write_text(json.dumps([Candidate(k, 2, 0, int((NOW - dt.timedelta(days=d)).timestamp() * 1000), True).row()
                                  for k, d in zip(keys, ages)]))
    found = discovery(root, checkpoint, max_files=1, file_list=str(listed))
    start, batches = offset(0), []
    for _ in range(4):  # an endless run would admit the older file again at every trigger
        end = found.latest(start, found.settings.max_files)
        if end == start:
            break
        batches.append([f.key for f in found.files(start, end)])
        start = end
    assert batches == [[keys[0]], [keys[1]]]


def test_the_state_holds_the_window_not_the_history(landing):
    root, checkpoint = landing
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    for day in range(60):  # two months, four files a day, ten a micro-batch
        for hour in (0, 6, 12, 18):
            deliver(root, base + dt.timedelta(days=day, hours=hour), tag=f"{day}-{hour}")
    end, batches = drain(discovery(root, checkpoint, max_files=10), offset(0))
    assert sum(len(b) for b in batches) == 240 and end == offset(24)
    log = DiscoveryLog(Location.of(str(checkpoint)))
    assert log.snapshot_ids() == [0, 10, 20]
    found = discovery(root, checkpoint)
    found.committed(end)
    window = log.window(JOB.source.layout)
    assert window.admitted == 240
    assert len(window.seen) <= 8  # files of the last day (the one-day lookback), not the 240
    snapshot = json.loads((checkpoint / "discovery" / "snapshots" / "20.json").read_text())
    assert len(snapshot["seen"]) <= 8


def test_start_at_skips_the_history_without_listing_it(landing):
    root, checkpoint = landing
    for year in (2021, 2022, 2023):
        deliver(root, dt.datetime(year, 6, 1, tzinfo=UTC), tag=str(year))
    now = deliver(root, dt.datetime(2024, 3, 1, 12, tzinfo=UTC), tag="now")
    Recording.listed = []
    found = discovery(root, checkpoint, start_at=dt.datetime(2024, 3, 1, tzinfo=UTC))
    assert drain(found, offset(0))[1] == [[now]]
    assert not [f for f in Recording.listed if "/2021" in f or "/2022" in f or "/2023/" in f]


def test_newest_first_keeps_the_older_files_waiting_not_forgotten(landing):
    root, checkpoint = landing
    base = dt.datetime(2024, 3, 1, tzinfo=UTC)
    keys = [deliver(root, base + dt.timedelta(days=d), tag=str(d)) for d in range(4)]
    batches = drain(discovery(root, checkpoint, max_files=1, latest_first=True), offset(0))[1]
    batches_flat = [b[0] for b in batches]
    # newest first; after the first, the older files stay waiting: nothing falls behind the cut unread
    assert batches_flat[0] == keys[-1] and sorted(batches_flat) == sorted(keys)


def test_an_available_now_run_ignores_what_lands_after_it_began(landing):
    root, checkpoint = landing
    first = deliver(root, dt.datetime(2024, 3, 1, tzinfo=UTC), tag="first")
    found = discovery(root, checkpoint)
    found.until_mtime_ms = int(Path(first.removeprefix("file:")).stat().st_mtime * 1000)
    later = Path(deliver(root, dt.datetime(2024, 3, 1, 0, 5, tzinfo=UTC), tag="later").removeprefix("file:"))
    stamp = later.stat().st_mtime + 5
    import os

    os.utime(later, (stamp, stamp))
    assert drain(found, offset(0))[1] == [[first]]


def _legacy_log(checkpoint: Path, entries: list[tuple[str, int]]) -> None:
    """Spark's file-source log as Spark writes it: one file per batch, URI-encoded paths."""
    folder = checkpoint / "sources" / "0"
    folder.mkdir(parents=True)
    for batch in sorted({b for _, b in entries}):
        lines = ["v1"] + [json.dumps({"path": "file://" + key.removeprefix("file:").replace(" ", "%20"),
                                      "timestamp": 1_700_000_000_000, "batchId": b}) for key, b in entries if b == batch]
        (folder / str(batch)).write_text("\n".join(lines) + "\n")


def test_a_file_source_checkpoint_is_taken_over_without_a_file_lost_or_read_twice(landing):
    root, checkpoint = landing
    base = dt.datetime(2024, 3, 1, tzinfo=UTC)
    old = [deliver(root, base + dt.timedelta(minutes=i), tag=f"old {i}") for i in range(4)]
    _legacy_log(checkpoint, [(old[0], 0), (old[1], 0), (old[2], 1), (old[3], 2)])
    new = deliver(root, base + dt.timedelta(minutes=30), tag="new")
    found = discovery(root, checkpoint)
    # Spark re-runs batch 2, planned by the file source but not committed: its files come from that log
    assert [f.key for f in found.files({"logOffset": 1}, {"logOffset": 2})] == [old[3]]
    end = found.latest({"logOffset": 2}, None)
    assert end == offset(1)
    assert [f.key for f in found.files({"logOffset": 2}, end)] == [new]
    window = DiscoveryLog(Location.of(str(checkpoint))).window(JOB.source.layout)
    assert window.migrated["log_offset"] == 2 and window.migrated["files"] == 4 and window.admitted == 5
    assert discovery(root, checkpoint).latest(end, None) == end  # nothing new after the move


def test_copies_of_old_logs_are_read_whatever_their_modification_times(landing):
    """Spark's file source forgot files whose modification time lay more than ``maxFileAge`` behind the newest it
    had seen: historical logs copied with their S3 times were skipped without a word. Discovery dates files by
    their keys: a backfill resumed after more copies landed reads them."""
    import os
    import time

    root, checkpoint = landing
    moment = dt.datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
    first = deliver(root, moment, tag="a")
    end, batches = drain(discovery(root, checkpoint), offset(0))
    copies = [deliver(root, moment, tag=tag) for tag in ("b", "c")]
    thirty_days_ago = time.time() - 30 * 24 * 3600
    for key in copies:
        os.utime(key.removeprefix("file:"), (thirty_days_ago, thirty_days_ago))
    assert batches == [[first]] and drain(discovery(root, checkpoint), end)[1] == [copies]


def test_a_jobs_health_says_how_its_stream_finds_files_and_the_last_reconcile(landing, tmp_path):
    """What discovery knows reaches check_job (the health page and status read it): the window, the last look, the
    last reconcile."""
    from spark_jobs.control.monitoring.health import check_job

    root, _ = landing
    lake = tmp_path / "lake"
    checkpoint = lake / "checkpoints" / JOB.name
    first = deliver(root, dt.datetime(2024, 3, 1, 8, tzinfo=UTC), tag="a")
    end = discovery(root, checkpoint).latest(offset(0), None)
    for folder, line in (("offsets", json.dumps(end)), ("commits", "")):  # batch 0 planned and committed, as Spark
        (checkpoint / folder).mkdir(parents=True)
        (checkpoint / folder / "0").write_text("v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0})
                                               + ("\n" + line if line else "\n{}") + "\n")
    (checkpoint / "metadata").write_text(json.dumps({"id": "11111111-2222-3333-4444-555555555555"}))
    control = lake / "control" / JOB.name
    control.mkdir(parents=True)
    (control / "reconcile.json").write_text(json.dumps({"at": "2026-11-27T03:00:00+00:00", "listed": 9, "missed": 1}))
    health = check_job(JOB, str(lake), str(root), now=dt.datetime(2026, 11, 27, 4, tzinfo=UTC))
    assert health.report["discovery"]["window"]["stems"] == 1 and health.backlog_files == 0
    assert health.discovery.startswith("listing; window: 1 stems, 1 files remembered, newest delivery "
                                       "2024-03-01T08:00:00+00:00")
    assert health.discovery.endswith("last reconcile 2026-11-27T03:00:00+00:00: 9 listed, 1 missed and ingested")
    assert first.endswith("_a.json.gz")


def test_the_backlog_says_how_many_files_wait_and_how_long_the_oldest_has(landing):
    import os

    from spark_jobs.control.discovery.backlog import discovery_backlog, discovery_text

    root, checkpoint = landing
    base = dt.datetime(2024, 3, 1, tzinfo=UTC)
    keys = [deliver(root, base + dt.timedelta(minutes=5 * i), tag=str(i)) for i in range(3)]
    landed = dt.datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
    for i, key in enumerate(keys):  # landed 3:00:00, 3:00:10, 3:00:20
        stamp = (landed + dt.timedelta(seconds=10 * i)).timestamp()
        os.utime(key.removeprefix("file:"), (stamp, stamp))
    settings = discovery(root, checkpoint).settings
    now = landed + dt.timedelta(seconds=95)
    backlog = discovery_backlog(settings, None, None, now)
    assert (backlog.waiting, backlog.in_flight, backlog.ingested, backlog.oldest_waiting_age_seconds) == (3, 0, 0, 95.0)
    assert "the oldest waiting file has waited 95 s" in discovery_text(backlog.to_dict())
    end, _ = drain(discovery(root, checkpoint), offset(0))  # all admitted and committed: nothing waits, no age
    after = discovery_backlog(settings, end["manifest"], end["manifest"], now)
    assert (after.waiting, after.in_flight, after.ingested, after.oldest_waiting_age_seconds) == (0, 0, 3, 0.0)
    assert "waited" not in discovery_text(after.to_dict())
