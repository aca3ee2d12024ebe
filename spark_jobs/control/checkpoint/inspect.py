"""Checkpoint health without Spark: ``python -m spark_jobs checkpoint inspect JOB [--json]``.

:func:`inspect_checkpoint` reads a job's checkpoint (``metadata``, ``offsets/``, ``commits/``,
``sources/`` with its ``.compact`` files, ``state/``), its input listing, its tables' logs, the
driver's lease and the supervisor's state, and returns a :class:`CheckpointReport`: where the stream
is, what is waiting, who holds it, and every problem with a plain explanation and the safe action.
Airflow's sensors, the supervisor, the CLI and the doctor (:mod:`spark_jobs.control.checkpoint.repair`)
share it; it imports no pyspark and works on local paths and fsspec URLs.

Statuses (the supervisor acts on them):

==============  ===================================================================================
``not_started`` no checkpoint yet (or an empty one), and no live driver
``idle``        no live driver, nothing blocking a start (an uncommitted batch is re-run at start)
``healthy``     a live driver, nothing planned and uncommitted, backlog within the limit
``in_flight``   a live driver is running a planned, uncommitted batch
``lagging``     a live driver, more input waiting than ``HealthThresholds.max_pending_files``
``stalled``     the driver's process runs but its lease heartbeat is older than the ttl (a paused
                or hung driver), or no commit for ``max_batch_age_seconds`` while input waits
``dead``        the lease was not released but has expired: the driver is gone
``corrupt``     a problem of severity ``error`` that stops Spark from starting (or would lose data)
==============  ===================================================================================
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from spark_jobs.control.checkpoint.delta_source import DeltaOffset, delta_backlog, delta_source_offset
from spark_jobs.control.checkpoint.lease import LeaseInfo, read_lease
from spark_jobs.control.checkpoint.listing import list_input, max_file_age_ms
from spark_jobs.control.checkpoint.logs import (LogDamage, LogDir, OffsetsEntry, file_source_offset, parse_commit,
                                        parse_offsets, read_checked, read_source_log, scan_log_dir)
from spark_jobs.control.checkpoint.store import Location, is_url, normalize_file_uri
from spark_jobs.control.checkpoint.tables import TableProgress, recover_query_ids, table_progress
from spark_jobs.model.jobs import JobSpec

log = logging.getLogger("spark_jobs.control.checkpoint")

STATUSES = ("not_started", "idle", "healthy", "in_flight", "lagging", "stalled", "dead", "corrupt")
SEVERITIES = ("info", "warning", "error")
JOB_SOURCES = 1  # the runner reads each job's input through one source (files, or a Delta table)
TEMP_GRACE_SECONDS = 120  # a live driver's temp file younger than this is a write in progress

# Problems that stop Spark from starting, or would make it lose or skip data if it started.
BLOCKING = {"metadata_missing", "metadata_corrupt", "offsets_torn", "offsets_corrupt", "commit_torn",
            "offsets_ahead", "table_ahead_of_offsets", "source_count_changed", "source_changed",
            "source_log_corrupt", "commit_without_offsets"}


@dataclass
class Problem:
    """One thing wrong (or worth knowing) about a checkpoint.

    :param code: a stable code (see the README's problems table).
    :param severity: ``info``, ``warning`` or ``error``.
    :param explanation: what is wrong, in plain words, with the numbers.
    :param action: the safe thing to do.
    :param repair: what ``checkpoint repair`` does about it: ``fix``, ``none`` (nothing needed) or
        ``refuse`` (needs a person).
    :param files: checkpoint files the repair would delete (relative to the checkpoint).
    """

    code: str
    severity: str
    explanation: str
    action: str
    repair: str = "none"
    files: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"code": self.code, "severity": self.severity, "explanation": self.explanation,
                "action": self.action, "repair": self.repair}


@dataclass
class CheckpointReport:
    """What :func:`inspect_checkpoint` found; :meth:`to_dict` is the ``--json`` output."""

    job: str
    checkpoint: str
    control: str
    status: str = "not_started"
    query_id: str | None = None
    latest_offset_batch: int | None = None
    latest_commit_batch: int | None = None
    batch_in_flight: int | None = None
    last_commit_time: str | None = None
    last_batch_planned_time: str | None = None
    input: str | None = None
    backlog_files: int | None = None
    backlog_bytes: int | None = None
    in_flight_files: int | None = None
    ingested_files: int | None = None
    too_old_files: int | None = None
    watermark: dict | None = None
    sources: int | None = None
    source_table: dict | None = None
    consumer_lag: dict | None = None
    discovery: dict | None = None
    state: dict = field(default_factory=lambda: {"operators": []})
    stored_conf: dict = field(default_factory=dict)
    tables: dict = field(default_factory=dict)
    driver: dict | None = None
    supervisor: dict | None = None
    problems: list[Problem] = field(default_factory=list)
    inspected_at: str = ""
    # for the doctor, not part of the report
    lease: LeaseInfo | None = None
    table_progress: list[TableProgress] = field(default_factory=list)
    last_commit_moment: datetime | None = None  # the commit file's modification time, unrounded

    def to_dict(self) -> dict:
        keys = ("job", "checkpoint", "control", "status", "query_id", "latest_offset_batch", "latest_commit_batch",
                "batch_in_flight", "last_commit_time", "last_batch_planned_time", "input", "backlog_files",
                "backlog_bytes", "in_flight_files", "ingested_files", "too_old_files", "watermark", "sources", "source_table", "consumer_lag", "discovery", "state",
                "stored_conf",
                "tables", "driver", "supervisor", "inspected_at")
        out = {key: getattr(self, key) for key in keys}
        out["problems"] = [problem.to_dict() for problem in self.problems]
        return out

    def problem(self, code: str) -> Problem | None:
        return next((p for p in self.problems if p.code == code), None)

    def add(self, code: str, severity: str, explanation: str, action: str, repair: str = "none",
            files: list[str] | None = None, **data) -> Problem:
        problem = Problem(code, severity, explanation, action, repair, list(files or []), data)
        self.problems.append(problem)
        return problem


def _commits_end(report: "CheckpointReport") -> str:
    batch = report.latest_commit_batch
    return "no batch is committed" if batch is None else f"commits end at {batch}"


def _span(batches: list[int]) -> str:
    return f"batch {batches[0]}" if len(batches) == 1 else f"batches {batches[0]}..{batches[-1]}"


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds") if moment else None


def _ms_iso(ms: int | None) -> str | None:
    return _iso(datetime.fromtimestamp(ms / 1000, timezone.utc)) if ms else None


def lake_location(lake_root: str | os.PathLike | None) -> Location:
    """The lake root as a :class:`Location` (``$LAKE_ROOT``, else ``./lake`` when not given)."""
    if lake_root is not None and is_url(str(lake_root)):
        return Location.of(str(lake_root))
    from spark_jobs.model.lake import resolve_lake_root

    return Location.of(str(resolve_lake_root(lake_root)))


def input_location(job: JobSpec, given: str | os.PathLike | None, lake: Location | None = None) -> Location:
    """The landing folder as the runner resolves it: ``given``, else ``$<JOB>_INPUT``, else the registry's.
    For a job reading a Delta table: ``given``, else the table's folder in ``lake``."""
    if job.source.kind == "delta" and not given:
        return (lake or lake_location(None)).child("tables", job.source.table)
    from spark_jobs.model.inputs import input_path, named_input

    chosen = named_input(job, given)
    return Location.of(chosen) if is_url(chosen) else Location.of(str(input_path(job, given)))


def read_supervisor(control: Location) -> dict | None:
    """The supervisor's state (``<control>/supervisor.json``), or None."""
    try:
        from spark_jobs.control.supervision.state import read_supervisor_state
    except ImportError:
        read_supervisor_state = None
    if read_supervisor_state is not None:
        return read_supervisor_state(control.url)
    target = control.child("supervisor.json")
    try:
        return json.loads(target.read_bytes())
    except (FileNotFoundError, ValueError):
        return None


def _driver(lease: LeaseInfo | None, now: datetime) -> dict | None:
    if lease is None or lease.released:
        return None
    return {**lease.to_dict(), "heartbeat_age_seconds": round(lease.heartbeat_age(now), 1),
            "alive": lease.alive_locally(), "expired": lease.expired(now)}


def inspect_checkpoint(job: JobSpec, lake_root: str | os.PathLike | None, input_path: str | os.PathLike | None = None,
                       now: datetime | None = None, queue_url: str | None = None) -> CheckpointReport:
    """Inspect ``job``'s checkpoint under ``lake_root`` (a path or fsspec URL).

    :param job: the registry entry.
    :param lake_root: the lake root (``None``: ``$LAKE_ROOT`` or ``./lake``).
    :param input_path: the landing folder (default: as the runner resolves it).
    :param now: the time to judge ages by (default: now).
    :param queue_url: a stream that reads S3 event notifications: its SQS queue (default: ``$<JOB>_QUEUE_URL``,
        else the queue the stream last read, from its ``discovery/status.json``; ``""``: a listing stream).
    """
    now = now or datetime.now(timezone.utc)
    lake = lake_location(lake_root)
    checkpoint = lake.child("checkpoints", job.name)
    control = lake.child("control", job.name)
    report = CheckpointReport(job=job.name, checkpoint=checkpoint.url, control=control.url, inspected_at=_iso(now))

    lease = read_lease(control.url)
    report.lease = lease
    report.driver = _driver(lease, now)
    live = lease is not None and not lease.released and not lease.expired(now)
    report.supervisor = read_supervisor(control)

    offsets = scan_log_dir(checkpoint.child("offsets"))
    commits = scan_log_dir(checkpoint.child("commits"))
    report.latest_offset_batch = offsets.latest
    report.latest_commit_batch = commits.latest
    started = offsets.latest is not None or commits.latest is not None
    _read_metadata(report, checkpoint, started)
    committed = commits.latest if commits.latest is not None else -1

    entries = _read_offsets(report, offsets, committed, job)
    _read_commits(report, commits, offsets)
    report.table_progress = [table_progress(lake.child("tables", t.name), t.name, report.query_id) for t in job.tables]
    report.tables = {t.name: t.to_dict() for t in report.table_progress}
    if report.query_id is None and started:
        report.tables["recoverable_query_ids"] = {k: sorted(v) for k, v in recover_query_ids(report.table_progress).items()}
    _compare_tables(report, committed)
    if offsets.latest is not None and offsets.latest > committed:
        report.batch_in_flight = offsets.latest
        if not live and not report.problem("offsets_torn"):
            report.add("uncommitted_batch", "info",
                       f"batch {offsets.latest} was planned (offsets/{offsets.latest}) but never committed: its "
                       "driver stopped or was killed before the batch reached every table",
                       "nothing to do: at the next start Spark re-runs it with the same input files, and a table "
                       "that already holds it skips it (idempotent writes)")
    _temp_files(report, checkpoint, live, now)
    _state(report, checkpoint)
    if job.source.kind == "delta":
        _delta_backlog(report, input_location(job, input_path, lake), entries, committed)
    elif job.source.kind == "kafka":
        from spark_jobs.control.checkpoint.kafka_source import kafka_backlog

        kafka_backlog(report, job, input_path, entries, committed, now)
    elif _discovers(job, entries):
        _discovery_backlog(report, job, checkpoint, input_path, entries, committed, now, queue_url)
    else:
        _backlog(report, job, checkpoint, input_path, entries, committed, offsets)
        if job.discovers_files:
            report.add("discovery_move_pending", "info",
                       "the checkpoint was written by Spark's file source, which lists the whole landing at every "
                       "trigger; the job now discovers its files by its key layout",
                       "nothing to do: at its next start the stream takes over the file source's log (every file "
                       "it ingested stays ingested) and from then on lists only its window")
    _status(report, job, lease, live, started, now)
    return report


def _read_metadata(report: CheckpointReport, checkpoint: Location, started: bool) -> None:
    metadata = checkpoint.child("metadata")
    try:
        data = metadata.read_bytes()
    except FileNotFoundError:
        if started:
            report.add("metadata_missing", "error",
                       "the checkpoint's `metadata` file (the stream's id) is gone while its offsets and commits are "
                       "there; Spark refuses to start (STREAMING_CHECKPOINT_MISSING_METADATA_FILE), and a new id "
                       "would also break the tables' idempotent writes (their app id is '<query id>:<table>')",
                       "`checkpoint repair --apply` writes it back when the tables' Delta app ids prove the id; "
                       "otherwise restore it from a backup, or start a new checkpoint and reprocess",
                       repair="fix")
        return
    try:
        value = json.loads(data.decode("utf-8").splitlines()[0])
        report.query_id = str(value["id"])
    except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError):
        report.add("metadata_corrupt", "error",
                   f"the checkpoint's `metadata` file is not readable ({len(data)} bytes; it should be "
                   "{\"id\": \"<query id>\"}); Spark cannot start from it",
                   "`checkpoint repair --apply` rewrites it when the tables' Delta app ids prove the id; otherwise "
                   "restore it from a backup, or start a new checkpoint and reprocess", repair="fix")


def _log_files(log: LogDir, batch: int, prefix: str) -> list[str]:
    names = [f"{prefix}/{log.batches[batch]}"]
    crc = log.crcs.get(log.batches[batch])
    if crc:
        names.append(f"{prefix}/{crc}")
    return names


def _read_offsets(report: CheckpointReport, offsets: LogDir, committed: int,
                  job: JobSpec) -> dict[int, OffsetsEntry]:
    """Parse the offsets Spark reads at start: the last committed batch's and every later one."""
    entries: dict[int, OffsetsEntry] = {}
    for batch in sorted(b for b in offsets.batches if b >= committed):
        try:
            entries[batch] = parse_offsets(read_checked(offsets, batch))
        except LogDamage as exc:
            if batch > committed:
                report.add("offsets_torn", "error",
                           f"offsets/{batch}, the plan of batch {batch} which was never committed, is damaged: {exc}; "
                           "Spark fails at start reading it",
                           "`checkpoint repair --apply` deletes it (after checking no table holds batch "
                           f"{batch}); Spark then plans batch {batch} again from the input", repair="fix",
                           files=_log_files(offsets, batch, "offsets"), batch=batch,
                           why_safe=f"batch {batch} was never committed and no table holds it, so nothing written "
                                    "depends on this plan; Spark plans the batch again at start")
            else:
                report.add("offsets_corrupt", "error",
                           f"offsets/{batch}, the plan of committed batch {batch}, is damaged: {exc}; Spark needs it "
                           "to know where to resume",
                           "not repairable in place (the batch's input range is lost): restore the checkpoint from "
                           "a backup, or start a new checkpoint and reprocess", repair="refuse", batch=batch)
    latest = max(entries) if entries else None
    if latest is not None:
        entry = entries[latest]
        report.sources = len(entry.sources)
        report.last_batch_planned_time = _ms_iso(entry.timestamp_ms)
        report.stored_conf = entry.conf
        report.watermark = {"batch_watermark_ms": entry.watermark_ms, "batch_watermark": _ms_iso(entry.watermark_ms)}
        if len(entry.sources) != JOB_SOURCES:
            report.add("source_count_changed", "error",
                       f"the checkpoint's offsets hold {len(entry.sources)} sources and the job reads "
                       f"{JOB_SOURCES}: the query's sources changed since the checkpoint was written; Spark refuses "
                       "to start ('There are [N] sources in the checkpoint offsets and now there are [M]')",
                       "two ways out: revert the code change, or start a new checkpoint and reprocess",
                       repair="refuse")
        elif entry.sources[0] is not None and _offset_of(job, entry.sources[0]) is None:
            expected = {"delta": "a Delta table's ({\"reservoirVersion\": N, ...})",
                        "kafka": "a Kafka source's ({\"<topic>\": {\"<partition>\": offset}})"}.get(
                job.source.kind, "the landing source's ({\"v\": 1, \"manifest\": N}) or a file source's "
                                 "({\"logOffset\": N})" if job.discovers_files else "a file source's "
                                 "({\"logOffset\": N})")
            report.add("source_changed", "error",
                       f"the checkpoint's source offset {json.dumps(entry.sources[0])[:80]} is not {expected}: the "
                       "checkpoint was written by a query reading another kind of source",
                       "two ways out: revert the code change, or start a new checkpoint and reprocess",
                       repair="refuse")
    return entries


def _offset_of(job: JobSpec, offset: dict) -> int | DeltaOffset | None:
    """The source's offset as the job's kind of source writes it (None: another kind wrote it)."""
    if job.source.kind == "kafka":
        from spark_jobs.control.kafka.lag import kafka_source_offset

        return kafka_source_offset(offset)
    if job.discovers_files:  # the landing source's manifest, or the file source's offset it takes over
        from spark_jobs.control.discovery.planner import legacy_offset, manifest_of

        found = manifest_of(offset)
        return found if found is not None else legacy_offset(offset)
    return delta_source_offset(offset) if job.source.kind == "delta" else file_source_offset(offset)


def _read_commits(report: CheckpointReport, commits: LogDir, offsets: LogDir) -> None:
    if commits.latest is None:
        return
    batch = commits.latest
    try:
        value = parse_commit(read_checked(commits, batch))
    except LogDamage as exc:
        report.add("commit_torn", "error",
                   f"commits/{batch}, the record that batch {batch} reached every table, is damaged: {exc}; Spark fails "
                   "at start reading it",
                   f"`checkpoint repair --apply` deletes it: Spark then re-runs batch {batch} from its offsets, and "
                   "the tables that hold it skip it (idempotent writes)", repair="fix",
                   files=_log_files(commits, batch, "commits"), batch=batch,
                   why_safe=f"without it Spark re-runs batch {batch} from its offsets, and each table that holds "
                            "it skips it (idempotent writes)")
        return
    moment = commits.file(batch).modified()
    report.last_commit_moment = moment
    report.last_commit_time = _iso(moment)
    if report.watermark is not None:
        report.watermark["next_batch_watermark_ms"] = value.get("nextBatchWatermarkMs")
    if offsets.latest is None or batch > offsets.latest:
        report.add("commit_without_offsets", "error",
                   f"commits/{batch} exists but offsets/{batch} does not (offsets end at {offsets.latest}): the "
                   "offsets log lost files",
                   "not repairable in place: restore the checkpoint from a backup, or start a new checkpoint and "
                   "reprocess", repair="refuse")


def _compare_tables(report: CheckpointReport, committed: int) -> None:
    latest_offset = report.latest_offset_batch if report.latest_offset_batch is not None else -1
    known = [t for t in report.table_progress if t.batch is not None]
    top = max((t.batch for t in known), default=-1)
    holders = ", ".join(f"{t.name} (batch {t.batch})" for t in known)
    if top > latest_offset:
        report.add("table_ahead_of_offsets", "error",
                   f"the tables hold batches the checkpoint never planned: {holders}, while the checkpoint's offsets "
                   f"end at {report.latest_offset_batch}. Spark would plan those batch ids again with other input "
                   "files, and the tables would skip them as already written: those files would never land",
                   "refused: restore the checkpoint that wrote these tables (from a backup), or start a new "
                   "checkpoint and reprocess into new tables", repair="refuse", top=top)
        return
    if top > committed:
        report.add("table_ahead_of_checkpoint", "info",
                   f"batch {top} reached the tables ({holders}) but the checkpoint did not record its commit "
                   f"({_commits_end(report)}): the driver stopped between the table writes and the checkpoint "
                   "commit, or the commit file was lost",
                   "nothing to do: Spark re-runs the batch with the same input files and each table skips a batch it "
                   "already holds (Delta txnAppId/txnVersion; the file sink's batch log)", top=top)
    torn = report.problem("offsets_torn")
    if torn is not None:
        unknown = _unknown_tables(report)
        if top >= torn.data["batch"] or unknown:
            torn.repair = "refuse"
            torn.action = (f"refused: {'tables ' + ', '.join(unknown) + ' cannot be read' if unknown else 'a table holds batch ' + str(top)}, "
                           "so the lost plan cannot be re-made safely; restore offsets/"
                           f"{torn.data['batch']} from a backup, or start a new checkpoint and reprocess")
    if latest_offset - committed > 1:
        _offsets_ahead(report, committed, latest_offset, top)


def _unknown_tables(report: CheckpointReport) -> list[str]:
    """Tables whose batches for this stream cannot be read (so nothing about them can be proved)."""
    return [t.name for t in report.table_progress
            if t.format == "unreadable" or (t.format == "delta" and t.app_id is None)]


def _offsets_ahead(report: CheckpointReport, committed: int, latest_offset: int, top: int) -> None:
    keep = max(committed + 1, top)
    beyond = [b for b in range(keep + 1, latest_offset + 1)]
    unknown = _unknown_tables(report)
    skipped = list(range(committed + 1, latest_offset))
    why = (f"the offsets log is {latest_offset - committed} batches ahead of the commits (offsets end at "
           f"{latest_offset}, {_commits_end(report)}). Spark would only re-run the last planned batch "
           f"({latest_offset}) and take {_span(skipped)} as done")
    if not beyond:
        report.add("offsets_ahead", "info",
                   f"{why}; that is safe here: the tables hold every batch up to {top}, only the checkpoint's "
                   "commits of them are missing",
                   "nothing to do: the next start re-runs the last batch, and each table skips it if it holds it")
        return
    if unknown:
        report.add("offsets_ahead", "error",
                   f"{why}; the tables {', '.join(unknown)} cannot be read, so it cannot be proved which of those "
                   "batches reached them",
                   "refused: make the tables readable and inspect again, or restore the checkpoint from a backup",
                   repair="refuse")
        return
    report.add("offsets_ahead", "error",
               f"{why}: no table holds {_span(beyond)}, so the input files planned for "
               f"{'it' if len(beyond) == 1 else 'them'} would be skipped",
               f"`checkpoint repair --apply` deletes offsets/{beyond[0]}"
               + (f"..{beyond[-1]}" if len(beyond) > 1 else "") + f"; Spark then re-runs batch {keep} and plans "
               "the rest again from the source's log", repair="fix",
               files=[f"offsets/{b}" for b in beyond], batches=beyond,
               why_safe=f"no table holds {_span(beyond)} (their Delta txn version for '<query id>:<table>', or "
                        f"the file sink's log, ends at {top if top >= 0 else 'none'}), so nothing written depends "
                        "on these plans")


def _temp_files(report: CheckpointReport, checkpoint: Location, live: bool, now: datetime) -> None:
    folders = [checkpoint, checkpoint.child("offsets"), checkpoint.child("commits")]
    sources = checkpoint.child("sources")
    folders += [sources.child(name) for name in sources.names()]
    discovery = checkpoint.child("discovery")
    folders += [discovery, discovery.child("manifests"), discovery.child("snapshots")]
    found: list[str] = []
    for folder in folders:
        log = scan_log_dir(folder)
        prefix = folder.path[len(checkpoint.path):].strip("/")
        for name in log.temp_files + log.orphan_crcs:
            if live:
                moment = folder.child(name).modified()
                if moment is None or (now - moment).total_seconds() < TEMP_GRACE_SECONDS:
                    continue
            found.append(f"{prefix}/{name}" if prefix else name)
    if found:
        report.add("temp_files", "warning",
                   f"{len(found)} left-over temp or orphan checksum file(s) of interrupted writes: "
                   f"{', '.join(sorted(found)[:5])}{' ...' if len(found) > 5 else ''}. Spark never reads them",
                   "`checkpoint repair --apply` deletes them", repair="fix", files=sorted(found),
                   why_safe="Spark never reads temp names or checksums without their file; nothing refers to them")


def _state(report: CheckpointReport, checkpoint: Location) -> None:
    state = checkpoint.child("state")
    operators = []
    for name in state.names():
        if not name.isdigit():
            continue
        operator = state.child(name)
        versions, partitions, names = [], 0, []
        for part in operator.names():
            if part == "_metadata":
                names = _operator_names(operator.child(part))
                continue
            if not part.isdigit():
                continue
            partitions += 1
            numbers = [int(f.split(".")[0]) for f in operator.child(part).names()
                       if f.split(".")[0].isdigit() and f.endswith((".delta", ".snapshot", ".zip", ".changelog"))]
            if numbers:
                versions.append(max(numbers))
        operators.append({"id": int(name), "names": names, "partitions": partitions,
                          "latest_version": max(versions) if versions else None})
    report.state = {"operators": sorted(operators, key=lambda o: o["id"])}


def _operator_names(metadata: Location) -> list[str]:
    names = []
    for name in metadata.names():
        target = metadata.child(name)
        if target.isdir():
            continue
        try:
            for line in target.read_bytes().decode("utf-8").splitlines()[1:]:
                info = json.loads(line).get("operatorInfo") or {}
                if info.get("operatorName"):
                    names.append(info["operatorName"])
        except (ValueError, UnicodeDecodeError, AttributeError):
            continue
    return sorted(set(names))


def _backlog(report: CheckpointReport, job: JobSpec, checkpoint: Location, given, entries, committed, offsets) -> None:
    root = input_location(job, given)
    report.input = root.url
    if not root.isdir():
        report.add("input_missing", "warning", f"the input folder {root.url} does not exist, so the backlog is unknown",
                   f"pass --input, or set ${job.input_env_var}, to the landing folder")
        return
    options = dict(job.file_source_options)
    source_log = scan_log_dir(checkpoint.child("sources", "0"))
    try:
        logged = read_source_log(source_log)
    except LogDamage as exc:
        report.add("source_log_corrupt", "error", f"the file source's log is damaged: {exc}; Spark fails at start "
                   "reading it", "not repairable in place: restore the checkpoint from a backup, or start a new "
                   "checkpoint and reprocess", repair="refuse")
        return
    committed_offset = planned_offset = -1
    if committed >= 0 and committed in entries:
        committed_offset = file_source_offset(entries[committed].sources[0]) if entries[committed].sources else -1
    if entries:
        latest = entries[max(entries)]
        planned_offset = file_source_offset(latest.sources[0]) if latest.sources else -1
    committed_offset = -1 if committed_offset is None else committed_offset
    planned_offset = -1 if planned_offset is None else planned_offset
    if report.batch_in_flight is None:
        planned_offset = committed_offset
    seen = {normalize_file_uri(e["path"]): int(e.get("batchId", -1)) for e in logged}
    listed = list_input(root, options)
    age = max_file_age_ms(options)
    newest = max((int(e.get("timestamp", 0)) for e in logged), default=0)
    too_old = size = 0
    backlog = sum(1 for b in seen.values() if b > planned_offset)
    for item in listed:
        if item.key in seen:
            size += item.size if seen[item.key] > planned_offset else 0
            continue
        if seen and age is not None and item.mtime_ms < newest - age:
            too_old += 1
            continue
        backlog += 1
        size += item.size
    report.backlog_files, report.backlog_bytes = backlog, size
    report.ingested_files = sum(1 for b in seen.values() if b <= committed_offset)
    report.in_flight_files = sum(1 for b in seen.values() if committed_offset < b <= planned_offset)
    report.too_old_files = too_old
    if too_old:
        report.add("files_too_old", "warning",
                   f"{too_old} input file(s) are older than the newest ingested file by more than maxFileAge; Spark's "
                   "file source never reads them",
                   "land files with current modification times, or raise the job's maxFileAge file-source option")
    if seen and listed and root.local:
        prefix = normalize_file_uri(root.path).rstrip("/") + "/"
        if not any(key.startswith(prefix) for key in seen):
            report.add("input_changed", "warning",
                       f"the checkpoint ingested files from another folder than {root.url} (e.g. "
                       f"{next(iter(seen))}); with this input every file counts as new",
                       "pass the --input the job runs with; if the job's input really moved, its files are read "
                       "again (cloudtrail_events keeps one row per eventID; other tables may get duplicates)")


def _discovers(job: JobSpec, entries: dict[int, OffsetsEntry]) -> bool:
    """Whether the checkpoint's stream reads through discovery: the job declares a key layout and its offsets (if
    any) are discovery's, not the file source's (that one moves at the next start)."""
    if not job.discovers_files:
        return False
    from spark_jobs.control.discovery.planner import legacy_offset

    latest = entries[max(entries)].sources[0] if entries else None
    return legacy_offset(latest) is None


def _discovery_backlog(report: CheckpointReport, job: JobSpec, checkpoint: Location, given,
                       entries: dict[int, OffsetsEntry], committed: int, now: datetime,
                       queue_url: str | None = None) -> None:
    """The backlog of a job reading through discovery (:mod:`spark_jobs.control.discovery.backlog`): O(window)."""
    from spark_jobs.control.discovery.backlog import discovery_backlog, stream_queue_url
    from spark_jobs.control.discovery.planner import manifest_of
    from spark_jobs.control.discovery.settings import discovery_settings

    root = input_location(job, given)
    report.input = root.url
    if not root.isdir() and "://" not in root.url:
        report.add("input_missing", "warning", f"the input folder {root.url} does not exist, so the backlog is unknown",
                   f"pass --input, or set ${job.input_env_var}, to the landing folder")
        return

    def manifest(batch: int | None) -> int | None:
        entry = entries.get(batch) if batch is not None else None
        return manifest_of(entry.sources[0]) if entry and entry.sources else None

    planned = manifest(max(entries)) if entries else None
    settings = discovery_settings(job, root.url, checkpoint.url, dict(job.file_source_options))
    settings = replace(settings, queue_url=stream_queue_url(settings, queue_url))
    backlog = discovery_backlog(settings, manifest(committed) if committed >= 0 else None, planned, now)
    report.backlog_files, report.backlog_bytes = backlog.waiting, backlog.waiting_bytes
    report.in_flight_files = backlog.in_flight
    report.ingested_files = backlog.ingested
    report.too_old_files = 0
    from spark_jobs.control.discovery.reconcile import last_report

    report.discovery = {**backlog.to_dict(), "last_reconcile": last_report(_lake_root(checkpoint), job.name),
                        "landing_to_commit_seconds": _landing_to_commit(settings, committed,
                                                                        report.last_commit_moment)}


def _landing_to_commit(settings, committed: int, commit_time: datetime | None) -> float | None:
    """The last committed batch's freshness: from the landing (modification time) of the oldest of its files to its
    commit, in seconds; None without a committed batch with files."""
    from spark_jobs.control.discovery.planner import batch_files

    if committed < 0 or commit_time is None:
        return None
    try:
        files = batch_files(settings, committed)
    except Exception as exc:  # noqa: BLE001 - a figure for people, never a reason to fail the inspection
        log.debug("no landing times for batch %d: %s", committed, exc)
        return None
    if not files:
        return None
    landed_ms = min(f.mtime_ms for f in files)
    return round(max(0.0, commit_time.timestamp() - landed_ms / 1000), 1)


def _lake_root(checkpoint: Location) -> str:
    """The lake root a checkpoint folder (``<lake>/checkpoints/<job>``) lies in."""
    return checkpoint.url.rsplit("/", 2)[0]


def _delta_backlog(report: CheckpointReport, table: Location, entries: dict[int, OffsetsEntry], committed: int) -> None:
    """The backlog of a job reading a Delta table: the data files its commits added after the stream's offset."""
    report.input = table.url
    if not table.child("_delta_log").isdir():
        report.add("input_missing", "warning", f"the source table {table.url} does not exist yet, so nothing waits",
                   "start its producer (the job starts and creates it empty); pass --input only for another table")
        report.backlog_files = 0
        return

    def offset(batch: int) -> DeltaOffset | None:
        entry = entries.get(batch)
        return delta_source_offset(entry.sources[0]) if entry and entry.sources else None

    done = offset(committed) if committed >= 0 else None
    planned = offset(max(entries)) if report.batch_in_flight is not None and entries else done
    waiting = delta_backlog(table, planned)
    report.backlog_files = waiting.files
    report.source_table = {**waiting.to_dict(), "read_version": planned.version if planned else None}
    if planned is not done and waiting.files is not None:
        before = delta_backlog(table, done).files
        report.in_flight_files = None if before is None else before - waiting.files
    else:
        report.in_flight_files = 0
    if waiting.files is None:
        report.add("source_log_gone", "warning",
                   f"the source table's log no longer holds the versions after {planned.version if planned else 0} "
                   "the stream has not read (Delta cleaned up its old commits), so the backlog is unknown",
                   "start the job: Delta's source fails if it cannot read them; then reprocess with a new checkpoint")


def _status(report: CheckpointReport, job: JobSpec, lease: LeaseInfo | None, live: bool, started: bool,
            now: datetime) -> None:
    blocking = [p for p in report.problems if p.severity == "error" and p.code in BLOCKING]
    backlog = report.backlog_files or 0
    age = None
    if report.last_commit_time:
        age = (now - datetime.fromisoformat(report.last_commit_time)).total_seconds()
    if lease is not None and not lease.released and lease.expired(now):
        alive = lease.alive_locally()
        if alive:
            report.status = "stalled"
            report.add("driver_stalled", "error",
                       f"the driver {lease.describe(now)} still runs but has not renewed its lease for longer than "
                       "its ttl: it is paused (SIGSTOP) or hung, and may no longer write",
                       f"kill it (kill -9 {lease.pid}); the supervisor does this and restarts the job from this "
                       "checkpoint")
            return
        report.add("driver_dead", "warning",
                   f"the driver {lease.describe(now)} is gone without releasing its lease"
                   + ("" if alive is False else " (judged by its heartbeat: it ran on another host)"),
                   "start the job again (the supervisor does): it takes the lease over and resumes from this "
                   "checkpoint")
        report.status = "corrupt" if blocking else "dead"
        return
    if not live:
        report.status = "corrupt" if blocking else ("idle" if started else "not_started")
        return
    since = min(x for x in (age, _since(lease.started_at, now)) if x is not None) if lease else age
    if backlog > 0 and since is not None and since > job.health.max_batch_age_seconds:
        report.status = "stalled"
        report.add("no_progress", "error",
                   f"no batch committed for {since:.0f} s while {backlog} input file(s) wait (limit "
                   f"{job.health.max_batch_age_seconds} s, HealthThresholds.max_batch_age_seconds)",
                   "look at the driver's log; the supervisor kills and restarts a stalled driver")
        return
    if report.batch_in_flight is not None:
        report.status = "in_flight"
    elif backlog > job.health.max_pending_files:
        report.status = "lagging"
        report.add("lagging", "warning",
                   f"{backlog} input files wait, more than {job.health.max_pending_files} "
                   "(HealthThresholds.max_pending_files)",
                   "give the job more resources or a larger maxFilesPerTrigger; catch up with --latest-first if "
                   "fresh data matters more than order")
    else:
        report.status = "healthy"


def _since(text: str, now: datetime) -> float:
    return (now - datetime.fromisoformat(text)).total_seconds()
