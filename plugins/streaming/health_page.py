"""The streaming health page: a FastAPI app the Airflow API server serves inside the Airflow UI.

Mounted by the ``streaming_health`` plugin (``plugins/streaming_health_plugin.py``) at
``/streaming-health``, shown in the UI's navigation ("Streaming health") and as a tab of every DAG
(``/streaming-health/dag/<dag_id>``: the job the DAG runs). Every route asks Airflow's auth manager
(:mod:`streaming.access`; a plugin's FastAPI app is not behind the login otherwise): no login (the UI's session
cookie, or a bearer token from ``POST /auth/token``) is 401; a user the auth manager does not let read
:data:`streaming.roles.HEALTH_RESOURCE` (and, for ``/dag/<dag_id>``, that DAG) is 403, the JSON routes included.
The on-call approvals (``/oncall``, ``/api/oncall``) are :mod:`streaming.oncall_approvals`.

Routes (under the prefix):

- ``/``: every registry job: state, last commit and its age, freshness (the last batch's landing to commit), backlog
  and the oldest waiting file's age, the warm standby (off, absent, warming, warm; its last take-over), restarts
  (this supervision run, the budget's window, all time: an on-call restart does not reset them), the driver that
  owns the checkpoint now
  (the continuous driver or a catch-up run: pid, host, uptime), a continuous job's versions (the running one, the one
  on probation and how far, a rollout under way, the last rollout or rollback), restarts and what the supervisor does (running,
  backing off, waiting for a catch-up run's lease), the alert conditions with what to do, per job the plots of its
  ``streaming_progress`` history (server-rendered SVG: no JavaScript, nothing fetched from the internet; the
  current checkpoint's micro-batches only; refreshes every 30 s) and its timeline: catch-up and backfill runs with
  the rows and files they loaded or why they failed, incidents, starts, restarts, give-ups, waits for the lease and
  on-call actions with their requester and approver, in time order (:mod:`spark_jobs.control.monitoring.timeline`);
- ``/job/<job>`` and ``/dag/<dag_id>``: one job;
- ``/api/status``: the same summary as ``python -m spark_jobs status --json``;
- ``/api/jobs/<job>/progress?limit=N``: the job's newest progress rows as JSON;
- ``/api/jobs/<job>/timeline``: the job's timeline as JSON;
- ``/lineage/<table>`` and ``/api/lineage/<table>``: the runs that wrote a table, from the OpenLineage events in the
  lake (the DAG run and task, the Spark run, its inputs and rows: ``python -m spark_jobs lineage TABLE``,
  docs/lineage.md); each job's section links its tables' views;
- ``/metrics``: every job's health as Prometheus metrics (:mod:`spark_jobs.control.monitoring.metrics`, computed at
  each scrape from the same summaries; it also keeps ``<lake>/control/prometheus_targets.json``, the live drivers'
  Spark UIs for Prometheus' ``file_sd``, current). Prometheus authenticates like any API client: a bearer token
  from ``POST /auth/token`` (``authorization.credentials_file`` in its scrape config, docs/monitoring.md).

The lake is ``$LAKE_ROOT`` of the API server (else ``./lake``). It is read with the project's
pyspark-free code (the checkpoint library, delta-rs): the API server never imports pyspark.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from html import escape

URL_PREFIX = "/streaming-health"  # where the plugin mounts the app
PAGE_BATCHES = 120  # the plots show this many newest micro-batches
REFRESH_SECONDS = 30

STYLE = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px;color:#1a202c;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:17px;margin:24px 0 6px} h4{margin:0 0 2px;font-size:13px}
.sub{color:#4a5568;margin:0 0 12px} small{color:#718096;font-weight:normal}
table.jobs{border-collapse:collapse;margin:8px 0} .jobs th,.jobs td{border-bottom:1px solid #e2e8f0;
padding:5px 10px;text-align:left;vertical-align:top} .jobs th{background:#f7fafc;font-weight:600}
.state{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-weight:600}
.state-healthy{background:#2f855a} .state-lagging{background:#c05621} .state-stalled{background:#c53030}
.state-dead{background:#9b2c2c} .state-failed{background:#742a2a} .state-idle{background:#718096}
.state-not_started{background:#a0aec0}
.cond{margin:4px 0;padding:6px 10px;border-left:4px solid #c05621;background:#fffaf0}
.cond.error{border-color:#c53030;background:#fff5f5} .cond .do{color:#2d3748}
.charts{display:flex;flex-wrap:wrap;gap:14px} .chart{border:1px solid #e2e8f0;padding:6px 8px;border-radius:4px}
.chart.empty{width:504px} .note{color:#718096;margin:4px 0}
.grid{stroke:#edf2f7} .tick{font-size:10px;fill:#718096} .axis{font-size:10px;fill:#4a5568}
.timeline{margin:6px 0 0;padding-left:20px} .timeline li{margin:2px 0} .timeline time{color:#4a5568;
font-family:ui-monospace,monospace;font-size:12px;margin-right:6px} .tl-kind{font-weight:600;margin-right:4px}
.tl-restart .tl-kind,.tl-incident .tl-kind{color:#c05621} .tl-give_up .tl-kind{color:#c53030}
.tl-oncall .tl-kind{color:#2b6cb0} .tl-resolved .tl-kind{color:#2f855a} .tl-lease_wait .tl-kind{color:#6b46c1}
.tl-catch-up .tl-kind,.tl-backfill .tl-kind{color:#2f855a} .tl-failed .tl-kind,.tl-retrying .tl-kind{color:#c53030}
.owner{margin:2px 0 8px;color:#2d3748} .standby-warm{color:#2f855a;font-weight:600}
.standby-warming{color:#b7791f} .standby-absent{color:#c53030}
.legend{font-size:11px;color:#4a5568} .key{margin-right:10px} .key i{display:inline-block;width:10px;height:3px;
margin:0 4px 3px 0;vertical-align:middle}
"""


def _age(seconds: float | None) -> str:
    from spark_jobs.control.monitoring.status import age_text

    return age_text(seconds)


def job_for_dag(dag_id: str):
    """The registry job a DAG runs (``<job>_continuous``, ``<job>_catchup``, ...), or None."""
    from spark_jobs.registry import JOBS

    matches = [job for name, job in JOBS.items() if dag_id == name or dag_id.startswith(f"{name}_")]
    return max(matches, key=lambda job: len(job.name)) if matches else None


def _supervisor_cell(health) -> str:
    if health.supervisor is None:
        return "none"
    state = health.supervisor.get("state") or "?"
    said = health.supervision if health.supervision and health.supervision != state else ""
    return f"{escape(state.replace('_', ' '))}<br><small>{escape(said)}</small>"


def _data(value) -> str:
    """A data attribute's value: empty for None."""
    return "" if value is None else escape(str(value))


def _restarts_cell(health) -> str:
    counts = health.restarts
    if counts is None:
        return "-"
    last = (f"<br><small>last {escape(counts['last_at'] or '')}: {escape((counts['last_reason'] or '')[:160])}</small>"
            if counts["last_at"] else "")
    budget = f"/{health.max_restarts}" if health.max_restarts else ""
    return (f'{counts["this_run"]} this run · {counts["in_window"]}{budget} in {counts["window_seconds"] / 60:.0f} min'
            f' · {counts["all_time"]} in all{last}')


def _standby_cell(health) -> str:
    from spark_jobs.control.monitoring.health import standby_text

    standby = health.standby
    if not standby:
        return "-"
    setting = f"<br><small>{escape(standby['setting'])}</small>" if standby.get("setting") else ""
    return f'<span class="standby standby-{escape(standby["state"])}">{escape(standby_text(standby))}</span>{setting}'


def _row(health) -> str:
    from spark_jobs.control.monitoring.status import backlog_text, commit_text, driver_text, freshness_text

    alerts = ", ".join(sorted({c.code for c in health.conditions})) or "none"
    counts, standby = health.restarts or {}, health.standby or {}
    return (f'<tr data-job="{escape(health.job)}" data-state="{health.state}" '
            f'data-backlog="{_data(health.backlog_files)}" data-backlog-bytes="{_data(health.backlog_bytes)}" '
            f'data-backlog-age="{_data(health.backlog_age_seconds)}" '
            f'data-freshness="{_data(health.freshness_seconds)}" '
            f'data-restarts-run="{_data(counts.get("this_run"))}" data-restarts-window="{_data(counts.get("in_window"))}" '
            f'data-restarts-all="{_data(counts.get("all_time"))}" data-standby="{_data(standby.get("state"))}" '
            f'data-last-commit-batch="{_data(health.latest_commit_batch)}">'
            f'<td><a href="#job-{escape(health.job)}">{escape(health.job)}</a></td>'
            f'<td><span class="state state-{health.state}">{escape(health.state.replace("_", " "))}</span></td>'
            f'<td>{escape(commit_text(health))}<br><small>{escape(health.last_commit_time or "")}</small></td>'
            f'<td class="freshness">{escape(freshness_text(health))}</td>'
            f'<td class="backlog">{escape(backlog_text(health))}{_consumer_lag(health)}</td>'
            f'<td class="driver">{escape(driver_text(health))}</td>'
            f'<td class="restarts">{_restarts_cell(health)}</td><td class="standby">{_standby_cell(health)}</td>'
            f'<td>{_supervisor_cell(health)}</td><td class="alerts">{escape(alerts)}</td></tr>')


def _consumer_lag(health) -> str:
    """A Kafka job's backlog in words: messages behind per partition, and how old the oldest waiting one is."""
    lag = (health.report or {}).get("consumer_lag")
    if not lag:
        return ""
    parts = ", ".join(f"{p['topic']}/{p['partition']}: {p['lag']}" for p in lag["partitions"])
    return (f'<br><small class="consumer-lag">messages; oldest waiting {lag["max_lag_seconds"]:.0f} s<br>'
            f'{escape(parts)}</small>')


def _timeline_label(entry) -> str:
    label = entry.kind.replace("_", " ")
    if entry.kind in ("catch-up", "backfill"):
        if entry.outcome in ("failed", "retrying", "refused"):
            return f"{label} {'refused' if entry.outcome == 'refused' else 'failed'}"
    return label


def _timeline(entries: list) -> str:
    """The job's timeline, oldest first (each entry's kind, time, outcome, requester and approver, a run's rows and
    files as data attributes)."""
    if not entries:
        return ('<p class="note timeline-empty">Timeline: nothing recorded yet (no catch-up or backfill run, incident, '
                'restart or on-call action)</p>')
    items = "".join(
        f'<li class="tl-{escape(e.kind)} tl-{escape(e.outcome or "")}" data-kind="{escape(e.kind)}" '
        f'data-at="{escape(e.at.isoformat())}" '
        f'data-requested-by="{escape(e.requested_by or "")}" data-decided-by="{escape(e.decided_by or "")}" '
        f'data-outcome="{escape(e.outcome or "")}" data-rows="{"" if e.rows is None else e.rows}" '
        f'data-files="{"" if e.files is None else e.files}"><time>{escape(e.at.strftime("%Y-%m-%d %H:%M:%S"))}</time>'
        f'<span class="tl-kind">{escape(_timeline_label(e))}</span>{escape(e.summary)}</li>' for e in entries)
    return (f'<h4>Timeline <small>(catch-up and backfill runs, incidents, supervisor events, on-call actions; UTC, '
            f'oldest first)</small></h4><ol class="timeline">{items}</ol>')


def _versions(view: dict | None) -> str:
    """A continuous job's version lines: the running version, the one on probation and how far, a rollout under way,
    the last rollout or rollback (:mod:`spark_jobs.control.rollout.versions`), their values as data attributes."""
    from spark_jobs.control.rollout.versions import version_lines

    if not view:
        return ""
    probation, last = view.get("probation") or {}, view.get("last") or {}
    return (f'<p class="owner versions" data-version="{_data(view.get("running"))}" '
            f'data-probation-version="{_data(probation.get("version"))}" '
            f'data-probation-batches="{_data(probation.get("batches"))}" '
            f'data-last-rollout-version="{_data(last.get("version"))}" '
            f'data-last-rollout-phase="{_data(last.get("phase"))}">'
            + "<br>".join(escape(line) for line in version_lines(view)) + "</p>")


def _section(health, rows: list[dict], tables: list[str], timeline: list | None = None) -> str:
    from spark_jobs.control.monitoring.plots import current_generation, job_charts, render
    from spark_jobs.control.monitoring.quarantine_reasons import reasons_text

    conditions = "".join(
        f'<div class="cond {c.severity}" data-condition="{c.code}"><b>{escape(c.code)}</b> '
        f'[{c.severity}]: {escape(c.summary)}<div class="do">Do: {escape(c.action)}</div></div>'
        for c in health.conditions)
    incidents = "".join(f'<p class="note">incident <b>{escape(i["code"])}</b> open since {escape(i["opened_at"])} '
                        f"(alert sent)</p>" for i in health.incidents)
    driver = health.driver or {}
    ui = (driver.get("details") or {}).get("spark_ui")
    links = f' · Spark UI <a href="{escape(ui)}">{escape(ui)}</a> (Prometheus: {escape(ui)}/metrics/prometheus/)' \
        if ui and health.state in ("healthy", "lagging", "stalled") else ""
    rows, earlier = current_generation(rows)
    charts = "".join(render(chart) for chart in job_charts(rows, tables))
    shown = (f"the last {len(rows)} micro-batches of the current checkpoint (query {rows[-1].get('query_id')})"
             if rows else "no micro-batch recorded yet")
    if earlier:
        shown += (f"; {earlier} earlier micro-batches of a previous checkpoint (before it was reset, its batch ids "
                  "started again at 0) are not plotted")
    owner = (f'<p class="owner" data-owner="{escape(health.owner or "")}">Owner: {escape(health.owner or "?")}'
             + (f"; supervisor: {escape(health.supervision)}" if health.supervision else "") + "</p>")
    if health.discovery:  # how it finds its files: the window, the queue's backlog, the last reconcile
        owner += f'<p class="owner" data-discovery="1">Input: {escape(health.discovery)}</p>'
    owner += ('<p class="owner" data-lineage="1">Lineage (the runs that wrote each table, OpenLineage): '
              + ", ".join(f'<a href="{URL_PREFIX}/lineage/{escape(t)}">{escape(t)}</a>' for t in tables) + "</p>")
    owner += _versions(health.version)
    quarantined = reasons_text(health.quarantine_reasons)
    if quarantined:  # what the quarantine tables hold, by reason (the metric streaming_quarantined_records)
        owner += (f'<p class="owner" data-quarantine-reasons="{escape(json.dumps(health.quarantine_reasons))}">'
                  f"Quarantined: {escape(quarantined)}</p>")

    return (f'<section id="job-{escape(health.job)}" data-job="{escape(health.job)}">'
            f'<h2>{escape(health.job)} <span class="state state-{health.state}">'
            f'{escape(health.state.replace("_", " "))}</span></h2>'
            f'<p class="sub">{escape(health.reason)}{links}</p>{owner}{conditions}{incidents}'
            f'<p class="note plots-note" data-earlier-batches="{earlier}">Plots: {shown} (streaming_progress)</p>'
            f'<div class="charts">{charts}</div>'
            f'{"" if timeline is None else _timeline(timeline)}</section>')


def render_page(healths: list, progress: dict[str, list[dict]], lake: str, title: str = "Streaming health",
                timelines: dict[str, list] | None = None) -> str:
    """The whole HTML page for ``healths`` (one per job), each job's progress rows and timeline entries."""
    from spark_jobs.registry import JOBS

    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    head = ("<tr><th>job</th><th>state</th><th>last commit</th><th>freshness <small>(landing to commit)</small></th>"
            "<th>backlog</th><th>driver</th><th>restarts</th><th>warm standby</th><th>supervisor</th><th>alerts</th></tr>")
    rows = "".join(_row(h) for h in healths)
    sections = "".join(_section(h, progress.get(h.job, []), [t.name for t in JOBS[h.job].tables],
                                None if timelines is None else timelines.get(h.job, [])) for h in healths)
    return (f'<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" '
            f'content="{REFRESH_SECONDS}"><title>{escape(title)}</title><style>{STYLE}</style></head><body>'
            f"<h1>{escape(title)}</h1><p class='sub'>lake {escape(lake)} · checked {now} · refreshes every "
            f"{REFRESH_SECONDS} s · the same summary in a terminal: <code>python -m spark_jobs status</code></p>"
            f'<table class="jobs">{head}{rows}</table>{sections}</body></html>')


def render_lineage(table: str, dataset: str, runs: list) -> str:
    """The runs that wrote ``table`` (:func:`spark_jobs.control.lineage.reading.table_runs`), newest first."""
    head = ("<tr><th>started</th><th>state</th><th>rows</th><th>DAG</th><th>DAG run</th><th>task (try)</th>"
            "<th>Spark run</th><th>inputs</th></tr>")
    rows = "".join(
        f'<tr data-run="{escape(r.run_id)}"><td>{escape(r.started or "?")}</td><td>{escape(r.state)}</td>'
        f"<td>{r.rows}</td><td>{escape(r.dag_id or '-')}</td><td>{escape(r.dag_run_id or '-')}</td>"
        f"<td>{escape(r.parent_job or 'not started by Airflow')}"
        f"{'' if r.try_number is None else f' ({r.try_number})'}</td><td><code>{escape(r.run_id)}</code></td>"
        f"<td>{escape(', '.join(r.inputs))}</td></tr>" for r in reversed(runs))
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>Lineage: {escape(table)}</title>'
            f"<style>{STYLE}</style></head><body><h1>Lineage: {escape(table)}</h1><p class='sub'>{escape(dataset)} · "
            f"{len(runs)} runs wrote it (OpenLineage events in the lake) · the same in a terminal: "
            f"<code>python -m spark_jobs lineage {escape(table)}</code></p><table class='jobs'>{head}{rows}</table>"
            f'<p><a href="{URL_PREFIX}/">Streaming health</a></p></body></html>')


def create_app():
    """The FastAPI app (every route asks the auth manager: :mod:`streaming.access`)."""
    from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    from streaming.access import may_dag, requires, requires_login
    from streaming.oncall_approvals import router as oncall_router
    from streaming.roles import HEALTH_RESOURCE

    # No /docs, /redoc or /openapi.json: they would answer without asking the auth manager.
    app = FastAPI(title="Streaming health", dependencies=[Depends(requires_login())], docs_url=None, redoc_url=None,
                  openapi_url=None)
    health = APIRouter(dependencies=[Depends(requires("GET", HEALTH_RESOURCE))])

    def lake_root() -> str:
        from spark_jobs.model.lake import resolve_lake_root

        return str(resolve_lake_root())

    def page(jobs: list, title: str) -> HTMLResponse:
        from spark_jobs.control.monitoring.health import check_job
        from spark_jobs.control.monitoring.history import read_progress
        from spark_jobs.control.monitoring.timeline import job_timeline
        from spark_jobs.model.lake import Lake

        lake = lake_root()
        now = datetime.now(timezone.utc)
        healths = [check_job(job, lake, now=now) for job in jobs]
        progress = {job.name: read_progress(lake, job.name, limit=PAGE_BATCHES, days=job.progress.retention_days)
                    for job in jobs}
        timelines = {job.name: job_timeline(job, Lake.at(lake)) for job in jobs}
        return HTMLResponse(render_page(healths, progress, lake, title, timelines))

    @health.get("/", response_class=HTMLResponse)
    def overview() -> HTMLResponse:
        from spark_jobs.registry import JOBS

        return page(list(JOBS.values()), "Streaming health")

    def registry_job(name: str):
        """The registry's job ``name``; a 404 with the registry's message for a name it does not know."""
        from spark_jobs.model.errors import UsageError
        from spark_jobs.registry import get_job

        try:
            return get_job(name)
        except UsageError as error:
            raise HTTPException(404, str(error)) from None

    @health.get("/job/{job}", response_class=HTMLResponse)
    def one_job(job: str) -> HTMLResponse:
        return page([registry_job(job)], f"Streaming health: {job}")

    @health.get("/dag/{dag_id}", response_class=HTMLResponse)
    def dag_tab(dag_id: str, user=Depends(requires_login())) -> HTMLResponse:
        if not may_dag(user, "GET", dag_id):
            raise HTTPException(403, f"{user.get_name()} may not read the DAG {dag_id}")
        job = job_for_dag(dag_id)
        if job is None:
            return HTMLResponse(f'<!doctype html><html><head><meta charset="utf-8"><style>{STYLE}</style></head>'
                                f'<body><p class="note">DAG {escape(dag_id)} runs no streaming job of the registry.'
                                f'</p></body></html>')
        return page([job], f"Streaming health: {job.name}")

    @health.get("/api/status")
    def status() -> JSONResponse:
        from spark_jobs.control.monitoring.status import collect

        lake = lake_root()
        return JSONResponse(json.loads(json.dumps(
            {"lake": lake, "checked_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "jobs": [h.to_dict() for h in collect(lake)]}, default=str)))

    @health.get("/api/jobs/{job}/timeline")
    def timeline(job: str) -> JSONResponse:
        from spark_jobs.control.monitoring.timeline import job_timeline
        from spark_jobs.model.lake import Lake

        return JSONResponse([entry.to_dict() for entry in job_timeline(registry_job(job), Lake.at(lake_root()))])

    def lineage_runs(table: str):
        from spark_jobs.control.lineage.reading import table_runs
        from spark_jobs.registry import all_tables

        if table not in all_tables():
            raise HTTPException(404, f"no table {table!r}; the tables: {', '.join(sorted(all_tables()))}")
        return table_runs(lake_root(), table)

    @health.get("/lineage/{table}", response_class=HTMLResponse)
    def lineage(table: str) -> HTMLResponse:
        dataset, runs = lineage_runs(table)
        return HTMLResponse(render_lineage(table, f"{dataset.namespace}:{dataset.name}", runs))

    @health.get("/api/lineage/{table}")
    def lineage_json(table: str) -> JSONResponse:
        return JSONResponse([found.to_dict() for found in lineage_runs(table)[1]])

    @health.get("/metrics")
    def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        from spark_jobs.control.monitoring.metrics import exposition

        return Response(exposition(lake_root()), media_type=CONTENT_TYPE_LATEST)

    @health.get("/api/jobs/{job}/progress")
    def progress(job: str, limit: int = Query(PAGE_BATCHES, ge=1, le=10_000)) -> JSONResponse:
        from spark_jobs.control.monitoring.history import read_progress

        registry_job(job)
        rows = read_progress(lake_root(), job, limit=limit)
        return JSONResponse(json.loads(json.dumps(rows, default=str)))

    app.include_router(health)
    app.include_router(oncall_router(STYLE))
    return app
