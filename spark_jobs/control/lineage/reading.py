"""The runs that wrote a table, read back from the OpenLineage event files in the lake, nothing else.

The drivers' events (``<lake>/_lineage/spark/``, :mod:`.emitter`) say which Spark run wrote which table, from
which inputs, how many rows, and which Airflow task run was its parent (the ``parent`` facet: job
``<dag_id>.<task_id>``, the task run's id; the root: the DAG). The Airflow provider's events
(``<lake>/_lineage/airflow/``, the file transport ``make airflow`` configures) carry the same task run's id, and
with it the DAG run's id and the try: joined by that id, a run reads as "DAG run X, task Y, try Z".
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Iterator

from spark_jobs.control.lineage.naming import DatasetName

log = logging.getLogger("spark_jobs.lineage")

END_STATES = {"COMPLETE", "FAIL", "ABORT"}


@dataclass
class WritingRun:
    """One Spark run that wrote the table, as its events tell it.

    :param run_id: the Spark run's OpenLineage run id.
    :param job: ``<namespace>/<name>`` of the Spark job.
    :param started: its ``START`` event's time.
    :param state: its last event's type (``RUNNING`` while it lives, then ``COMPLETE``, ``FAIL`` or ``ABORT``).
    :param rows: rows it wrote into the table (so far).
    :param inputs: what it read, ``namespace:name`` with the files read.
    :param parent_job: the Airflow task (``<dag_id>.<task_id>``), or None for a run started by hand.
    :param parent_run_id: the Airflow task run's OpenLineage run id.
    :param dag_id: the DAG (the parent's root job).
    :param dag_run_id: the Airflow DAG run's id, from the provider's events of the parent run.
    :param try_number: the task's try, from the same events.
    :param stream: the stream (``<job>`` or ``<job>@<writer>``).
    :param trigger: its trigger.
    """

    run_id: str
    job: str
    started: str | None = None
    ended: str | None = None
    state: str = ""
    rows: int = 0
    inputs: list[str] = field(default_factory=list)
    parent_job: str | None = None
    parent_run_id: str | None = None
    dag_id: str | None = None
    dag_run_id: str | None = None
    try_number: int | None = None
    stream: str | None = None
    trigger: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def event_files(folder: str) -> list[str]:
    """The JSON files under ``folder`` (a local folder or an fsspec URL), oldest name first; none if it is missing."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(folder)
    if not fs.exists(root):
        return []
    protocol = "" if "://" not in folder else folder.split("://", 1)[0] + "://"
    return sorted(f"{protocol}{path}" if protocol else path for path in fs.find(root) if path.endswith(".json"))


def read_events(folder: str) -> Iterator[dict]:
    """Every event in the files under ``folder`` (a file holds one event, or one per line when appended to);
    a line that is not an event is skipped with a log line."""
    import fsspec

    for path in event_files(folder):
        with fsspec.open(path, "r", encoding="utf-8") as handle:
            for line in handle.read().splitlines():
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError:
                    log.warning("lineage: %s holds a line that is not JSON; skipped", path)


def _time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def airflow_task_runs(events: Iterator[dict]) -> dict[str, dict]:
    """The Airflow provider's task runs by their run id: the DAG run's id and the try (its ``airflow`` facet)."""
    runs: dict[str, dict] = {}
    for event in events:
        run = event.get("run") or {}
        facet = (run.get("facets") or {}).get("airflow") or {}
        dag_run = facet.get("dagRun") or {}
        task_instance = facet.get("taskInstance") or {}
        if run.get("runId") and (dag_run or task_instance):
            seen = runs.setdefault(run["runId"], {})
            seen.setdefault("dag_run_id", dag_run.get("run_id"))
            seen.setdefault("try_number", task_instance.get("try_number"))
    return runs


def runs_that_wrote(table: DatasetName, spark_events: Iterator[dict], airflow_events: Iterator[dict] = iter(()),
                    since: dt.datetime | None = None, include_empty: bool = False) -> list[WritingRun]:
    """The Spark runs whose events name ``table`` as an output, oldest first.

    :param since: only runs that started at or after it.
    :param include_empty: also the runs that wrote no row into it.
    """
    runs: dict[str, WritingRun] = {}
    for event in sorted(spark_events, key=lambda e: e.get("eventTime", "")):
        outputs = [o for o in event.get("outputs") or [] if (o.get("namespace"), o.get("name")) == (table.namespace,
                                                                                                      table.name)]
        if not outputs:
            continue
        run = event["run"]
        facets = run.get("facets") or {}
        job = event.get("job") or {}
        found = runs.setdefault(run["runId"], WritingRun(run_id=run["runId"],
                                                         job=f"{job.get('namespace')}/{job.get('name')}"))
        state = event.get("eventType") or ""
        found.state = state
        found.started = found.started or event.get("eventTime")  # the events come oldest first
        if state in END_STATES:
            found.ended = event.get("eventTime")
        statistics = (outputs[0].get("outputFacets") or {}).get("outputStatistics") or {}
        found.rows = max(found.rows, int(statistics.get("rowCount") or 0))
        found.inputs = [f"{i.get('namespace')}:{i.get('name')}" + _files(i) for i in event.get("inputs") or []]
        own = facets.get("spark_jobs") or {}
        found.stream, found.trigger = own.get("stream", found.stream), own.get("trigger", found.trigger)
        parent = facets.get("parent") or {}
        if parent:
            found.parent_job = (parent.get("job") or {}).get("name")
            found.parent_run_id = (parent.get("run") or {}).get("runId")
            root = parent.get("root") or {}
            found.dag_id = (root.get("job") or {}).get("name") or (found.parent_job or "").split(".")[0] or None
    tasks = airflow_task_runs(airflow_events)
    chosen = []
    for found in runs.values():
        if since is not None and (_time(found.started) or since) < since:
            continue
        if not include_empty and found.rows == 0:
            continue
        task = tasks.get(found.parent_run_id or "") or {}
        found.dag_run_id, found.try_number = task.get("dag_run_id"), task.get("try_number")
        chosen.append(found)
    return sorted(chosen, key=lambda r: r.started or "")


def table_runs(lake_root, table: str, since: dt.datetime | None = None,
               include_empty: bool = False) -> tuple[DatasetName, list[WritingRun]]:
    """The table's dataset name and the runs that wrote it, from the event files of the lake at ``lake_root``
    (``python -m spark_jobs lineage`` and the health page's lineage view)."""
    from spark_jobs.control.lineage.emitter import AIRFLOW_EVENTS, events_dir
    from spark_jobs.control.lineage.naming import path_dataset
    from spark_jobs.model.lake import Lake

    lake = Lake.at(lake_root)
    dataset = path_dataset(lake.table_path(table))
    airflow = read_events(f"{str(lake.root).rstrip('/')}/_lineage/{AIRFLOW_EVENTS}")
    return dataset, runs_that_wrote(dataset, read_events(events_dir(lake.root)), airflow, since=since,
                                    include_empty=include_empty)


def _files(dataset: dict) -> str:
    statistics = (dataset.get("inputFacets") or {}).get("inputStatistics") or {}
    count = statistics.get("fileCount")
    return f" ({count} files)" if count else ""
