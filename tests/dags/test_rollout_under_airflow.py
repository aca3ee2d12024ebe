"""New versions rolled out to cloudtrail_etl_continuous under a real Airflow scheduler, each asked for by a person on the
on-call form while files land every second (docs/deploying.md).

One Airflow on loopback for the module, started as ``make airflow`` starts it (``python tools/local_airflow.py start``),
with the simple auth manager's login: alice (role user) triggers ``streaming_oncall`` with the action ``rollout`` and a
*Version*, as an operator does (the action runs at once: no four eyes); the releases are in ``$SPARK_JOBS_RELEASES``,
each a real code change of this checkout (tools/releases.py). The continuous DAG starts version 1 (the checkout's
code) with spark-submit, a 1 s trigger, and a file lands every second for the whole module. The tests run in order:

1. v2, a parser fix (a session's creation date in ISO 8601's basic format is read): handed over (the seconds without
   a commit, from the Delta log's commit times and the versions in their ``userMetadata``, printed: their goal is
   the benchmark's, ``trial rollout``), kept after probation, no restart counted;
2. v3 changes a column's type: refused in pre-flight with the doctor's explanation, v2 commits on, nothing counted;
3. v4 crashes in its first batch: rolled back to v2 by itself, nothing counted; the health page's timeline (its JSON,
   through the API server) tells who asked, the handover and the rollback;
4. the DAG paused: the table is exact (every landed event once, the quarantine exactly the record landed bad), every
   batch's ``streaming_progress`` row and Delta commit name the same version, v1's rows read the way v1 parses and
   v2's the way v2 does.

The figures (seconds without commits, each phase's time, batches per version) are printed and written to
``rollouts.json`` in the module's folder. Here the registry's warm standby is off (a rollout starts its own standby
for the pre-flight, and a crash in a first batch comes before the previous version's standby would start: two JVMs
less on a 2-core machine) and probation is cut to 3 batches and 10 s; the policy comes from the operator's test
override (``$STREAMING_SUPERVISOR_POLICY``), set only in this Airflow's environment.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import urllib.request
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from spark_jobs.control.checkpoint.lease import read_lease
from spark_jobs.control.oncall.audit import read_rows
from spark_jobs.control.rollout.request import job_version, read_rollout
from spark_jobs.control.supervision.state import read_events, read_supervisor_state
from spark_jobs.launch.releases import RELEASES_ENV
from spark_jobs.launch.version import current
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from streaming.hooks.airflow_api import AirflowApiError
from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.cloudtrail import file_name
from tests.helpers.delta_log import batch_commits, handover_gap, rows_by_version
from tests.helpers.live_landing import LiveLanding
from tests.helpers.processes import inspected_caught_up
from tests.helpers.real_airflow import HarnessAirflow, RestApi, wait_for
from tools.releases import COLUMN_TYPE_CHANGE, FIRST_BATCH_CRASH, PARSER_FIX, release_with

DAG_ID = "cloudtrail_etl_continuous"
ONCALL = "streaming_oncall"
JOB = get_job("cloudtrail_etl")
POLICY = {"warm_standby": False, "probation_batches": 3, "probation_seconds": 10, "poll_seconds": 0.5}
FINAL = ("done", "refused", "failed", "rolled_back", "interrupted")


class Deployment(HarnessAirflow):
    """The shared Airflow, lake, landing and releases, and what the tests ask and read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, {RELEASES_ENV: str(root / "releases"),
                                "STREAMING_CONTINUOUS_TRIGGER": "processing-time:1s",
                                "STREAMING_SUPERVISOR_POLICY": json.dumps(POLICY)})
        self.releases = root / "releases"
        self.files = LiveLanding(self.landing, "deploy", every=1.0)
        self.control = str(Lake(self.lake).control_path(JOB.name))
        self.figures: dict = {}

    # -- a rollout, as an operator asks for it ----------------------------------------------------

    def rollout(self, version: str) -> dict:
        """alice asks for ``version`` on the on-call form; the rollout once the supervisor ended it, with its on-call
        run's and phases' times in ``figures[version]``."""
        asked = time.monotonic()
        run_id = f"rollout-{version}-{int(time.time())}"
        self.trigger_once(self.login("alice"), run_id, {"job": JOB.name, "action": "rollout", "version": version,
                                                        "reason": f"deploy {version}"})
        ended = wait_for(f"the on-call rollout of {version}", lambda: (r := self.api(
            "GET", f"/dags/{ONCALL}/dagRuns/{run_id}"))["state"] in ("success", "failed") and r)
        assert ended["state"] == "success", ended
        audit = [r for r in read_rows(Lake(self.lake)) if r["action"] == "rollout"][-1]  # one at a time: the newest
        assert (audit["outcome"], audit["triggered_by"]) == ("succeeded", "alice"), audit
        asked_for = json.loads(audit["message"])["rollout"]
        assert asked_for["version"] == version, asked_for
        rollout = wait_for(f"the rollout to {version} to end", lambda: (r := read_rollout(self.control))
                           and r["id"] == asked_for["id"] and r["phase"] in FINAL and r, every=0.5)
        times = [datetime.fromisoformat(h["at"]).timestamp() for h in rollout["history"]]
        self.figures[version] = {
            "oncall_run_s": round(time.monotonic() - asked, 1),
            "phases_s": {h["phase"]: round(b - a, 1) for h, a, b in zip(rollout["history"][1:], times, times[1:])},
            "outcome": rollout["phase"]}
        return rollout

    @staticmethod
    def trigger_once(api: RestApi, run_id: str, conf: dict) -> None:
        """Trigger ``streaming_oncall`` as run ``run_id``, once: Airflow on SQLite may answer 500 ("Database error",
        the database locked by the scheduler for its 5 s) without saying whether the run was made; the same run id
        again is then made, or refused as existing (409)."""
        for attempt in range(3):
            try:
                api("POST", f"/dags/{ONCALL}/dagRuns", {"logical_date": None, "dag_run_id": run_id, "conf": conf})
                return
            except AirflowApiError as error:
                if error.status == 409 and attempt:
                    return
                if error.status != 500 or "Database error" not in (error.detail or "") or attempt == 2:
                    raise
                time.sleep(2)

    # -- the lake ---------------------------------------------------------------------------------

    @property
    def table(self) -> Path:
        return self.lake / "tables" / "cloudtrail_events"

    def commits(self) -> list[dict]:
        return batch_commits(self.table) if (self.table / "_delta_log").is_dir() else []

    def holder(self) -> dict:
        lease = read_lease(self.control)
        return {} if lease is None or lease.released else {"pid": lease.pid, **lease.details}

    def supervisor(self) -> dict:
        return read_supervisor_state(self.control) or {}

    def events(self) -> list[dict]:
        return read_events(self.control)

    def since(self, rollout: dict) -> list[dict]:
        """The supervisor's events from ``rollout``'s start on."""
        events = self.events()
        start = next(i for i, e in enumerate(events) if e["kind"] == "rollout" and e.get("rollout") == rollout["id"])
        return events[start:]

    def committed_after(self, moment: float, version: str) -> dict:
        """The first commit after ``moment`` (epoch seconds), once there is one, tagged ``version``."""
        commit = wait_for(f"a commit after {moment:.1f}", lambda: next(
            (c for c in self.commits() if c["timestamp"] / 1000 > moment), None), every=0.5)
        assert commit["version"] == version, commit
        return commit

    def caught_up(self) -> bool:
        return inspected_caught_up(JOB, self.lake, self.landing)

    def no_restart_counted(self) -> None:
        state = self.supervisor()
        assert (state["restarts_total"], state["restarts_in_window"], state["consecutive_failures"]) == (0, 0, 0), state
        assert "restart" not in [e["kind"] for e in self.events()]


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    require_airflow_env()
    job = Deployment(tmp_path_factory.mktemp("rollout"))
    for name, changes in (("v2", PARSER_FIX), ("v3", COLUMN_TYPE_CHANGE), ("v4", FIRST_BATCH_CRASH)):
        release_with(job.releases, name, changes)
    with job.running(DAG_ID, ONCALL):
        job.files.land_one(bad_event_time=True)  # the one record to be quarantined
        job.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
        wait_for("version 1's first commit", job.commits)
        job.files.start()
        try:
            yield job
        finally:
            job.files.stop()
            (job.root / "rollouts.json").write_text(json.dumps(job.figures, indent=2))
            print(json.dumps(job.figures))


def test_a_compatible_version_asked_for_on_call_takes_over_within_seconds_and_stays(deployed):
    v1 = current().name  # the checkout's code, as the DAG's driver runs it
    before = wait_for("version 1 running", lambda: (h := deployed.holder()).get("version") == v1 and h)
    wait_for("version 1 committing the files landing", lambda: len(deployed.commits()) >= 5)

    rollout = deployed.rollout("v2")

    assert rollout["phase"] == "done", rollout
    assert [h["phase"] for h in rollout["history"]] == ["requested", "preflight", "handover", "probation", "done"]
    assert rollout["preflight"]["passed"] and rollout["by"] == "alice"
    holder = deployed.holder()
    assert holder["version"] == "v2" and holder["pid"] != before["pid"] and job_version(deployed.control) == "v2"
    deployed.committed_after(datetime.fromisoformat(rollout["ended_at"]).timestamp(), "v2")
    commits = deployed.commits()
    versions = [c["version"] for c in commits]
    assert versions == [v1] * versions.count(v1) + ["v2"] * versions.count("v2"), versions  # v1's, then only v2's
    gap = handover_gap(commits, v1, "v2")
    steady = [(b["timestamp"] - a["timestamp"]) / 1000 for a, b in zip(commits, commits[1:]) if b["version"] == v1]
    deployed.figures["v2"].update(gap_s=gap, v1_commit_interval_median_s=round(statistics.median(steady[-20:]), 2),
                                  load=[round(x, 1) for x in os.getloadavg()])
    print(f"handover v1 -> v2: {gap:.2f} s without a commit; {deployed.figures['v2']}")
    assert [e["kind"] for e in deployed.since(rollout)] == ["rollout", "handover", "probation_passed"]
    deployed.no_restart_counted()
    assert gap > 0  # v2's first commit follows v1's last; how long the gap is, is the benchmark's figure


def test_an_incompatible_version_is_refused_in_preflight_and_v2_commits_on(deployed):
    holder = deployed.holder()

    rollout = deployed.rollout("v3")

    assert rollout["phase"] == "refused", rollout
    assert [h["phase"] for h in rollout["history"]] == ["requested", "preflight", "refused"]
    assert [f["code"] for f in rollout["findings"]] == ["output_schema_changed"]
    assert "column readOnly changes type from boolean to string" in rollout["outcome"], rollout["outcome"]
    assert "the running driver was not stopped" in rollout["outcome"], rollout["outcome"]
    assert deployed.holder()["pid"] == holder["pid"] and job_version(deployed.control) == "v2"
    deployed.committed_after(datetime.fromisoformat(rollout["ended_at"]).timestamp(), "v2")
    assert [e["kind"] for e in deployed.since(rollout)] == ["rollout", "rollout_refused"]
    deployed.no_restart_counted()
    print(f"v3 refused: {deployed.figures['v3']}")


def test_a_version_crashing_in_its_first_batch_is_rolled_back_and_the_timeline_tells_it(deployed):
    rollout = deployed.rollout("v4")

    assert rollout["phase"] == "rolled_back", rollout
    assert [h["phase"] for h in rollout["history"]] == ["requested", "preflight", "handover", "probation",
                                                       "rolled_back"]
    assert "v4: a bug in the batch writer" in rollout["outcome"], rollout["outcome"]
    ended = datetime.fromisoformat(rollout["ended_at"]).timestamp()
    back = wait_for("v2 running again", lambda: (h := deployed.holder()).get("version") == "v2" and h)
    first = deployed.committed_after(ended, "v2")
    assert job_version(deployed.control) == "v2" and back["pid"] != rollout["driver_pid"]
    assert "v4" not in {c["version"] for c in deployed.commits()}  # its batch never reached the table
    assert [e["kind"] for e in deployed.since(rollout)] == ["rollout", "handover", "rollback"]
    deployed.no_restart_counted()
    handed = datetime.fromisoformat(rollout["handed_over_at"]).timestamp()
    deployed.figures["v4"]["handover_to_v2_commit_s"] = round(first["timestamp"] / 1000 - handed, 1)
    print(f"v4 rolled back: {deployed.figures['v4']}")

    # What the health page shows (its JSON, through the API server, as alice): who asked, the handover, the rollback.
    request = urllib.request.Request(f"{deployed.airflow.url}/streaming-health/api/jobs/{JOB.name}/timeline",
                                     headers={"Authorization": f"Bearer {deployed.login('alice').token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        timeline = json.load(response)
    story = [(e["kind"], e["requested_by"]) for e in timeline if "v4" in e["summary"] or "v4" in (e["outcome"] or "")]
    assert story == [("oncall", "alice"), ("rollout", "alice"), ("handover", None), ("rollback", None)], timeline
    said = [e["summary"] for e in timeline if "v4" in e["summary"]]
    assert said[0].startswith("on-call rollout: succeeded; asked by alice; reason: deploy v4"), said
    assert said[1].startswith(f"rollout: rollout of {JOB.name} from v2 to v4 asked by alice: deploy v4"), said
    assert said[3].startswith("rollback: ") and "v4: a bug in the batch writer" in said[3], said
    [rolled] = [e for e in timeline if e["kind"] == "rollback"]
    assert rolled["outcome"].startswith("rolled back to v2: v2 starts again from the same checkpoint"), rolled


def test_the_table_is_exact_and_every_batch_names_the_version_that_wrote_it(deployed):
    from deltalake import DeltaTable

    from spark_jobs.control.monitoring.progress import progress_table_path

    deployed.files.stop()
    wait_for("every landed file committed", deployed.caught_up)
    deployed.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": True})  # the driver stops after its batch, rows flushed
    wait_for("the driver to stop", lambda: deployed.supervisor().get("state") == "stopped" and not deployed.holder())

    ids = DeltaTable(str(deployed.table)).to_pyarrow_table(columns=["eventID"])["eventID"].to_pylist()
    assert len(ids) == len(set(ids)) == len(deployed.files.expected)
    assert Counter(ids) == Counter(deployed.files.expected)
    quarantine = DeltaTable(str(deployed.lake / "tables" / "cloudtrail_quarantine")).to_pyarrow_table(
        columns=["source_file", "record_index", "reason"]).to_pylist()
    assert [(file_name(r["source_file"]), r["record_index"], r["reason"]) for r in quarantine] == deployed.files.bad

    v1 = current().name
    commits = deployed.commits()
    progress = DeltaTable(str(progress_table_path(deployed.lake))).to_pyarrow_table(
        columns=["job", "batch_id", "version"]).to_pylist()
    by_batch = {r["batch_id"]: r["version"] for r in progress if r["job"] == JOB.name}
    assert len(by_batch) == len([r for r in progress if r["job"] == JOB.name])  # one row a batch
    tagged = {c["batch"]: c["version"] for c in commits}
    assert {batch: by_batch.get(batch) for batch in tagged} == tagged  # each commit's batch: the same version
    assert set(by_batch.values()) == {v1, "v2"}
    first_v2 = min(b for b, v in by_batch.items() if v == "v2")
    assert {v for b, v in by_batch.items() if b < first_v2} == {v1} and {
        v for b, v in by_batch.items() if b >= first_v2} == {"v2"}
    deployed.figures["batches"] = dict(Counter(by_batch.values()))
    print(f"batches by version: {deployed.figures['batches']}")

    # The rows each version wrote are parsed as that version parses: v1 leaves a creation date in ISO 8601's basic
    # format NULL, v2 reads it (each file's first event has one).
    rows = rows_by_version(deployed.table, ["eventID", "userIdentity_sessionCreationDate"])
    assert set(rows) == {v1, "v2"}
    created = {v: {r["userIdentity_sessionCreationDate"] for r in found if r["eventID"].endswith("-0")}
               for v, found in rows.items()}
    assert created == {v1: {None}, "v2": {datetime(2024, 3, 2, 9, 0)}}, created
