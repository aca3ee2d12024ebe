"""Run a registered job: its files in, its tables out, exactly once.

This module runs a job's streaming query: the driver's lease on the checkpoint, signals (stop after the
micro-batch), progress lines and history, the query loop. The job's ``transform`` runs on its source
(:mod:`spark_jobs.driver.source_readers`); ``foreachBatch`` hands each micro-batch to
:func:`spark_jobs.driver.write.write_batch`, which picks the batch's plan (pipelined, cached, stateful).
The checkpoint (``<lake>/checkpoints/<job>``) and Delta's idempotent writes (each table's log
records the last batch id each writer committed) make a re-run after a crash add nothing twice and
lose nothing, also beside other writers of the same tables (see :mod:`spark_jobs.driver.write.delta_writer`).
"""

from __future__ import annotations

import json
import logging
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.model.errors import UsageError
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake, as_path
from spark_jobs.model.runs import RunOptions
from spark_jobs.control.monitoring.progress import executed
from spark_jobs.driver import lineage, progress_updates
from spark_jobs.launch.version import USER_METADATA_CONF, current as current_version
from spark_jobs.driver.job_modules import job_module, output_schemas, table_targets
from spark_jobs.driver.session import snapshot_partitions_per_core
from spark_jobs.driver.source_readers import read_input
from spark_jobs.driver.write import checkpoints, warm_up, write_batch
from spark_jobs.driver.lake_tools import refuse_old_layout
from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, create_tables
from spark_jobs.driver.write.stateful import StatefulBatchWriter
from spark_jobs.model.streams import DeltaTableSource, KafkaSource

log = logging.getLogger("spark_jobs")

LOCAL_LISTING_THRESHOLD = 1_000_000


class JobFailed(Exception):
    """The streaming query stopped with an error (the message is Spark's first line)."""


@dataclass
class RunSummary:
    """What one run did, printed as one JSON line when it ends.

    ``skipped`` says why an available-now run ended without starting Spark (nothing new, proved from
    the checkpoint: :mod:`spark_jobs.control.catchup.nothing_new`); ``None`` when Spark ran.
    ``messages_not_loaded`` (notification mode only) counts the queue messages this run deleted without loading a
    file, by reason (``duplicate``, ``before_start``, ``test_event``, ...), and those it put back for a later
    micro-batch or run (``deferred``): :mod:`spark_jobs.control.discovery.notifications`.
    """

    job: str
    trigger: str
    batches: int = 0
    input_files: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    stopped_by: str | None = None
    skipped: str | None = None
    messages_not_loaded: dict[str, int] | None = None

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def resolve_input(job: JobSpec, given: str | None, lake: str | None = None) -> Path:
    """The landing folder: ``given``, else ``$<JOB>_INPUT``, else the registry default. For a job that
    reads a Delta table: ``given``, else the table's folder in ``lake`` (created empty at the start
    when missing).

    :raises UsageError: if a landing folder does not exist or is not a folder.
    """
    from spark_jobs.model.inputs import input_path, named_input
    from spark_jobs.model.object_store import is_url

    if isinstance(job.source, DeltaTableSource):
        return as_path(given) if given else Lake.at(lake).table_path(job.source.table)
    if isinstance(job.source, KafkaSource):  # the topics (a,b or pattern:<regex>), checked here; no folder
        from spark_jobs.model.streams import kafka_subscription

        spec = named_input(job, given)
        kafka_subscription(spec)
        return Path(spec)
    path = input_path(job, given)
    if not path.exists():
        raise UsageError(f"input folder {str(path)!r} does not exist; pass --input DIR "
                         f"(or set ${job.input_env_var}) pointing at the landing folder")
    if not path.is_dir():
        raise UsageError(f"input {str(path)!r} is a file; pass --input the folder that holds the log files")
    return path if is_url(path) else path.resolve()


class _LeaseKeeper:
    """Renews the driver's lease from a daemon thread every ttl/3, with what the driver is doing.

    :param lease: the lease this driver took.
    :param details: shared with the run: the query id, the last committed batch, the UI's URL.
    """

    def __init__(self, lease, details: dict) -> None:
        self.lease = lease
        self.details = details
        self.lost: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{lease.info.job}", daemon=True)

    def start(self) -> "_LeaseKeeper":
        self._thread.start()
        return self

    def _beat(self) -> None:
        from spark_jobs.control.checkpoint.lease import LeaseLost

        while not self._stop.wait(self.lease.info.ttl_seconds / 3):
            try:
                self.lease.renew(dict(self.details))
            except LeaseLost as exc:
                self.lost = exc
                log.error("%s", exc)
                return
            except Exception as exc:  # noqa: BLE001 - a storage hiccup: the next beat retries, the ttl decides
                log.warning("could not renew the lease: %s", exc)

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless this driver may still write (call before each batch)."""
        from spark_jobs.control.checkpoint.lease import LeaseLost

        try:
            self.lease.check()
        except LeaseLost as exc:
            self.lost = exc
            raise

    def finish(self) -> None:
        """Stop renewing; release the lease unless it was lost (then it is no longer ours)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self.lost is None:
            try:
                self.lease.release()
            except Exception as exc:  # noqa: BLE001 - the lease then expires by its ttl
                log.warning("could not release the lease: %s", exc)


def explain_failure(message: str) -> str | None:
    """Spark's error for a checkpoint that no longer fits the query, in plain words with the two ways
    out (:func:`spark_jobs.control.checkpoint.explain_start_failure`), or ``None`` for any other error."""
    from spark_jobs.control.checkpoint import explain_start_failure

    return explain_start_failure(message)


def failure_summary(message: str) -> str:
    """The line of a query's error that says what went wrong.

    Usually Spark's first line. When the job's own micro-batch function failed, that line only says
    "An exception was raised by the Python Proxy" and the cause is inside the Python traceback that
    follows: the Java exception a Spark call raised (the ``: org...Exception: ...`` line after
    ``Py4JJavaError``, e.g. the Kafka source's "Some data may have been lost"), else the traceback's
    last ``SomeError: ...`` line. That cause is added, cut at 400 characters.
    """
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if "Python Proxy" not in first and not first.startswith("Traceback"):
        return first
    exception = re.compile(r"^[\w.$]+(Exception|Error)\b[^:]*: ")
    java = [line[2:] for line in lines if line.startswith(": ") and exception.match(line[2:])]
    causes = java[:1] or [line for line in lines if exception.match(line) and "Py4J" not in line][-1:]
    lead = first.removesuffix("Traceback (most recent call last):").strip()
    return f"{lead} {causes[0][:400]}" if causes else first


class _GracefulStop:
    """Turns SIGTERM/SIGINT into "stop after the current micro-batch".

    Before the query has started (Spark still starting: nothing written yet) a signal ends the
    driver at once (``SystemExit`` 128 + the signal's number), so a supervisor's stop never waits
    for a JVM start.
    """

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.query_started = False
        self._previous: dict = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach only the main thread (a second writer run from a thread of a test or tool)
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, _frame) -> None:
        self.signal_name = signal.Signals(signum).name
        if not self.query_started:
            log.warning("%s received before the query started: exiting (nothing was written)", self.signal_name)
            raise SystemExit(128 + signum)
        log.warning("%s received: stopping after the current micro-batch", self.signal_name)


def _log_progress(progress, input_files: int, unit: str = "files") -> None:
    """One log line for a finished micro-batch, from Spark's typed progress object.

    :param input_files: the batch's files (the source's ``numInputRows`` counts every read of them,
        and a batch with bad files reads those twice), or rows for a job that does not read files whole.
    """
    log.info("batch %d: %d input %s in %d ms (%s)", progress.batchId, input_files, unit,
             progress.batchDuration, ", ".join(f"{k} {v} ms" for k, v in sorted(progress.durationMs.items())))


def _log_total_progress(summary: RunSummary, total: int, started: float) -> None:
    """One line of a run with a known total: files done / total, rows, the rate and the time left."""
    done = summary.input_files
    seconds = max(time.monotonic() - started, 1e-3)
    left = (total - done) * seconds / done if done else None
    eta = f"{left:.0f} s" if left is not None else "unknown"
    log.info("progress: %d of %d files (%.0f%%), rows %s, %.1f files/s, ETA %s", done, total,
             100 * done / total if total else 100, json.dumps(summary.rows, sort_keys=True), done / seconds, eta)


def run_streaming(job: JobSpec, options: RunOptions, spark: SparkSession | None = None) -> RunSummary:
    """Run ``job`` until its trigger ends (available-now) or a signal stops it (processing-time).

    The driver first takes the single-writer lease on the checkpoint, renews it while it runs
    (with the query id, the last committed batch and the Spark UI's URL), checks it before each
    micro-batch writes anything, and releases it when it ends (unless it was lost).

    :raises UsageError: for a table folder in the old file-sink layout (``lake convert`` converts it).
    :raises LeaseHeld: another live driver holds the checkpoint (the CLI exits with status 3).
    :raises JobFailed: if the streaming query fails, cannot resume from its checkpoint, or this
        driver lost its lease.
    """
    from spark_jobs.control.checkpoint.lease import Lease

    started = time.monotonic()
    details = {"checkpoint": str(options.checkpoint_path(job.name)), "trigger": options.trigger.spec,
               "version": current_version().name}  # the lease says which version holds the job

    def acquire() -> Lease:
        return Lease.acquire(str(options.control_path(job.name)), options.stream_name(job.name),
                             options.lease_ttl_seconds or job.health.lease_ttl_seconds, details=dict(details))

    if options.standby:
        return _run_standby(job, options, spark, acquire, details, started)
    # The single-writer lease, before anything else (LeaseHeld: another driver is live; exit 3).
    # Its pid is this Python driver's: the one a supervisor sends SIGTERM to for a graceful stop.
    lease = acquire()
    keeper = _LeaseKeeper(lease, details).start()
    from spark_jobs.control.catchup.nothing_new import nothing_to_do

    reason = nothing_to_do(job, options)  # under the lease: no other driver can be adding a batch
    if reason is not None:
        log.info("%s: %s", job.name, reason)
        keeper.finish()
        return RunSummary(job=job.name, trigger=options.trigger.spec, rows={t.name: 0 for t in job.tables},
                          seconds=round(time.monotonic() - started, 2), skipped=reason)
    stopper = _GracefulStop()
    stopper.install()
    try:
        return _run_query(job, options, spark, keeper, stopper, started)
    finally:
        stopper.restore()
        keeper.finish()


def _run_standby(job: JobSpec, options: RunOptions, spark: SparkSession | None, acquire, details: dict,
                 started: float) -> RunSummary:
    """A warm standby (:mod:`spark_jobs.driver.standby`): session, tables and a warm-up first, then the lease as soon
    as it is free, then the query as any driver runs it. A signal before the lease ends it at once."""
    from spark_jobs.control.supervision.hold import read_hold
    from spark_jobs.control.supervision.standby_state import announce_standby, withdraw_standby
    from spark_jobs.driver import standby
    from spark_jobs.driver.session import build_session

    if options.trigger.available_now:
        raise UsageError("--standby is for a continuous run (a processing-time trigger): an available-now run ends")
    refuse_old_layout(options.lake, [t.name for t in job.tables])
    control = str(options.control_path(job.name))
    stopper = _GracefulStop()
    stopper.install()  # until the query starts, a signal exits at once: a standby holds nothing
    try:
        spark = spark or build_session(job.name, ui=True, long_running=True)
        if options.preflight:  # a new version: checked against the live checkpoint and tables before anything
            from spark_jobs.driver.preflight import run_preflight

            run_preflight(spark, job, options, source=lambda: prepare_query(job, options, spark).source)
        prepared = prepare_query(job, options, spark)  # all but the query's start: nothing touches the checkpoint
        standby.warm_up(spark, job, options)  # under the settings prepare_query gave the session
        warm = time.monotonic() - started
        announce_standby(control, warm, current_version().name)
        log.info("standby for %s: warm in %.1f s; waiting for the checkpoint's lease", job.name, warm)
        lease = standby.wait_for_lease(acquire, stopped=lambda: stopper.signal_name is not None,
                                       held=lambda: read_hold(control) is not None,
                                       keep_warm=lambda: standby.keep_warm(spark, job, prepared.targets))
        withdraw_standby(control)
        if lease is None:
            return RunSummary(job=job.name, trigger=options.trigger.spec, stopped_by=stopper.signal_name,
                              seconds=round(time.monotonic() - started, 2))
        log.info("standby for %s: took the lease (generation %s) %.1f s after it started", job.name,
                 getattr(lease.info, "generation", "?"), time.monotonic() - started)
        keeper = _LeaseKeeper(lease, details).start()
        try:
            return _run_query(job, options, spark, keeper, stopper, started, prepared)
        finally:
            keeper.finish()
    finally:
        withdraw_standby(control)
        stopper.restore()


@dataclass
class PreparedQuery:
    """Everything a driver sets up before its streaming query starts; none of it writes to the checkpoint.

    A driver prepares it under its lease; a warm standby prepares it while it waits for the lease
    (:mod:`spark_jobs.driver.standby`), so that taking over is only the query's start.

    :param spark: the driver's session.
    :param module: the job's module (its transform and selects).
    :param targets: the job's tables as write targets.
    :param checkpoint: the stream's checkpoint.
    :param source: the streaming DataFrame ``foreachBatch`` gets (a stateful job's: its transform's result).
    :param discovery: the stream's discovery settings, for a job that discovers its files.
    """

    spark: SparkSession
    module: object
    targets: list
    checkpoint: object
    source: DataFrame
    discovery: object | None


def prepare_query(job: JobSpec, options: RunOptions, spark: SparkSession | None) -> PreparedQuery:
    """The session (built when ``spark`` is None), the tables (created when missing), the source DataFrame."""
    from spark_jobs.driver.session import build_session

    refuse_old_layout(options.lake, [t.name for t in job.tables])  # before Spark starts: one line
    fresh = spark is None  # a driver of its own: its JVM is cold
    long_running = not options.trigger.available_now
    spark = spark or build_session(job.name, ui=long_running, long_running=long_running)
    # The input is a local folder: Spark gets each micro-batch's file statuses fastest in the driver.
    # (Past this many files it would run a Spark job of one task per file, which pays off on object
    # stores, not on a local disk.)
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(LOCAL_LISTING_THRESHOLD))
    snapshot_partitions_per_core(spark)  # also for a session this module did not build
    module = job_module(job)
    targets = table_targets(job, options.lake)
    # Every table exists (empty) before the first batch: readers and other writers find it.
    create_tables(spark, targets, lambda: output_schemas(spark, job))
    if fresh and job.source.lands_files and not job.stateful:  # while the query starts (driver/write/warm_up.py)
        warm_up.start(spark, targets)
    if isinstance(job.source, DeltaTableSource):
        from spark_jobs.driver.job_modules import prepare_source

        prepare_source(spark, job, options.input_path)
    from spark_jobs.control.discovery.settings import run_settings

    # A job reading through discovery: each batch's files are known from its manifests, before anything is read.
    discovery = run_settings(job, options) if job.discovers_files else None
    # A backfill's dates or time window select its files in discovery (the job's key layout): a file out of the
    # range is never listed past its folder, nor read.
    source = read_input(spark, job, options, streaming=True)
    if job.stateful:  # the state lives in the stream: its transform runs there, foreachBatch writes the result
        source = module.transform(source, job)
    return PreparedQuery(spark, module, targets, options.checkpoint_path(job.name), source, discovery)


class _QueueSkips:
    """The queue messages a run deleted without loading a file, by reason, and those it put back: the growth of
    the checkpoint's ``discovery/skipped.json`` while the run lasted (the source writes it from its own process)."""

    def __init__(self, settings) -> None:
        self.log = None
        if settings is not None and settings.queue_url:
            from spark_jobs.control.checkpoint.store import Location
            from spark_jobs.control.discovery.state import DiscoveryLog

            self.log = DiscoveryLog(Location.of(settings.checkpoint))
            self.before = self.log.skips()

    def since_start(self) -> dict[str, int] | None:
        if self.log is None:
            return None
        after = self.log.skips()
        counts = {reason: n - self.before["total"].get(reason, 0) for reason, n in after["total"].items()}
        counts["deferred"] = after["deferred"] - self.before["deferred"]
        return {reason: n for reason, n in sorted(counts.items()) if n}


def _run_query(job: JobSpec, options: RunOptions, spark: SparkSession | None, keeper: _LeaseKeeper,
               stopper: "_GracefulStop", started: float, prepared: PreparedQuery | None = None) -> RunSummary:
    """The body of :func:`run_streaming`, run while this driver holds the lease (``prepared``: by a standby)."""
    from pyspark.errors import StreamingQueryException

    from spark_jobs.driver.session import session_conf

    lineage_interval = lineage.interval_seconds()  # a bad $SPARK_JOBS_LINEAGE_INTERVAL: one line, before Spark works
    prepared = prepared or prepare_query(job, options, spark)
    spark, module, targets, checkpoint = prepared.spark, prepared.module, prepared.targets, prepared.checkpoint
    discovery = prepared.discovery
    summary = RunSummary(job=job.name, trigger=options.trigger.spec, rows={t.name: 0 for t in job.tables})
    skips = _QueueSkips(discovery)
    per_run: dict = {}  # made on the first batch: the writer
    batch_files: dict[int, int] = {}
    batch_rows: dict[int, tuple[dict[str, int], dict[str, int]]] = {}  # carried and inserted, per batch

    def on_batch(frame: DataFrame, batch_id: int) -> None:
        keeper.check()  # nothing is written by a driver that may have been replaced
        if not per_run:
            # The checkpoint's query id: the same after every restart, different for every checkpoint.
            query_id = frame.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
            writer = ExactlyOnceWriter(frame.sparkSession, targets, query_id or options.stream_name(job.name))
            per_run.update(writer=writer, stateful=StatefulBatchWriter(job, module, targets, writer, checkpoint,
                                                                       options.input_path) if job.stateful else None)
        # frame: the source's rows, or a micro-batch of a stateful transform's result
        files = None
        if discovery is not None:
            from spark_jobs.control.discovery import planner

            # a zero-byte file is consumed but gives no row (as in Spark's binaryFile): not an input of the batch
            files = [f.key for f in planner.batch_files(discovery, batch_id) if f.size]
        written = write_batch(frame, batch_id, job=job, module=module, writer=per_run["writer"], targets=targets,
                              stateful=per_run["stateful"], files=files)
        carried, rows = written.carried, written.rows
        if written.inputs is not None:
            batch_files[batch_id] = written.inputs
        batch_rows[batch_id] = (carried, rows)
        for table, count in rows.items():
            summary.rows[table] += count
        summary.input_files += batch_files.get(batch_id, 0)
        summary.batches += 1
        if options.expected_files:
            _log_total_progress(summary, options.expected_files, started)

    # Progress is read from the query in this thread (not through a StreamingQueryListener, whose
    # callbacks into Python can arrive after the query, and this process, have ended).
    logged = -1
    stopper.query_started = True  # from here on a signal stops the query after its micro-batch
    # Every Delta commit of the query's batches names the code version (its commit info's userMetadata).
    conf = {**job.spark_conf, USER_METADATA_CONF: current_version().user_metadata()}
    try:
        with session_conf(spark, conf):  # the query keeps them (a started query has its own session)
            query = (prepared.source.writeStream.queryName(options.stream_name(job.name))
                     .outputMode(job.output_mode)
                     .foreachBatch(on_batch)
                     .option("checkpointLocation", str(checkpoint))
                     .trigger(**options.trigger.writer_kwargs())
                     .start())
    except Exception as exc:  # noqa: BLE001 - a checkpoint Spark cannot resume from, in plain words
        explained = explain_failure(str(exc))
        if explained:
            raise JobFailed(f"job {job.name} cannot start from checkpoint {checkpoint}: {explained}") from None
        raise
    log.info("query %s started (id %s, run %s), checkpoint %s", job.name, query.id, query.runId, checkpoint)
    keeper.details.update(query_id=str(query.id), run_id=str(query.runId),
                          spark_ui=spark.sparkContext.uiWebUrl)
    with lineage.reported(job, options, spark, aborted=lambda: keeper.lost is not None,
                          interval=lineage_interval) as run_lineage:
        history = start_recorder(job, options)  # each executed batch's progress -> streaming_progress
        recorded = -1  # the newest batch that ran
        stop_after = None  # the last batch to run after a stop signal
        updates = progress_updates.NewProgress(query)
        while True:
            active = query.isActive
            for progress in updates.read():  # each update once
                if progress.batchId > logged and progress.numInputRows > 0:
                    if progress.batchId not in batch_files:  # a stateful job's result: its input is the source rows
                        summary.input_files += progress.numInputRows
                    _log_progress(progress, batch_files.get(progress.batchId, progress.numInputRows),
                                  job.source.unit)
                    logged = progress.batchId
                    keeper.details["last_committed_batch"] = progress.batchId
                if progress.batchId > recorded and executed(progress):
                    carried, inserted = batch_rows.pop(progress.batchId, (None, None))
                    if run_lineage is not None:
                        run_lineage.batch(batch_files.get(progress.batchId, 0), inserted or {})
                    if history is not None:
                        history.record(progress, rates=exact_rates(query, progress.batchId), rows=carried,
                                       rows_inserted=inserted, input_files=batch_files.get(progress.batchId))
                    recorded = progress.batchId
            if not active:
                break
            if keeper.lost is not None and not query.status["isTriggerActive"]:
                query.stop()
            if stopper.signal_name and stop_after is None:
                stop_after = recorded  # the batch running now (if one is) is the last one
            # Stop between batches; a stream that is never idle (one batch after the other) is stopped once the
            # batch that ran at the signal is done: the next one may have started, and is re-run by the next driver
            # exactly once.
            if stopper.signal_name and (not query.status["isTriggerActive"] or recorded > stop_after):
                query.stop()
                summary.stopped_by = stopper.signal_name
            try:
                query.awaitTermination(0.2)
            except StreamingQueryException:
                pass  # it failed just now: the next round sees it inactive and reports query.exception()
        if history is not None:
            history.close()  # the last rows, in one append
        summary.messages_not_loaded = skips.since_start()
        checkpoints.drain()  # the tables' checkpoints, written off the batches' path (driver/write/checkpoints.py)
        if keeper.lost is not None:
            raise JobFailed(f"job {job.name} stopped: {keeper.lost}")
        error = query.exception()
        if error is not None:
            explained = explain_failure(str(error))
            if explained:
                raise JobFailed(f"job {job.name} cannot resume from checkpoint {checkpoint}: {explained}")
            raise JobFailed(f"job {job.name} failed: {failure_summary(str(error)) or type(error).__name__}")
    summary.seconds = round(time.monotonic() - started, 2)
    return summary


def start_recorder(job: JobSpec, options: RunOptions):
    """The run's :class:`~spark_jobs.control.monitoring.progress.ProgressRecorder`, or None when the job's
    ``ProgressHistory`` settings (or the run's options) switch it off."""
    from spark_jobs.control.monitoring.progress import ProgressRecorder

    if not (job.progress.enabled and options.progress_history):
        return None
    return ProgressRecorder(options.lake.root, job, options.stream_name(job.name), input_path=str(options.input_path))


def exact_rates(query, batch_id: int) -> tuple[float, float] | None:
    """The batch's input and processing rates as Spark computed them (the progress JSON behind
    ``recentProgress`` rounds them to one decimal), read from the JVM's last progress object: four
    calls, not a conversion of the whole object; None when a later batch already replaced it."""
    try:
        last = query._jsq.lastProgress()
        if last is None or last.batchId() != batch_id:
            return None
        return float(last.inputRowsPerSecond()), float(last.processedRowsPerSecond())
    except Exception:  # noqa: BLE001 - the rounded rates of the JSON are kept
        return None
