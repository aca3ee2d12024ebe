"""Rollouts through a real supervisor and real Spark drivers, each new version a real code change (a release).

One supervised ``cloudtrail_etl`` (the checkout's code: version 1) for the module, files landing; the tests run in
order on it, through ``ask_for_rollout`` as the CLI and the on-call action ask:

- version 2, a parser fix: pre-flight passes, the handover leaves the old driver's last commit and v2's first a few
  seconds apart (the gap is measured from the Delta log's commit times and their ``userMetadata``), probation
  passes; every batch after is tagged v2; no restart counted;
- version 3 changes a column's type: refused in pre-flight with the reason, v2 keeps committing, nothing counted;
- version 4 is v2 with a bug in its first batch: handed over, it crashes, it is rolled back to v2 by itself, the
  restart budget untouched;
- version 5 is v2 with a parser that quarantines every event: handed over, it is rolled back to v2 by the
  quarantine rule of its probation. What its committed batches wrote stays (a rollback does not rewrite tables:
  ``reprocess_from`` does): exactly the events of the files v5 read are in the quarantine, as bad_event_time;
- version 6 changes a column's type as version 3 does: refused in pre-flight, then deployed by a destructive rollout:
  the driver stopped, the checkpoint and tables moved aside, v6 on a new checkpoint rebuilds the tables from the
  whole input with the new type, every good event once (v5's quarantine gone with the old tables).

The module ends with the exact table (every good event once, the quarantine exactly the bad items, every planned
batch committed) and no process left.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from spark_jobs.control.checkpoint.lease import read_lease
from spark_jobs.control.rollout.ask import ask_for_rollout
from spark_jobs.control.rollout.request import job_version, read_rollout
from spark_jobs.control.supervision.command import driver_command
from spark_jobs.control.supervision.state import read_events, read_supervisor_state
from spark_jobs.control.supervision.supervisor import Supervisor
from spark_jobs.launch.releases import RELEASES_ENV
from spark_jobs.launch.version import current
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from tests.helpers.cloudtrail import file_name
from tests.helpers.processes import (assert_no_process_left, batch_ids, inspected_caught_up, table_event_ids,
                                     wait_for)
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.delta_log import batch_commits, handover_gap
from tools.releases import (COLUMN_TYPE_CHANGE, FIRST_BATCH_CRASH, PARSER_FIX, QUARANTINES_EVERYTHING,
                           release_with)
from tools.sample_data import write_sample_landing

JOB = get_job("cloudtrail_etl")
TTL = 6
POLICY = replace(JOB.restart, initial_backoff_seconds=1, max_backoff_seconds=5, window_seconds=600, poll_seconds=0.5,
                 stop_grace_seconds=90, warm_standby=False, probation_batches=2,
                 probation_seconds=60)  # long enough for the drivers' progress rows (appended every 30 s) to count
START_SECONDS = 300  # a JVM's start on a busy 2-core machine


class Deployed:
    """The supervised job, its lake and landing, what must be in the tables, and the supervisor's events."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.landing, self.lake = root / "landing", root / "lake"
        self.control = str(Lake(self.lake).control_path(JOB.name))
        self.good: list[str] = []
        self.bad: list[tuple] = []
        self.landed_good: list[str] = []  # every good event landed, and every bad item: what a rebuild holds
        self.landed_bad: list[tuple] = []
        self.by_file: dict[str, list[str]] = {}  # a landed file's good events
        self.events: list[dict] = []
        self.seed = 70
        self.stop = threading.Event()
        self.supervisor = Supervisor(
            JOB, Lake(self.lake), driver_command(JOB, lake=str(self.lake), input_path=str(self.landing),
                                                 trigger="processing-time:1s", lease_ttl_seconds=TTL,
                                                 extra_args=["--max-files-per-trigger", "20"]),
            POLICY, notify=self.events.append, should_stop=self.stop.is_set, input_path=str(self.landing),
            cwd=str(PROJECT_ROOT))
        self.result: dict = {}
        self.thread = threading.Thread(target=lambda: self.result.update(outcome=self.supervisor.run()), daemon=True)

    def land(self, bad: bool = False) -> None:
        self.seed += 1
        manifest = write_sample_landing(self.landing / f"s{self.seed}", files=1, records_per_file=5, seed=self.seed,
                                        include_bad_files=bad)
        self.good += manifest.good_event_ids
        self.bad += [(b.path.name, b.record_index, b.reason) for b in manifest.bad]
        self.landed_good += manifest.good_event_ids
        self.landed_bad += [(b.path.name, b.record_index, b.reason) for b in manifest.bad]
        if not bad:
            [written] = manifest.files_written
            self.by_file[written.name] = list(manifest.good_event_ids)

    def holder(self) -> dict | None:
        lease = read_lease(self.control)
        return None if lease is None or lease.released else {"pid": lease.pid, **lease.details}

    def caught_up(self) -> bool:
        """No file waits and every planned batch is committed (``checkpoint inspect``: a long run's early discovery
        manifests are compacted away, so the files of committed batches cannot be listed one by one)."""
        return inspected_caught_up(JOB, self.lake, self.landing)

    def wait_caught_up(self) -> None:
        wait_for(self.caught_up, START_SECONDS, "every landed file committed")

    def rollout(self, version: str, timeout: float = 2 * START_SECONDS, destructive: bool = False) -> dict:
        """Ask for a rollout as the CLI does, landing a file every second meanwhile; the rollout once it ended."""
        from spark_jobs.control.rollout.destructive import ask_for_destructive_rollout

        ask = ask_for_destructive_rollout if destructive else ask_for_rollout
        asked = ask(JOB, Lake(self.lake), version, "alice", f"deploy {version}")
        done = threading.Event()

        def keep_landing() -> None:
            while not done.wait(1.0):
                self.land()

        lander = threading.Thread(target=keep_landing, daemon=True)
        lander.start()
        try:
            return wait_for(lambda: (r := read_rollout(self.control)) and r["id"] == asked["id"]
                            and r["phase"] in ("done", "refused", "failed", "rolled_back", "interrupted") and r,
                            timeout, f"the rollout to {version} to end",
                            context=lambda: json.dumps(read_rollout(self.control))[-2000:])
        finally:
            done.set()
            lander.join()

    def since(self, rollout: dict) -> list[dict]:
        """The supervisor's events from the start of ``rollout`` on."""
        start = next(i for i, e in enumerate(self.events) if e["kind"] == "rollout" and e.get("rollout") == rollout["id"])
        return self.events[start:]

    def not_counted(self, rollout: dict) -> None:
        """The rollout's own events used none of the restart budget (a restart of the version that stays, for a
        cause of its own after them, would be counted as any restart)."""
        events = self.since(rollout)
        kinds = [e["kind"] for e in events]
        end = kinds.index("rollback") if "rollback" in kinds else len(kinds) - 1
        assert {(e["restarts_in_window"], e["consecutive_failures"]) for e in events[:end + 1]} == {
            (events[0]["restarts_in_window"], events[0]["consecutive_failures"])}, events

    def commits(self) -> list[dict]:
        """cloudtrail_events' batch commits, oldest first (:func:`tests.helpers.delta_log.batch_commits`)."""
        return batch_commits(self.lake / "tables" / "cloudtrail_events")


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    root = tmp_path_factory.mktemp("rollout")
    before = os.environ.get(RELEASES_ENV)
    os.environ[RELEASES_ENV] = str(root / "releases")  # the supervisor finds the releases there
    job = Deployed(root)
    job.land(bad=True)
    job.thread.start()
    try:
        wait_for(lambda: job.supervisor.state.state == "running", START_SECONDS, "the supervised driver")
        job.wait_caught_up()
        yield job
    finally:
        job.stop.set()
        job.thread.join(timeout=POLICY.stop_grace_seconds + 60)
        if before is None:
            os.environ.pop(RELEASES_ENV, None)
        else:
            os.environ[RELEASES_ENV] = before
    assert job.result == {"outcome": "stopped"}
    from deltalake import DeltaTable

    checkpoint = job.lake / "checkpoints" / JOB.name
    assert batch_ids(checkpoint / "offsets") == batch_ids(checkpoint / "commits")
    assert Counter(table_event_ids(job.lake)) == Counter(job.good)
    quarantine = DeltaTable(str(job.lake / "tables" / "cloudtrail_quarantine")).to_pyarrow_dataset().to_table(
        columns=["source_file", "record_index", "reason"]).to_pylist()
    assert sorted((file_name(r["source_file"]), r["record_index"], r["reason"]) for r in quarantine) == sorted(job.bad)
    assert_no_process_left()


def test_a_compatible_version_is_handed_over_in_seconds_and_passes_probation(deployed, tmp_path_factory):
    v1 = current().name
    release_with(Path(os.environ[RELEASES_ENV]), "v2", PARSER_FIX)
    old_pid = deployed.holder()["pid"]

    rollout = deployed.rollout("v2")
    deployed.wait_caught_up()

    assert rollout["phase"] == "done", rollout
    assert [h["phase"] for h in rollout["history"]] == ["requested", "preflight", "handover", "probation", "done"]
    assert rollout["preflight"]["passed"] and rollout["batches_on_probation"] >= POLICY.probation_batches
    holder = deployed.holder()
    assert holder["version"] == "v2" and holder["pid"] != old_pid and job_version(deployed.control) == "v2"
    commits = deployed.commits()
    versions = [c["version"] for c in commits]
    assert versions == sorted(versions, key=lambda v: v == "v2") and set(versions) == {v1, "v2"}
    gap = handover_gap(commits, v1, "v2")
    print(f"handover to v2: {gap:.2f} s between the last commit of {v1} and the first of v2")
    kinds = [e["kind"] for e in deployed.events]
    assert kinds == ["start", "rollout", "handover", "probation_passed"], deployed.events
    state = read_supervisor_state(deployed.control)
    assert (state["restarts_total"], state["restarts_in_window"], state["consecutive_failures"]) == (0, 0, 0)
    assert 0 < gap < 60  # the figure is the benchmark's; a cold start after a stop would be the slow path


def test_an_incompatible_version_is_refused_in_preflight_and_v2_keeps_committing(deployed):
    release_with(Path(os.environ[RELEASES_ENV]), "v3", COLUMN_TYPE_CHANGE)
    holder = deployed.holder()

    rollout = deployed.rollout("v3")
    deployed.wait_caught_up()

    assert rollout["phase"] == "refused", rollout
    assert [f["code"] for f in rollout["findings"]] == ["output_schema_changed"]
    assert "column readOnly changes type from boolean to string" in rollout["outcome"]
    assert deployed.holder()["pid"] == holder["pid"] and deployed.holder()["version"] == "v2"
    assert job_version(deployed.control) == "v2"
    assert [e["kind"] for e in deployed.events][-2:] == ["rollout", "rollout_refused"]
    assert read_supervisor_state(deployed.control)["restarts_total"] == 0
    assert deployed.commits()[-1]["version"] == "v2"


def test_a_version_that_crashes_in_its_first_batch_is_rolled_back_by_itself(deployed):
    release_with(Path(os.environ[RELEASES_ENV]), "v4", FIRST_BATCH_CRASH)

    rollout = deployed.rollout("v4")
    deployed.land()
    wait_for(lambda: (deployed.holder() or {}).get("version") == "v2", START_SECONDS, "v2 running again")
    deployed.wait_caught_up()

    assert rollout["phase"] == "rolled_back", rollout
    assert [h["phase"] for h in rollout["history"]] == ["requested", "preflight", "handover", "probation",
                                                       "rolled_back"]
    assert "v4: a bug in the batch writer" in rollout["outcome"]
    assert job_version(deployed.control) == "v2"
    assert [e["kind"] for e in deployed.since(rollout)][:3] == ["rollout", "handover", "rollback"]
    deployed.not_counted(rollout)
    assert "v4" not in {c["version"] for c in deployed.commits()}  # its batch never reached the table
    assert [e["kind"] for e in read_events(deployed.control)] == [e["kind"] for e in deployed.events]


def test_a_version_that_quarantines_far_more_is_rolled_back_by_its_probation(deployed):
    release_with(Path(os.environ[RELEASES_ENV]), "v5", QUARANTINES_EVERYTHING)

    rollout = deployed.rollout("v5")
    wait_for(lambda: (deployed.holder() or {}).get("version") == "v2", START_SECONDS, "v2 running again")
    deployed.wait_caught_up()

    assert rollout["phase"] == "rolled_back", rollout
    assert "version v5 quarantines far more than the version before: its batches quarantined 100.0% of " in \
        rollout["outcome"]
    assert job_version(deployed.control) == "v2"
    assert [e["kind"] for e in deployed.since(rollout)][:3] == ["rollout", "handover", "rollback"]
    deployed.not_counted(rollout)
    # What v5's committed batches wrote stays: each event of a file it read is quarantined, none is in the events
    # table (the module's final check holds the rest exact).
    from deltalake import DeltaTable

    quarantine = DeltaTable(str(deployed.lake / "tables" / "cloudtrail_quarantine")).to_pyarrow_dataset().to_table(
        columns=["source_file", "record_index", "reason"]).to_pylist()
    known = set(deployed.bad)  # the bad items landed on purpose
    new = [(file_name(r["source_file"]), r["record_index"], r["reason"]) for r in quarantine]
    new = [item for item in new if item not in known]
    by_v5 = Counter(name for name, _, reason in new if reason == "bad_event_time")
    assert by_v5 and len(by_v5) == len({name for name, _, _ in new})  # nothing else was quarantined
    assert by_v5 == {name: len(deployed.by_file[name]) for name in by_v5}
    deployed.bad += new
    for name in by_v5:
        for event_id in deployed.by_file[name]:
            deployed.good.remove(event_id)


def test_a_version_refused_in_preflight_is_deployed_by_a_destructive_rollout_that_rebuilds_the_tables(deployed):
    import pyarrow as pa
    from deltalake import DeltaTable

    release_with(Path(os.environ[RELEASES_ENV]), "v6", COLUMN_TYPE_CHANGE)  # v3's change, deployed destructively
    refused = deployed.rollout("v6")
    assert refused["phase"] == "refused", refused
    before = deployed.holder()

    rollout = deployed.rollout("v6", destructive=True)
    deployed.land(bad=True)
    deployed.wait_caught_up()

    assert [h["phase"] for h in rollout["history"]] == ["requested", "resetting", "rebuilding", "done"], rollout
    assert [e["kind"] for e in deployed.since(rollout)][:3] == ["rollout", "rollout_reset", "rollout_done"]
    deployed.not_counted(rollout)
    assert deployed.holder()["version"] == "v6" and deployed.holder()["pid"] != before["pid"]
    assert job_version(deployed.control) == "v6"
    backup = Path(rollout["backup"])
    old = DeltaTable(str(backup / "tables" / "cloudtrail_events")).to_pyarrow_dataset()
    new = DeltaTable(str(deployed.lake / "tables" / "cloudtrail_events")).to_pyarrow_dataset()
    assert old.schema.field("readOnly").type == pa.bool_()
    assert pa.types.is_string(new.schema.field("readOnly").type) or pa.types.is_large_string(
        new.schema.field("readOnly").type)
    assert {c["version"] for c in deployed.commits()} == {"v6"}  # the new tables hold v6's batches only
    assert (backup / "checkpoint" / "commits").is_dir()
    # Rebuilt from the whole input: every good event landed once, the quarantine exactly the bad items landed (what
    # v5 quarantined is in the backup only); the module's final check holds them.
    deployed.good, deployed.bad = list(deployed.landed_good), list(deployed.landed_bad)
