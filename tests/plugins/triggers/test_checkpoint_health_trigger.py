"""CheckpointHealthTrigger: serializable for the triggerer, reads the checkpoint without blocking."""

from __future__ import annotations

import asyncio
import importlib

import pytest

from streaming.triggers.checkpoint_health import CheckpointHealthTrigger, health_level

KWARGS = {"job": "cloudtrail_etl", "lake_root": "/lake", "dag_id": "cloudtrail_etl_continuous",
          "run_id": "manual__1", "watch_task_id": "supervise", "input_path": "/landing",
          "last_status": "healthy", "poll_interval": 2.0, "confirm_polls": 3, "alerts": True}


def test_serialize_returns_an_importable_classpath_and_exactly_the_constructor_args():
    classpath, kwargs = CheckpointHealthTrigger(**KWARGS).serialize()

    module, _, name = classpath.rpartition(".")
    assert classpath == "streaming.triggers.checkpoint_health.CheckpointHealthTrigger"  # importable from plugins/
    assert getattr(importlib.import_module(module), name) is CheckpointHealthTrigger
    assert kwargs == KWARGS
    assert CheckpointHealthTrigger(**kwargs).serialize() == (classpath, kwargs)


@pytest.mark.parametrize("status, level", [("in_flight", "healthy"), ("healthy", "healthy"), ("stalled", "stalled"),
                                           ("dead", "dead"), ("idle", "idle"), (None, None)])
def test_a_batch_in_flight_is_the_same_health_as_healthy(status, level):
    assert health_level(status) == level


def test_inspect_runs_in_a_thread_and_reports_a_lake_with_no_checkpoint(tmp_path):
    (tmp_path / "landing").mkdir()
    trigger = CheckpointHealthTrigger(**{**KWARGS, "lake_root": str(tmp_path / "lake"),
                                         "input_path": str(tmp_path / "landing")})

    report = asyncio.run(asyncio.to_thread(trigger.inspect))

    assert report["status"] == "not_started"
    assert report["latest_commit_batch"] is None
    assert report["backlog_files"] == 0


def test_inspect_reports_a_failure_as_a_status_with_the_way_out(tmp_path):
    trigger = CheckpointHealthTrigger(**{**KWARGS, "job": "no_such_job", "lake_root": str(tmp_path)})

    report = trigger.inspect()

    assert report["status"] == "unknown"
    [problem] = report["problems"]
    assert problem["code"] == "inspect_failed"
    assert "unknown job 'no_such_job'" in problem["explanation"]
    assert problem["action"] == f"run `python -m spark_jobs checkpoint inspect no_such_job --lake {tmp_path}`"


def test_airflows_plugin_loader_does_not_import_the_package_a_second_time():
    """plugins/.airflowignore: no bare ``operators``/``triggers``/... modules beside ``streaming.*``."""
    import subprocess
    import sys

    probe = ("import sys; from airflow import plugins_manager as pm; pm.ensure_plugins_loaded(); "
             "print(sorted(m for m in sys.modules if m in ('operators', 'sensors', 'triggers', 'notifiers', "
             "'local_airflow')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


class ScriptedTrigger(CheckpointHealthTrigger):
    """The trigger's own loop over given polls: each a report (status, supervisor state) and the watched task's
    state (Airflow's API and the lake are what the DAG tests exercise; here the order of events is the point)."""

    def __init__(self, polls: list[tuple[str, str | None, str | None]]) -> None:
        super().__init__(**{**KWARGS, "poll_interval": 0, "confirm_polls": 2})
        self.polls = iter(polls)
        self.task_state = None

    async def poll_once(self) -> dict:
        status, supervisor, self.task_state = next(self.polls)
        return {"status": status, "supervisor": {"state": supervisor} if supervisor else None}

    async def watched_task_state(self) -> str | None:
        return self.task_state


def events_of(trigger: CheckpointHealthTrigger) -> list:
    async def collect():
        return [event async for event in trigger.run()]
    return asyncio.run(collect())


def test_a_confirmed_change_of_health_goes_back_to_the_sensor():
    [event] = events_of(ScriptedTrigger([("healthy", "running", "running"), ("stalled", "running", "running"),
                                         ("stalled", "running", "running")]))

    assert event.payload == {"status": "stalled", "previous": "healthy",
                             "report": {"status": "stalled", "supervisor": {"state": "running"}}}


@pytest.mark.parametrize("supervisor", ["stopping", "stopped", "given_up"])
def test_once_the_supervisor_is_ending_a_change_of_health_waits_for_the_tasks_end(supervisor):
    """A paused DAG's sensor sent back to a worker would never be scheduled again: the trigger ends it instead."""
    polls = [("healthy", "running", "running")] + [("stopped", supervisor, "running")] * 4 + [
        ("stopped", supervisor, "success")]

    [event] = events_of(ScriptedTrigger(polls))

    assert type(event).__name__ == "TaskSuccessEvent"
    assert event.xcoms == {"health": {"status": "stopped", "supervisor": {"state": supervisor}}}
