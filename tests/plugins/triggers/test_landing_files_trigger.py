"""The landing-folder watcher of a data-driven catch-up: its decision at each poll, and the real trigger on a real
folder in an asyncio loop (no Airflow started).

"An hour with no files gives no run" is shown here without waiting an hour: the decision is a pure function of
two listings, so 360 polls of an idle folder (an hour at the registry's 10 s) are run against it and none fires;
the real-Airflow module (tests/dags/test_catchup_on_data.py) adds an idle window with a scheduler and triggerer.
"""

from __future__ import annotations

import asyncio
import gzip
import time

import pytest

from spark_jobs.control.catchup.landing_watch import LandingWatch, landing_names
from spark_jobs.model.catchup import CatchupTrigger
from spark_jobs.model.errors import RegistryError
from spark_jobs.model.streams import FileSource, KafkaSource
from spark_jobs.registry import JOBS
from streaming.triggers.landing_files import LandingFilesTrigger

JOB = "cloudtrail_etl"
FOLDER = "AWSLogs/123456789012/CloudTrail/us-east-1/2026/11/25"


def land(root, name: str) -> None:
    path = root / FOLDER / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(b'{"Records": []}'))


def test_the_first_listing_is_the_baseline_and_new_names_fire_once():
    watch = LandingWatch()
    assert watch.poll(frozenset({"a", "b"})) is None  # files there before the watcher started: the cron's
    assert watch.poll(frozenset({"a", "b"})) is None
    assert watch.poll(frozenset({"a", "b", "d", "c"})) == {"new_files": 2, "first": "c", "last": "d", "listed": 4}
    assert watch.poll(frozenset({"a", "b", "c", "d"})) is None  # the same files again: nothing new


def test_an_hour_of_an_idle_folder_fires_nothing():
    watch = LandingWatch()
    listing = frozenset(f"file-{i}" for i in range(500))
    fired = [watch.poll(listing) for _ in range(360)]  # an hour of polls every 10 s
    assert fired == [None] * 360 and watch.polls == 360


def test_a_burst_within_one_poll_is_one_event():
    watch = LandingWatch(seen=frozenset())
    burst = frozenset(f"f{i:02d}" for i in range(20))
    assert watch.poll(burst) == {"new_files": 20, "first": "f00", "last": "f19", "listed": 20}


def test_a_trickle_of_17_deliveries_in_a_minute_is_a_few_events_and_every_file_is_told():
    # one delivery every 3.5 s for a minute, a listing every 2 s (the registry's), at most one event per 15 s
    watch = LandingWatch(seen=frozenset(), coalesce_seconds=15)
    landed_at = [3.5 * i for i in range(17)]
    events = []
    for poll in range(0, 80, 2):  # 80 s of polls: the last event comes 15 s after the one before it
        listed = frozenset(f"f{i:02d}" for i, at in enumerate(landed_at) if at <= poll)
        fired = watch.poll(listed, now=float(poll))
        if fired is not None:
            events.append((poll, fired["new_files"]))
    assert events == [(0, 1), (16, 4), (32, 5), (48, 4), (64, 3)]
    assert sum(n for _, n in events) == 17


def test_a_landing_after_a_quiet_spell_fires_at_its_first_poll():
    watch = LandingWatch(seen=frozenset(), coalesce_seconds=15)
    assert watch.poll(frozenset({"a"}), now=0.0)["new_files"] == 1
    assert watch.poll(frozenset({"a"}), now=20.0) is None
    assert watch.poll(frozenset({"a", "b"}), now=22.0) == {"new_files": 1, "first": "b", "last": "b", "listed": 2}


def test_files_that_land_while_the_continuous_driver_owns_the_job_fire_nothing():
    watch = LandingWatch(seen=frozenset(), coalesce_seconds=15)
    owner = "cloudtrail_etl is owned by the continuous driver pid 42 on host h since t; its files are ingested there"
    assert [watch.poll(frozenset(f"f{i}" for i in range(n)), now=2.0 * n, owned_by=owner) for n in range(1, 18)] \
        == [None] * 17
    # the driver stopped: only what lands from then on is news
    assert watch.poll(frozenset([*(f"f{i}" for i in range(17)), "new"]), now=40.0) == {
        "new_files": 1, "first": "new", "last": "new", "listed": 18}


def test_the_listing_is_the_streams_own_files_in_progress_and_hidden_ones_fire_nothing(tmp_path):
    assert landing_names(JOB, str(tmp_path / "not_there")) == frozenset()
    land(tmp_path, "123456789012_CloudTrail_us-east-1_20261125T0100Z_a.json.gz")
    land(tmp_path, "123456789012_CloudTrail_us-east-1_20261125T0100Z_b.json.gz.tmp")  # being written
    land(tmp_path, "_SUCCESS")
    land(tmp_path, ".c.json.gz")
    assert [name.rsplit("/", 1)[-1] for name in sorted(landing_names(JOB, str(tmp_path)))] == [
        "123456789012_CloudTrail_us-east-1_20261125T0100Z_a.json.gz"]


def test_the_trigger_fires_when_files_land_without_blocking_its_loop(tmp_path):
    """The real trigger in an event loop: no event while the folder is idle, one for files that land, and the
    loop's other work keeps its pace while listings run (they run in a thread)."""
    land(tmp_path, "123456789012_CloudTrail_us-east-1_20261125T0000Z_old.json.gz")
    trigger = LandingFilesTrigger(job=JOB, input_path=str(tmp_path), poll_seconds=0.2)
    assert trigger.serialize() == ("streaming.triggers.landing_files.LandingFilesTrigger",
                                   {"job": JOB, "input_path": str(tmp_path), "poll_seconds": 0.2,
                                    "coalesce_seconds": 0.0})

    async def scenario():
        events = trigger.run()
        idle = asyncio.ensure_future(events.__anext__())
        ticks, started = 0, time.monotonic()
        while time.monotonic() - started < 1.5:  # seven polls of an idle folder
            await asyncio.sleep(0.05)
            ticks += 1
        assert not idle.done()
        assert ticks >= 20  # the loop was never held up by a listing
        for i in range(3):
            land(tmp_path, f"123456789012_CloudTrail_us-east-1_20261125T0100Z_{i}.json.gz")
        event = await asyncio.wait_for(idle, timeout=10)
        await events.aclose()
        return event.payload

    payload = asyncio.run(scenario())
    assert (payload["job"], payload["folder"], payload["new_files"], payload["listed"]) == (JOB, str(tmp_path), 3, 4)
    assert payload["first"].endswith("_0.json.gz") and payload["last"].endswith("_2.json.gz")


@pytest.mark.parametrize("trigger, source, message", [
    (CatchupTrigger(on="files"), FileSource(), "catchup.on 'files' is not one of cron, data"),
    (CatchupTrigger(on="data", poll_seconds=0.1), FileSource(), "catchup.poll_seconds 0.1 must be"),
    (CatchupTrigger(on="data", coalesce_seconds=-1), FileSource(), "catchup.coalesce_seconds -1 must be"),
    (CatchupTrigger(on="data"), KafkaSource("t", "kafka_default"),
     "catchup.on 'data' watches a landing folder, but the job reads the Kafka topics t"),
])
def test_a_catchup_trigger_that_does_not_fit_the_job_is_refused(trigger, source, message):
    with pytest.raises(RegistryError, match=f"job j: {message}"):
        trigger.check("j", source)


def test_the_registry_chooses_per_job():
    assert JOBS[JOB].catchup == CatchupTrigger(on="data", poll_seconds=2)
    assert {name for name, job in JOBS.items() if job.catchup.on == "data"} == {JOB}
