"""A continuous job's version lines (the health page's and ``status``'s) from a planted lake: the lease's version, the
rollout on probation with its batches counted as the supervisor counts them, the last rollout that ended."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timezone

from spark_jobs.control.monitoring.health import check_job
from spark_jobs.control.rollout.versions import version_lines
from tests.helpers.plant import JOB, PlantedLake


def test_the_running_version_the_one_on_probation_and_the_last_rollback_are_read_from_the_control_files(tmp_path):
    planted = PlantedLake(tmp_path)
    planted.deploying()

    health = check_job(JOB, planted.lake, str(planted.landing), now=datetime.now(timezone.utc))

    view = health.version
    assert view["running"] == "v3" and view["under_way"] is None
    probation = view["probation"]
    assert (probation["version"], probation["from"], probation["asked_by"], probation["batches"],
            probation["batches_needed"], probation["seconds_needed"]) == ("v3", "v2", "bob", 2, 3, 300.0)
    assert 39 <= probation["seconds"] <= 45
    assert {k: v for k, v in view["last"].items() if k != "id"} == {
        "version": "v4", "from": "v2", "phase": "rolled_back", "ended_at": "2026-12-07T10:04:37.000+00:00",
        "outcome": "version v4 failed on probation: the driver exited with status 1; v2 starts again",
        "destructive": False}
    running, on_probation, last = version_lines(view)
    assert running == "version: v3"
    assert re.fullmatch(r"on probation: v3 \(from v2\), 2 of 3 batches, (39|4\d) of 300 s, since \S+", on_probation)
    assert last == ("last rollout: v2 -> v4, rolled back at 2026-12-07T10:04:37.000+00:00: version v4 failed on "
                    "probation: the driver exited with status 1; v2 starts again")


def test_a_job_never_rolled_out_names_only_its_running_version_and_one_without_a_supervisor_none(tmp_path):
    planted = PlantedLake(tmp_path)
    planted.healthy()
    planted.hold_lease(version="code-0123456789abcdef")
    view = check_job(JOB, planted.lake, str(planted.landing)).version
    assert view == {"running": "code-0123456789abcdef", "probation": None, "under_way": None, "last": None}
    assert version_lines(view) == ["version: code-0123456789abcdef"]
    assert check_job(replace(JOB, continuous_trigger=None), planted.lake, str(planted.landing)).version is None
    assert version_lines(None) == []
