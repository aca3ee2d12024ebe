"""On-call actions on a job, checked before anything runs: what ``streaming_oncall`` does, without Airflow.

Actions (:data:`ACTIONS`), what each needs and does:

==================== ============================================ ==============================================
action               fits when                                    does
==================== ============================================ ==============================================
``restart``          a driver runs under ``<job>_continuous``     clears ``supervise`` in the running run: the
                     (a live lease, the DAG unpaused, a running   driver stops after its micro-batch and a new
                     run)                                         one starts from the same checkpoint
``stop``             the DAG is unpaused (or a driver runs        pauses ``<job>_continuous``: the driver stops
                     under it)                                    after its micro-batch; waits until its lease
                                                                  is released (the proof it stopped)
``pause_supervision`` a supervisor runs (``supervisor.json``      a hold: the supervisor neither restarts a
                     fresh) and supervision is not paused         driver that ends nor kills a stalled one
                                                                  (:mod:`spark_jobs.control.supervision.hold`)
``resume_supervision`` supervision is paused, or the DAG is       lifts the hold; unpauses the DAG if paused:
                     paused (the job was stopped)                 a driver starts again
``set_warm_standby`` the job has a continuous trigger, and        keeps the job's warm standby on or off (or
                     ``warm_standby`` is on, off or default       back to the registry's default) for every
                                                                  later run: ``<control>/settings.json``
                                                                  (:mod:`spark_jobs.control.supervision.job_settings`);
                                                                  a running supervisor follows within seconds
``reprocess_from``   the job's input holds files delivered at     rebuilds, from those files, the table
                     or after ``from_time``                       partitions holding their rows: one Delta
                                                                  commit per table (:mod:`spark_jobs.driver.reprocess`)
``reset_checkpoint`` the job is stopped (no live lease, no        moves the checkpoint to ``<lake>/control/
                     active supervisor) and has a checkpoint      <job>/backups/TIME-reset/checkpoint`` (TIME: when
                                                                  it was asked for, as its plan says) while
                                                                  holding the job's lease; the next run starts
                                                                  fresh and re-reads every input file, which
                                                                  adds nothing (one row per key)
``rollout_destructive`` its last pre-flight                       asks the supervisor to stop the driver after its
                     refused ``version`` (and ``rollout``'s       micro-batch, move the checkpoint and tables to a
                     checks pass)                                 backup under the lease and start ``version`` on
                                                                  a new checkpoint: it rebuilds every table from
                                                                  the input (:mod:`spark_jobs.control.rollout.destructive`)
``rollback_table``   ``table_version`` is an earlier version of   ``lake restore``: a new version with that
                     ``table`` whose files are all still there    version's rows (itself undoable)
==================== ============================================ ==============================================

:func:`check_request` checks every form field (the job, the action, the fields the action needs and
none it does not, a reason, the times and versions) and the job's state, and refuses the first
problem with :class:`OncallRefused` naming the field; nothing runs before it has passed.
:meth:`OncallRequest.plan` says exactly what would happen (a dry run stops there). Only checked,
re-rendered values (registry names, integers, an ISO time, uuids) reach ``spark-submit``; the reason
goes only to the audit table (:mod:`spark_jobs.control.oncall.audit`).

No pyspark: Airflow's task imports this; the Spark actions run as ``spark-submit`` of
``python -m spark_jobs reprocess`` / ``lake restore``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from spark_jobs.control.catchup.backfill import BackfillRefused, BackfillRequest, FileListing, list_files, parse_time
from spark_jobs.control.checkpoint.lease import LeaseInfo, read_lease
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.object_store import delta_rs_options
from spark_jobs.model.streams import KafkaSource
from spark_jobs.registry import ONCALL_ACTIONS, get_job
from spark_jobs.control.supervision.hold import read_hold
from spark_jobs.control.supervision.ownership import lease_owner, supervisor_active
from spark_jobs.control.supervision.state import read_supervisor_state

ACTIONS = tuple(ONCALL_ACTIONS)
# Fields only some actions take: a value for another action is refused (it was meant for something else).
ACTION_FIELDS = {"from_time": ("reprocess_from",), "table": ("rollback_table",), "table_version": ("rollback_table",),
                 "warm_standby": ("set_warm_standby",), "version": ("rollout", "rollout_destructive")}
MAX_REASON_CHARS = 2000
# Files delivered at or after from_time, however late their names say they were delivered.
END_OF_TIME = dt.datetime(9999, 1, 1, tzinfo=dt.timezone.utc)


class OncallRefused(UsageError):
    """An on-call request that is not run, with the form field at fault and what to do.

    :param field: the form field (``job``, ``action``, ``from_time``, ``table``, ``table_version``,
        ``reason``, ``dry_run``).
    :param message: what is wrong.
    """

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def continuous_dag_id(job: JobSpec) -> str:
    return f"{job.name}_continuous"


@dataclass(frozen=True)
class AirflowView:
    """What Airflow says about a job's continuous DAG (the operator reads it through the REST API).

    :param dag_id: ``<job>_continuous``.
    :param paused: whether it is paused; ``None`` when Airflow could not be asked (see ``error``).
    :param running_run_id: its running run, if any.
    :param supervise_state: the state of ``supervise`` in that run.
    :param error: why Airflow could not be asked.
    """

    dag_id: str
    paused: bool | None
    running_run_id: str | None = None
    supervise_state: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class JobState:
    """What the lake says about a job: its driver's lease, its supervisor, a hold, its checkpoint, its tables."""

    lease: LeaseInfo | None
    lease_live: bool
    supervisor: dict | None
    supervisor_active: bool
    hold: dict | None
    checkpoint: Path
    checkpoint_exists: bool
    versions: dict[str, int]

    @classmethod
    def read(cls, job: JobSpec, lake: Lake, now: dt.datetime | None = None) -> "JobState":
        control = str(lake.control_path(job.name))
        lease = read_lease(control)
        supervisor = read_supervisor_state(control)
        return cls(lease=lease, lease_live=lease is not None and not lease.expired(now),
                   supervisor=supervisor, supervisor_active=supervisor_active(supervisor, now),
                   hold=read_hold(control), checkpoint=lake.checkpoint_path(job.name),
                   checkpoint_exists=lake.checkpoint_path(job.name).is_dir(), versions=table_versions(job, lake))

    def driver(self, now: dt.datetime | None = None) -> str:
        """The driver that holds the checkpoint, or that held it last (and that it no longer does), for people."""
        lease = self.lease
        if lease is None:
            return "no driver has held it yet"
        if self.lease_live:
            owner = lease_owner(lease)
            return f"{lease.describe(now)}: {owner.role}{owner.started_by}"
        ago = f"{lease.heartbeat_age(now):.0f} s ago"
        ended = f"released it {ago}" if lease.released else f"is gone (its last heartbeat was {ago})"
        return f"no driver holds it: the last one, pid {lease.pid} on host {lease.host}, {ended}"


def table_versions(job: JobSpec, lake: Lake) -> dict[str, int]:
    """The current Delta version of each of the job's tables that exists (delta-rs, no JVM)."""
    from deltalake import DeltaTable

    versions = {}
    for table in job.tables:
        path = lake.table_path(table.name)
        if (path / "_delta_log").is_dir():
            try:
                versions[table.name] = DeltaTable(str(path), storage_options=delta_rs_options(path)).version()
            except Exception:  # noqa: BLE001 - a log without a commit yet: no version
                continue
    return versions


def missing_files(lake: Lake, table: str, version: int | None = None) -> dict[str, list[str]]:
    """Files a version of ``table`` references that are not on disk, by partition (``col=value``).

    A table whose partition's files were deleted by hand (or vacuumed, for an old version) cannot be
    read there: Spark fails with a FileNotFoundException.
    """
    path = lake.table_path(table)
    if not (path / "_delta_log").is_dir():
        return {}
    actions = add_actions(path, version)
    missing: dict[str, list[str]] = {}
    for action in actions:
        if not (path / action["path"]).exists():
            partition = "/".join(f"{k.removeprefix('partition.')}={v}" for k, v in sorted(action.items())
                                 if k.startswith("partition.")) or "(unpartitioned)"
            missing.setdefault(partition, []).append(action["path"])
    return missing


def add_actions(path: Path, version: int | None = None) -> list[dict]:
    """The add actions (files) of a version of the Delta table at ``path``, flattened: ``path``,
    ``num_records``, ``partition.<column>`` (the value as text), ... (delta-rs)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    snapshot = DeltaTable(str(path), version=version, storage_options=delta_rs_options(path))
    actions = pa.table(snapshot.get_add_actions(flatten=True)).to_pylist()
    for action in actions:
        for key in [k for k in action if k.startswith("partition.")]:
            action[key] = None if action[key] is None else str(action[key])
    return actions


@dataclass(frozen=True)
class ReplayPlan:
    """The files a ``reprocess_from`` replays: the job's input delivered at or after ``from_time``."""

    source: Path
    from_time: dt.datetime
    listing: FileListing
    missing: dict[str, dict[str, list[str]]]

    @classmethod
    def of(cls, job: JobSpec, lake: Lake, source: Path, from_time: dt.datetime) -> "ReplayPlan":
        request = replay_request(job, source, from_time)
        listing = list_files(request)
        return cls(source, from_time, listing,
                   {t.name: found for t in job.tables if (found := missing_files(lake, t.name))})


def replay_request(job: JobSpec, source: Path, from_time: dt.datetime) -> BackfillRequest:
    """The files of ``source`` delivered at or after ``from_time`` (the backfill rule: the delivery time of the
    job's key layout; files whose key carries none are not replayed)."""
    return BackfillRequest(job, Path(source), None, None, time_window=(from_time, END_OF_TIME))


@dataclass(frozen=True)
class OncallRequest:
    """A checked on-call action; :meth:`plan` says what it does, :meth:`spark_args` what spark-submit runs."""

    job: JobSpec
    action: str
    reason: str
    dry_run: bool
    lake: Lake
    state: JobState
    from_time: dt.datetime | None = None
    table: str | None = None
    table_version: int | None = None
    warm_standby: bool | None = None  # set_warm_standby: on, off, or None for the registry's default
    version: str | None = None  # rollout, rollout_destructive: the release to roll out (docs/deploying.md)
    preflight: dict | None = None  # rollout_destructive: the pre-flight verdict that refused the version
    replay: ReplayPlan | None = None
    restore: object | None = None  # spark_jobs.control.lake.delta_log.RestorePlan
    airflow: AirflowView | None = None
    requested_at: dt.datetime | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def backup(self) -> Path:
        """Where ``reset_checkpoint`` moves the checkpoint: named by the time it was asked for."""
        return backup_path(self.lake, self.job, self.requested_at or dt.datetime.now(dt.timezone.utc))

    def parameters(self) -> dict:
        """The checked values, for the audit row."""
        values = {"job": self.job.name, "action": self.action, "dry_run": self.dry_run}
        if self.from_time is not None:
            values["from_time"] = _iso(self.from_time)
        if self.table is not None:
            values.update(table=self.table, table_version=self.table_version)
        if self.action == "set_warm_standby":
            values["warm_standby"] = {True: "on", False: "off"}.get(self.warm_standby, "default")
        if self.version is not None:
            values["version"] = self.version
        return values

    def spark_args(self, audit_id: str) -> list[str] | None:
        """The arguments of ``python -m spark_jobs`` under spark-submit (``None``: no Spark needed)."""
        if self.action == "reprocess_from":
            return ["reprocess", self.job.name, "--from-time", _iso(self.from_time), "--audit-id", audit_id]
        if self.action == "rollback_table":
            return ["lake", "restore", "--table", self.table, "--to-version", str(self.table_version), "--yes"]
        return None

    def plan(self) -> list[str]:
        """What the action does, step by step, with the values it will use (the answer of a dry run)."""
        job, state, control = self.job, self.state, self.lake.control_path(self.job.name)
        dag = continuous_dag_id(job)
        if self.action == "restart":
            return [f"clear the task `supervise` of run {self.airflow.running_run_id} of {dag}: its driver "
                    f"({state.driver()}) stops after its micro-batch",
                    "Airflow runs `supervise` again in the same run: a new driver starts from the same checkpoint "
                    f"{state.checkpoint}",
                    "wait until the new driver holds the checkpoint's lease"]
        if self.action == "stop":
            return [f"pause {dag}: its supervisor stops the driver ({state.driver()}) after its micro-batch",
                    "wait until the driver's lease is released (no driver writes any more)",
                    f"the job stays stopped until resume_supervision (or until {dag} is unpaused)"]
        if self.action == "pause_supervision":
            return [f"write the hold {control}/supervision_hold.json: the supervisor (state "
                    f"{state.supervisor.get('state')}) keeps the driver ({state.driver()}) running but neither "
                    "restarts it when it ends nor kills it when it stalls",
                    "resume_supervision lifts the hold"]
        if self.action == "resume_supervision":
            steps = []
            if state.hold is not None:
                steps.append(f"remove the hold {control}/supervision_hold.json (placed by {state.hold.get('by')} at "
                             f"{state.hold.get('at')}: {state.hold.get('reason')}): a supervisor without a driver "
                             "starts one from the same checkpoint")
            if self.airflow is not None and self.airflow.paused:
                steps.append(f"unpause {dag}: a new run starts the driver from the same checkpoint")
            return steps
        if self.action == "set_warm_standby":
            from spark_jobs.control.supervision.job_settings import warm_standby

            now = warm_standby(job, str(control))
            wanted = {True: "on", False: "off"}.get(self.warm_standby, f"the registry's default "
                                                    f"({'on' if job.restart.warm_standby else 'off'})")
            return [f"keep the warm standby of {job.name} {wanted} from now on, in {control}/settings.json (now: "
                    f"{now.describe()}): every later run of {dag} follows it, after an unpause or resume_supervision "
                    "too; a run's own warm_standby param still overrides it for that run",
                    "the running supervisor (if any) reads it within 5 s: it starts a standby once the driver has "
                    "committed, or stops the one that waits (the driver runs on either way)"]
        if self.action == "rollout":
            from spark_jobs.control.rollout.ask import running_version

            running = running_version(str(control)) or "the checkout's code"
            return [f"write the rollout request {control}/rollout.json: {job.name} from {running} to {self.version}",
                    f"pre-flight: the supervisor starts {self.version} as a standby beside the driver "
                    f"({state.driver()}) and checks it against the live checkpoint and tables; a misfit is refused "
                    "there and nothing stops",
                    "handover: the driver stops after its micro-batch, the new version's standby takes the lease "
                    "(not a restart)",
                    f"probation: {job.restart.probation_batches} batches and {job.restart.probation_seconds:g} s; a "
                    f"crash or a stall rolls it back to {running} by itself",
                    f"follow it: python -m spark_jobs rollout {job.name} --status (and the health page's timeline)"]
        if self.action == "rollout_destructive":
            from spark_jobs.control.rollout.destructive import destructive_plan

            return destructive_plan(job, self.lake, self.version, self.preflight, state.driver())
        if self.action == "reset_checkpoint":
            return [f"take the job's lease (no driver can start meanwhile; {state.driver()})",
                    f"move the checkpoint {state.checkpoint} to {self.backup} (the backup; move it back to undo, "
                    "while the job is stopped)",
                    "release the lease: the next run starts a new checkpoint (a new query id) and reads every input "
                    "file again",
                    "the tables stay exact: events are merged on eventID (insert-only), quarantine rows on "
                    "(source_file, record_index, reason), so the re-read adds no row; rows the old checkpoint had "
                    "written stay as they are"]
        if self.action == "rollback_table":
            lines = [f"{self.restore.describe()}",
                     f"spark-submit: python -m spark_jobs lake restore --table {self.table} --to-version "
                     f"{self.table_version} --yes",
                     "the rows removed are not ingested again by the job (its checkpoint has them as done): "
                     "reprocess_from brings them back"]
            return lines
        replay = self.replay
        if replay is None:  # a Kafka job: its messages from the time on (spark_jobs.driver.kafka.reprocess_kafka)
            return [f"spark-submit: python -m spark_jobs reprocess {job.name} --from-time {_iso(self.from_time)}",
                    f"read every message of {job.source.describe()} with a timestamp at or after "
                    f"{_iso(self.from_time)}, up to the latest offsets, in one batch, through the job's transform",
                    "insert-only merge into each table: rows they hold are not added again, rows they lost come "
                    "back; the live job's checkpoint is not touched",
                    f"table versions now: {state.versions}"]
        # Only the date folders from the day before from_time on are listed: the files delivered earlier are
        # neither replayed nor counted (the listing's out_of_range is those few folders' earlier files, not all).
        lines = [f"replay {len(replay.listing.files)} input files of {replay.source} delivered at or after "
                 f"{_iso(self.from_time)}; not replayed: every file delivered before it (their date folders are not "
                 f"listed) and {replay.listing.undated} without a delivery time"]
        if replay.listing.files:
            lines.append(f"first {replay.listing.files[0]}, last {replay.listing.files[-1]}")
        lines += [f"spark-submit: python -m spark_jobs reprocess {job.name} --from-time {_iso(self.from_time)}",
                  "parse them with the job's transform (the same code as the stream), then per table, in ONE Delta "
                  "commit (replaceWhere on the partitions involved): rows that came from these files are replaced "
                  "by the replay's rows, rows of other files are kept, an event already kept from another file is "
                  "not added again (one row per eventID); readers see the old rows or the new ones, never a mix",
                  "quarantine rows of these files are replaced the same way (they get today's ingest_date)",
                  f"table versions now: {state.versions}"]
        for table, partitions in replay.missing.items():
            for partition, files in sorted(partitions.items()):
                lines.append(f"damaged: {table} partition {partition}: {len(files)} files in the Delta log are missing "
                             "on disk (reading it fails now); the rebuild removes them from the table and puts back "
                             "the rows the replay holds; it refuses (nothing written) if that leaves fewer rows than "
                             "the log says the partition held (choose an earlier from_time)")
        return lines


def check_request(job, action, reason, dry_run=False, from_time=None, table=None, table_version=None,
                  warm_standby=None, version=None, *, lake: Lake, airflow: AirflowView | None = None, input_path: str | None = None,
                  now: dt.datetime | None = None, requested_at: dt.datetime | None = None) -> OncallRequest:
    """Check every field and the job's state; the first problem is refused.

    :param job: a registry job's name.
    :param action: one of :data:`ACTIONS`.
    :param reason: why (required, up to :data:`MAX_REASON_CHARS` characters).
    :param dry_run: ``True``: say what would happen, do nothing.
    :param from_time: ``reprocess_from`` only: ISO-8601 (UTC unless it names an offset), not in the future.
    :param table: ``rollback_table`` only: one of the job's tables.
    :param table_version: ``rollback_table`` only: an earlier version of ``table``.
    :param warm_standby: ``set_warm_standby`` only: ``on``, ``off`` or ``default``.
    :param version: ``rollout`` and ``rollout_destructive`` only: a release's name (``python -m spark_jobs release
        list``); a destructive one must have been refused by its pre-flight.
    :param lake: the lake.
    :param airflow: the continuous DAG's state (needed by ``restart``, ``stop``, and ``resume_supervision``
        of a stopped job).
    :param input_path: the job's input folder (default: ``$<JOB>_INPUT``, else the registry's).
    :param now: the current time (for tests).
    :param requested_at: when it was asked for (names a ``reset_checkpoint``'s backup; default ``now``).
    :raises OncallRefused: naming the field and what to do.
    """
    from spark_jobs.registry import JOBS

    now = now or dt.datetime.now(dt.timezone.utc)
    if job in (None, ""):
        raise OncallRefused("job", f"is required: choose the job to act on (one of {', '.join(sorted(JOBS))})")
    try:
        spec = get_job(str(job))
    except UsageError as exc:
        raise OncallRefused("job", str(exc)) from None
    if action in (None, ""):
        raise OncallRefused("action", f"is required: choose what to do (one of {', '.join(ACTIONS)})")
    if action not in ACTIONS:
        raise OncallRefused("action", f"{action!r} is not an action; one of: {', '.join(ACTIONS)}")
    if not isinstance(reason, str) or not reason.strip():
        raise OncallRefused("reason", "is required: say why (it goes to the audit table ops_audit)")
    if len(reason) > MAX_REASON_CHARS:
        raise OncallRefused("reason", f"is {len(reason)} characters; at most {MAX_REASON_CHARS}")
    if not isinstance(dry_run, bool):
        raise OncallRefused("dry_run", f"{dry_run!r} is not true or false")
    given = {"from_time": from_time, "table": table, "table_version": table_version, "warm_standby": warm_standby,
             "version": version}
    for name, value in given.items():
        if value not in (None, "") and action not in ACTION_FIELDS[name]:
            raise OncallRefused(name, f"is only for {', '.join(ACTION_FIELDS[name])}, not {action}: leave it empty "
                                      "(or choose that action)")
    state = JobState.read(spec, lake, now)
    values: dict = {}
    if action == "reprocess_from":
        values.update(check_reprocess(spec, lake, from_time, input_path, now))
    elif action == "rollback_table":
        values.update(_check_rollback(spec, lake, table, table_version))
    elif action == "set_warm_standby":
        values["warm_standby"] = _check_warm_standby(spec, warm_standby)
    elif action in ("rollout", "rollout_destructive"):
        values.update(_check_rollout(spec, lake, version, destructive=action == "rollout_destructive"))
    _check_state(spec, action, state, airflow)
    return OncallRequest(spec, action, reason.strip(), dry_run, lake, state, airflow=airflow,
                         requested_at=requested_at or now, **values)


def check_reprocess(job: JobSpec, lake: Lake, from_time, input_path: str | None, now: dt.datetime) -> dict:
    """``from_time`` and the replay of ``reprocess_from`` (the job's input, or ``input_path``), checked.

    :returns: ``from_time`` (aware UTC) and ``replay`` (:class:`ReplayPlan`).
    :raises OncallRefused: naming ``from_time`` (missing, not a time, in the future, nothing to replay)
        or ``job`` (its input folder does not exist).
    """
    if from_time in (None, ""):
        raise OncallRefused("from_time", "is required for reprocess_from: the delivery time (UTC) to replay from")
    try:
        moment = parse_time("from_time", from_time)
    except BackfillRefused as exc:
        raise OncallRefused("from_time", str(exc).split(": ", 1)[1]) from None
    if moment > now:
        raise OncallRefused("from_time", f"{_iso(moment)} is in the future (now is {_iso(now)}): nothing to replay")
    if isinstance(job.source, KafkaSource):  # the brokers say what is there when it runs (reprocess --dry-run shows it)
        return {"from_time": moment}
    if not job.accepts_backfill:  # windows, counts or state: replaying some input would not rebuild them
        raise OncallRefused("job", f"reprocess_from replays input files into tables that hold each key once; "
                                   f"{job.name} reads {job.source.describe()} into tables of "
                                   f"{job.output_mode} mode: use reset_checkpoint (its tables are rebuilt from "
                                   f"its whole source by the next run) or rollback_table")
    from spark_jobs.control.catchup.plan import job_input

    source = Path(input_path or job_input(job.name, None))
    if not source.is_dir():
        raise OncallRefused("job", f"the input folder of {job.name}, {source}, does not exist (set "
                                   f"${job.input_env_var})")
    replay = ReplayPlan.of(job, lake, source.resolve(), moment)
    if not replay.listing.files:
        raise OncallRefused("from_time", f"no input file of {job.name} in {source} was delivered at or after "
                                         f"{_iso(moment)}: nothing to replay (choose an earlier time)")
    return {"from_time": moment, "replay": replay}


def _check_warm_standby(job: JobSpec, value) -> bool | None:
    from spark_jobs.control.supervision.job_settings import parse_switch

    if not job.continuous_trigger:
        raise OncallRefused("job", f"{job.name} has no continuous trigger, so no supervisor and no standby")
    if value in (None, ""):
        raise OncallRefused("warm_standby", "is required for set_warm_standby: on, off, or default (the registry's)")
    try:
        return parse_switch(value)
    except ValueError as exc:
        raise OncallRefused("warm_standby", str(exc)) from None


def _check_rollout(job: JobSpec, lake: Lake, version, destructive: bool) -> dict:
    """The version to roll out, checked as ``python -m spark_jobs rollout [--destructive]`` checks it (nothing is
    written yet); a destructive one with the pre-flight verdict that refused it."""
    from spark_jobs.control.rollout.ask import check_rollout
    from spark_jobs.control.rollout.destructive import check_destructive_rollout

    action = "rollout_destructive" if destructive else "rollout"
    if version in (None, ""):
        raise OncallRefused("version", f"is required for {action}: a release's name (python -m spark_jobs release "
                                       "list)")
    try:
        if destructive:
            return {"version": str(version), "preflight": check_destructive_rollout(job, lake, str(version))}
        check_rollout(job, lake, str(version))
    except UsageError as exc:
        raise OncallRefused("version", str(exc)) from None
    return {"version": str(version)}


def _check_rollback(job: JobSpec, lake: Lake, table, table_version) -> dict:
    from spark_jobs.control.lake.delta_log import restore_plan

    names = [t.name for t in job.tables]
    if table in (None, ""):
        raise OncallRefused("table", f"is required for rollback_table: one of {', '.join(names)}")
    if table not in names:
        raise OncallRefused("table", f"{table!r} is not a table of {job.name}; one of {', '.join(names)}")
    if table_version in (None, ""):
        raise OncallRefused("table_version", "is required for rollback_table: the version to bring back "
                                             f"(python -m spark_jobs lake history --table {table})")
    if isinstance(table_version, bool) or not str(table_version).isdigit():
        raise OncallRefused("table_version", f"{table_version!r} is not a version (a whole number >= 0)")
    version = int(table_version)
    try:
        plan = restore_plan(lake, table, to_version=version)
    except UsageError as exc:
        raise OncallRefused("table_version", str(exc).replace("--as-of ", "version ")) from None
    if version > plan.current_version:
        raise OncallRefused("table_version", f"{version} is after the current version {plan.current_version}")
    gone = missing_files(lake, table, version)
    if gone:
        count = sum(len(files) for files in gone.values())
        raise OncallRefused("table_version", f"version {version} of {table} references {count} files that are no "
                                             "longer on disk (vacuumed or deleted): it cannot be restored; choose a "
                                             "later version")
    return {"table": table, "table_version": version, "restore": plan}


def _check_state(job: JobSpec, action: str, state: JobState, airflow: AirflowView | None) -> None:
    """Refuse an action that does not fit the job's state (field ``action``)."""
    dag = continuous_dag_id(job)

    def refuse(message: str) -> None:
        raise OncallRefused("action", f"{action} does not fit the state of {job.name}: {message}")

    def need_airflow() -> AirflowView:
        if airflow is None or airflow.paused is None:
            refuse(f"Airflow cannot be asked about {dag}: "
                   f"{airflow.error if airflow else 'no Airflow view was given'}")
        return airflow

    if action == "restart":
        if not state.lease_live:
            refuse(f"no driver is running (no live lease); start it with resume_supervision or by unpausing {dag}")
        if lease_owner(state.lease).kind != "continuous":
            refuse(f"the checkpoint is held by {lease_owner(state.lease).describe()}, not by a continuous driver: the "
                   f"supervisor of {dag} starts its driver when that one lets go; nothing to restart")
        view = need_airflow()
        if view.paused:
            refuse(f"the driver ({state.driver()}) does not run under {dag}, which is paused: restart it where it was "
                   "started")
        if not view.running_run_id or view.supervise_state != "running":
            refuse(f"{dag} has no running run whose `supervise` runs (state {view.supervise_state})")
    elif action == "stop":
        view = need_airflow()
        if view.paused and state.lease_live:
            refuse(f"the driver ({state.driver()}) does not run under {dag}, which is paused: stop it where it was "
                   "started")
        if view.paused:
            refuse(f"it is already stopped: {dag} is paused and no driver holds the lease")
    elif action == "pause_supervision":
        if state.hold is not None:
            refuse(f"supervision is already paused (by {state.hold.get('by')} at {state.hold.get('at')})")
        if not state.supervisor_active:
            got = (state.supervisor or {}).get("state")
            refuse(f"no supervisor is running (supervisor.json: {got or 'none'}); nothing to pause")
    elif action == "resume_supervision":
        if state.hold is None:
            view = need_airflow()
            if not view.paused:
                refuse(f"supervision is not paused (no hold) and {dag} is not paused")
    elif action == "reset_checkpoint":
        if state.lease_live:
            refuse(f"a driver holds the checkpoint ({state.driver()}); stop the job first (action stop)")
        if state.supervisor_active:
            refuse(f"its supervisor is {state.supervisor.get('state')} (it would start a driver); stop the job first "
                   "(action stop)")
        if not state.checkpoint_exists:
            refuse(f"there is no checkpoint at {state.checkpoint}: nothing to reset")


def backup_path(lake: Lake, job: JobSpec, at: dt.datetime) -> Path:
    """``<lake>/control/<job>/backups/<at: 20261127T091914.287387Z>-reset/checkpoint``."""
    at = at.astimezone(dt.timezone.utc)
    return lake.control_path(job.name) / "backups" / f"{at:%Y%m%dT%H%M%S.%fZ}-reset" / "checkpoint"


def reset_checkpoint(request: OncallRequest, now: dt.datetime | None = None) -> dict:
    """Move the job's checkpoint to its backup (:attr:`OncallRequest.backup`, the name its plan showed) while holding
    its lease (no driver can start meanwhile).

    :param now: names the backup when the request has no ``requested_at``.
    :returns: the checkpoint and its backup.
    :raises OncallRefused: a driver took the lease since the check, or the backup exists already
        (:func:`~spark_jobs.control.checkpoint.move_aside.move_under_lease`).
    """
    from spark_jobs.control.checkpoint.move_aside import MoveRefused, move_under_lease

    job, lake = request.job, request.lake
    backup = backup_path(lake, job, request.requested_at or now or dt.datetime.now(dt.timezone.utc))
    try:
        move_under_lease(lake, job, [(request.state.checkpoint, backup)], "streaming_oncall reset_checkpoint")
    except MoveRefused as exc:
        raise OncallRefused("action", str(exc)) from None
    return {"checkpoint": str(request.state.checkpoint), "backup": str(backup)}


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")

