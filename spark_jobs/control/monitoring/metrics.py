"""Every job's health as Prometheus metrics, computed when scraped from the same :class:`JobHealth` as the health
page and ``python -m spark_jobs status`` (:func:`spark_jobs.control.monitoring.status.collect`), so the three never
disagree on a number.

:class:`HealthCollector` is one ``prometheus_client`` custom collector: each scrape runs
:func:`~spark_jobs.control.monitoring.health.check_job` for every registry job and turns the summaries into metric
families (:func:`health_families`); no gauge is set from anywhere else. Names follow Prometheus' conventions: the
``streaming_`` prefix, base units (``_seconds``), ``_total`` on counters, the registry job in the ``job`` label, and
labels of bounded values only (tables, states, conditions: never a file name or a run id). Enums are one series per
possible value, 1 for the current one.

The same scrape keeps a Prometheus ``file_sd`` file of the live drivers' Spark UIs current
(:func:`write_driver_targets`, ``<lake>/control/prometheus_targets.json``): Spark picks the UI's port anew at every
start, and the lease names it. Served by the health plugin (``/streaming-health/metrics``) and by
``python -m spark_jobs metrics``. No pyspark and no Airflow here.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from spark_jobs.control.monitoring.conditions import CONDITIONS
from spark_jobs.control.monitoring.health import STATES, JobHealth
from spark_jobs.control.monitoring.prometheus import PROMETHEUS_PATH
from spark_jobs.control.supervision.state import STANDBY_STATES, STATES as SUPERVISOR_FILE_STATES

SUPERVISOR_STATES = (*SUPERVISOR_FILE_STATES, "none")  # "none": no supervisor.json
# Who holds the job's checkpoint lease (spark_jobs.control.supervision.ownership.lease_owner().kind); a backfill
# writes through a checkpoint of its own (``<job>@backfill-...``), never the job's lease.
HOLDER_KINDS = ("continuous", "catch-up", "on-call", "driver", "none")
TARGETS_FILE = "prometheus_targets.json"


def _gauge(name: str, doc: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=["job", *labels])


def _enum(name: str, doc: str, label: str, values: tuple[str, ...],
          healths: list[JobHealth], current) -> GaugeMetricFamily:
    family = _gauge(name, doc, [label])
    for health in healths:
        now = current(health)
        for value in values:
            family.add_metric([health.job, value], 1.0 if value == now else 0.0)
    return family


def holder_kind(health: JobHealth) -> str:
    """The kind of driver that holds the job's lease now (one of :data:`HOLDER_KINDS`), as the page's owner."""
    from spark_jobs.control.checkpoint.lease import LeaseInfo
    from spark_jobs.control.supervision.ownership import lease_owner

    if not health.driver or health.driver.get("expired") or health.driver.get("released"):
        return "none"
    return lease_owner(LeaseInfo.from_dict(health.driver)).kind


def health_families(healths: list[JobHealth]) -> list[Metric]:
    """The metric families of these job summaries (one series per job, table, state or condition; a number the
    summary does not have, such as the backlog of a job that never ran, has no series)."""
    families: list[Metric] = []

    def numbers(name: str, doc: str, value) -> None:
        family = _gauge(name, doc)
        for health in healths:
            number = value(health)
            if number is not None:
                family.add_metric([health.job], float(number))
        families.append(family)

    families.append(_enum("streaming_job_state", "The job's health state (the health page's state): 1 for the current "
                          "one.", "state", STATES, healths, lambda h: h.state))
    numbers("streaming_backlog_files", "Input files found that wait to be ingested.", lambda h: h.backlog_files)
    numbers("streaming_backlog_bytes", "The size of the input files that wait (listing jobs; a queue's messages name "
            "sizes only once received).", lambda h: h.backlog_bytes)
    numbers("streaming_backlog_oldest_age_seconds", "How long the oldest waiting input file has waited (0: none "
            "waits).", lambda h: h.backlog_age_seconds)
    numbers("streaming_freshness_seconds", "The last committed micro-batch's freshness: from the landing of its "
            "oldest file to its commit.", lambda h: h.freshness_seconds)
    numbers("streaming_event_time_lag_seconds", "How old the newest event of the last micro-batch was when its "
            "trigger started (jobs with event time only).", lambda h: h.event_time_lag_seconds)
    numbers("streaming_last_commit_age_seconds", "Seconds since the checkpoint's last committed micro-batch.",
            lambda h: h.last_commit_age_seconds)
    numbers("streaming_last_commit_batch", "The checkpoint's last committed batch id.",
            lambda h: h.latest_commit_batch)
    numbers("streaming_quarantine_ratio", "The quarantine tables' share of the rows of the last micro-batches the "
            "quarantine alert weighs (AlertThresholds.quarantine_window_batches).", lambda h: h.quarantine_share)
    numbers("streaming_quarantine_ratio_threshold", "AlertThresholds.max_quarantine_rate of the job.",
            lambda h: _job(h.job).alerts.max_quarantine_rate)

    rows = _gauge("streaming_last_batch_rows", "Rows the last recorded micro-batch carried, per table (the quarantine "
                  "tables' rows are its quarantined records).", ["table", "quarantine"])
    for health in healths:
        quarantine = {t.name for t in _job(health.job).tables if t.quarantine}
        for table, count in sorted(((health.last_batch or {}).get("rows") or {}).items()):
            rows.add_metric([health.job, table, str(table in quarantine).lower()], float(count))
    families.append(rows)

    quarantined = _gauge("streaming_quarantined_records", "Records the quarantine tables hold, by reason (the "
                         "reason codes of the log type: a short, fixed list).", ["table", "reason"])
    for health in healths:
        for table, counts in (health.quarantine_reasons or {}).items():
            for reason, count in counts.items():
                quarantined.add_metric([health.job, table, reason], float(count))
    families.append(quarantined)

    restarts = CounterMetricFamily("streaming_restarts", "Driver restarts of all time (the supervisors' events log: "
                                   "an on-call restart or a new DAG run does not reset it).", labels=["job"])
    take_overs = CounterMetricFamily("streaming_standby_take_overs", "Restarts a warm standby took over, of all time.",
                                     labels=["job"])
    for health in healths:
        if health.restarts is not None:
            restarts.add_metric([health.job], float(health.restarts["all_time"]))
            take_overs.add_metric([health.job], float(health.restarts["take_overs"]))
    families += [restarts, take_overs]
    numbers("streaming_restarts_in_window", "Driver restarts within the restart budget's window.",
            lambda h: h.restarts["in_window"] if h.restarts else None)
    numbers("streaming_restart_window_seconds", "The restart budget's window.",
            lambda h: h.restarts["window_seconds"] if h.restarts else None)
    numbers("streaming_restart_budget", "Restarts within the window after which the supervisor gives up.",
            lambda h: h.max_restarts if h.restarts is not None else None)
    numbers("streaming_supervisor_consecutive_failures", "Driver failures in a row since the last one that committed.",
            lambda h: (h.supervisor.get("consecutive_failures") or 0) if h.supervisor else None)

    continuous = [h for h in healths if _job(h.job).continuous_trigger]
    families.append(_enum("streaming_supervisor_state", "The continuous job's supervisor state ('none': no supervisor "
                          "has run): 1 for the current one.", "state", SUPERVISOR_STATES, continuous,
                          lambda h: (h.supervisor or {}).get("state") or "none"))
    families.append(_enum("streaming_lease_holder", "Who holds the job's checkpoint lease: 1 for the current kind.",
                          "kind", HOLDER_KINDS, healths, holder_kind))
    with_standby = [h for h in healths if h.standby is not None]
    families.append(_enum("streaming_standby_state", "The warm standby's state: 1 for the current one.", "state",
                          STANDBY_STATES, with_standby, lambda h: h.standby["state"]))
    numbers("streaming_standby_ready", "1 when a warm standby is ready to take over, else 0.",
            lambda h: None if h.standby is None else int(h.standby["state"] == "warm"))

    incidents = _gauge("streaming_incident_open", "1 while an incident of this condition is open (one alert was sent "
                       "when it opened).", ["condition"])
    active = _gauge("streaming_condition", "1 while this alert condition holds now (the page's alerts).",
                    ["condition"])
    for health in healths:
        opened = {i["code"] for i in health.incidents}
        holds = {c.code for c in health.conditions}
        for code in CONDITIONS:
            incidents.add_metric([health.job, code], float(code in opened))
            active.add_metric([health.job, code], float(code in holds))
    families += [incidents, active]
    return families


def _job(name: str):
    from spark_jobs.registry import JOBS

    return JOBS[name]


def driver_targets(healths: list[JobHealth]) -> list[dict]:
    """The live drivers' Spark UIs as Prometheus ``file_sd`` target groups (one per driver that names its UI in
    its lease), labelled with the job and the holder's kind."""
    groups = []
    for health in healths:
        ui = ((health.driver or {}).get("details") or {}).get("spark_ui")
        kind = holder_kind(health)
        if not ui or kind == "none":
            continue
        groups.append({"targets": [urlsplit(ui).netloc],
                       "labels": {"streaming_job": health.job, "holder_kind": kind,
                                  "__metrics_path__": PROMETHEUS_PATH + "/"}})
    return groups


def write_driver_targets(lake_path: str | Path, healths: list[JobHealth]) -> Path:
    """Write :func:`driver_targets` to ``<lake>/control/prometheus_targets.json`` when it changed (atomically:
    Prometheus never reads half a file) and return its path."""
    path = Path(lake_path) / "control" / TARGETS_FILE
    text = json.dumps(driver_targets(healths), indent=1, sort_keys=True) + "\n"
    if path.is_file() and path.read_text() == text:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{TARGETS_FILE}.{os.getpid()}")
    partial.write_text(text)
    os.replace(partial, path)
    return path


class HealthCollector(Collector):
    """Every registry job's health, computed at each scrape (:func:`health_families`), with the scrape's own
    duration; keeps the drivers' ``file_sd`` targets current on a local lake.

    :param lake: the lake root (None: ``$LAKE_ROOT`` or ``./lake``).
    """

    def __init__(self, lake: str | None = None) -> None:
        self.lake = lake

    def collect(self) -> Iterator[Metric]:
        from spark_jobs.control.checkpoint.inspect import lake_location
        from spark_jobs.control.monitoring.status import collect

        started = time.monotonic()
        location = lake_location(self.lake)
        healths = collect(location.url)
        yield from health_families(healths)
        if location.local:
            write_driver_targets(location.path, healths)
        duration = GaugeMetricFamily("streaming_exporter_scrape_duration_seconds",
                                     "How long computing every job's health took at this scrape.")
        duration.add_metric([], time.monotonic() - started)
        yield duration


def registry(lake: str | None = None) -> CollectorRegistry:
    """A registry with :class:`HealthCollector` alone (no process metrics: the host's exporter has those)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(HealthCollector(lake))
    return found


def exposition(lake: str | None = None) -> bytes:
    """One scrape in Prometheus' text format."""
    from prometheus_client import generate_latest

    return generate_latest(registry(lake))
