"""Health alerts from the checkpoint-health trigger: once when an incident opens, once when it resolves.

Each test plants a job's state (:mod:`tests.helpers.plant`) and runs the trigger's own
poll (:meth:`CheckpointHealthTrigger.poll_once`, the step its ``run`` loop repeats in the triggerer):
the evaluation, the incident store and Airflow's notifier (awaited, as the triggerer does) posting
to a real webhook on 127.0.0.1. A new trigger object stands for a restarted sensor.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from streaming.notifiers import WEBHOOK_ENV
from streaming.triggers.checkpoint_health import CheckpointHealthTrigger
from tests.helpers.plant import JOB, PlantedLake


@pytest.fixture
def planted(tmp_path, webhook, monkeypatch):
    url, posts = webhook
    monkeypatch.setenv(WEBHOOK_ENV, f"{url}/oncall")
    return PlantedLake(tmp_path)


def poll(planted: PlantedLake) -> dict:
    """One poll of a new trigger, as a (re)started sensor defers to it."""
    trigger = CheckpointHealthTrigger(job=JOB.name, lake_root=str(planted.lake), dag_id=f"{JOB.name}_continuous",
                                      run_id="scheduled__1", input_path=str(planted.landing))
    return asyncio.run(trigger.poll_once())


def alerts(webhook) -> list[tuple[str, str]]:
    return [(body["kind"], body["code"]) for _, _, body in webhook[1]]


def test_a_stalled_job_alerts_once_and_once_more_when_it_resolves(planted, webhook, caplog):
    planted.stalled()
    with caplog.at_level(logging.INFO, logger="streaming.notifiers"):
        report = poll(planted)
    assert report["health"]["state"] == "stalled"
    assert alerts(webhook) == [("opened", "stalled")]
    [(path, content_type, body)] = webhook[1]
    assert (path, content_type) == ("/oncall", "application/json")
    assert (body["job"], body["severity"], body["dag_id"], body["run_id"]) == (
        JOB.name, "error", "cloudtrail_etl_continuous", "scheduled__1")
    assert "no batch committed for" in body["summary"] and "driver.log" in body["action"]
    [line] = [r for r in caplog.records if r.name == "streaming.notifiers" and r.levelname == "ERROR"]
    assert line.getMessage().startswith("health alert opened: stalled of cloudtrail_etl: cloudtrail_etl is stalled")
    assert "; do: " in line.getMessage()

    for _ in range(3):  # checked again, by restarted sensors too: the incident is open, nothing is sent
        poll(planted)
    assert alerts(webhook) == [("opened", "stalled")]

    planted.catch_up()
    assert poll(planted)["health"]["state"] == "healthy"
    assert alerts(webhook) == [("opened", "stalled")]  # one clean check does not resolve it
    poll(planted)
    assert alerts(webhook) == [("opened", "stalled"), ("resolved", "stalled")]
    resolved = webhook[1][-1][2]
    assert resolved["action"] == "nothing to do" and resolved["summary"].endswith("cloudtrail_etl is healthy now")
    for _ in range(2):
        poll(planted)
    assert alerts(webhook) == [("opened", "stalled"), ("resolved", "stalled")]


def test_a_lagging_job_alerts_that_it_falls_behind(planted, webhook, caplog):
    planted.lagging()
    with caplog.at_level(logging.INFO, logger="streaming.notifiers"):
        assert poll(planted)["health"]["state"] == "lagging"
        poll(planted)

    assert alerts(webhook) == [("opened", "falling_behind")]
    assert webhook[1][0][2]["severity"] == "warning"
    [line] = [r for r in caplog.records if r.name == "streaming.notifiers" and r.levelname == "WARNING"]
    assert ("processed 2.00 rows/s while 6.50 rows/s arrived, and 40 input files wait (up from 18 5 batches ago)"
            in line.getMessage())


def test_a_healthy_job_raises_no_alert(planted, webhook):
    planted.healthy()
    for _ in range(3):
        assert poll(planted)["health"] == {"state": "healthy", "reason": "a driver is running and keeping up",
                                           "conditions": []}
    assert webhook[1] == []


def test_an_alert_whose_delivery_was_cut_short_is_sent_by_the_next_poll(planted, webhook):
    planted.stalled()
    trigger = CheckpointHealthTrigger(job=JOB.name, lake_root=str(planted.lake), dag_id="d", run_id="r",
                                      input_path=str(planted.landing))
    report, pending = trigger.check()  # decided and stored, then the triggerer died before sending
    assert [a["kind"] for a in pending] == ["opened"] and webhook[1] == []

    poll(planted)
    poll(planted)
    assert alerts(webhook) == [("opened", "stalled")]


def test_alerts_can_be_switched_off(planted, webhook):
    planted.stalled()
    trigger = CheckpointHealthTrigger(job=JOB.name, lake_root=str(planted.lake), dag_id="d", run_id="r",
                                      input_path=str(planted.landing), alerts=False)
    assert asyncio.run(trigger.poll_once())["health"]["state"] == "stalled"
    assert webhook[1] == [] and not (planted.control / "incidents.json").exists()


def test_the_page_shows_how_a_job_finds_its_files():
    from spark_jobs.control.monitoring.health import JobHealth
    from streaming.health_page import render_page

    health = JobHealth(job="cloudtrail_etl", state="healthy", reason="ok", checkpoint_status="healthy",
                       checked_at="2026-11-27T04:00:00+00:00",
                       discovery="notifications; queue: 3 messages waiting, 0 received, the oldest had waited 2.5 s; "
                                 "last reconcile 2026-11-27T03:00:00+00:00: 9 listed, 1 missed and ingested")
    page = render_page([health], {}, "/lake")
    assert ('data-discovery="1">Input: notifications; queue: 3 messages waiting, 0 received, the oldest had waited '
            "2.5 s; last reconcile 2026-11-27T03:00:00+00:00: 9 listed, 1 missed and ingested</p>") in page
