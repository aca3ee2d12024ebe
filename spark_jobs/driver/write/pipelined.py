"""The pipelined plan: write a file batch in one pass when the files' names bound the dates of its events.

The cached plan (:mod:`spark_jobs.driver.write.cached`) parses every file
once into the batch's cache and reads that cache three times: a pass that counts each table's rows
and collects the event dates (what bounds the insert-only MERGE of the keyed table), then one write
per table. Filling and re-reading the cache costs about as much as the parse itself
(``python -m spark_jobs bench --only write_shapes``).

A table may declare, in the registry's ``delivery_date_bound``, that its partition column lies within a
few days before each input file's delivery date (CloudTrail delivers an event within about 15
minutes, so its UTC date is its file's date or the day before). The MERGE's bound is then known
from the file names (the source's key layout, :class:`~spark_jobs.model.layout.KeyLayout`) before anything is
read, and the batch is written in one pass: parse, then the keyed table's staged insert of the rows within the
bound (:mod:`~spark_jobs.driver.write.staged`: the rows written, a key's later deliveries and the keys the table
holds left out, one commit). The same pass is observed with Spark's ``Observation`` (metrics of that execution,
no second read): each table's rows, and the keyed table's rows outside the bound. The common batch, only good
events, all within the bound, ends there.

A table may also declare a ``delivery_time_bound`` (``cloudtrail_events``: ``eventTime``, at most 20
minutes before its file's delivery time and 5 after). The pass then takes, of the rows within the dates,
those whose time lies within the batch's files' delivery times so widened, and its MERGE's condition
bounds the table's side to that same range with literals; Delta keeps per-file min/max statistics of
the column and reads only the files whose range reaches into it (the live job's files, and
``lake optimize``'s, which Z-orders such a table by that column, each hold a short stretch of time). So a
batch's MERGE reads about the same few files whether the day's partition holds 100 thousand events or
10 million. It is exact because the column is the same in every delivery of a key (a redelivered
CloudTrail event is the same record): a row of the table with the key of a row the MERGE inserts has
that row's time, which lies in the range, so the MERGE sees it. A row outside the range (a late
delivery) is counted like a row outside the dates and goes the cached way, bounded by dates only; a
NULL time (quarantined by the parse anyway) is outside.

A batch with rows for another table (quarantine) or outside the bound then goes through the
cached plan as well, whose MERGE of the keyed table inserts only the keys the table lacks, under the
writer's second series of app ids (``<query id>:<table>:rest``,
:data:`~spark_jobs.driver.write.delta_writer.REST_SERIES`) so that Delta does not take it for the batch it
already holds.

The cached plan is used instead for a batch with a file whose name and folders carry no date, a
batch the keyed table already holds (a batch run again after a crash), and a job without the
declaration (or whose batches carry no file paths: Kafka's). Why this module exists: Spark writes one sink
per pass and Delta's MERGE needs its partition bound before it starts; neither gives a multi-table write of one
pass.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from spark_jobs.driver.session import job_step
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.layout import KeyLayout
from spark_jobs.driver.write.delta_writer import ExactlyOnceWriter, TableTarget, TimeRange
from spark_jobs.driver.write.rows import route_column, table_rows

if TYPE_CHECKING:
    from spark_jobs.driver.job_contract import JobModule

log = logging.getLogger("spark_jobs")

# The observed metrics arrive through Spark's listener bus, just after the write returns.
OBSERVATION_WAIT_SECONDS = 60.0
_OUTSIDE = "_outside_bound"
_REST_FILES = "_rest_files"
# The first lines of the Spark jobs' descriptions (the Spark UI; the benchmark's profile).
STEP_LIST = "one pass: list the batch's files"
STEP_PIPELINED = "one pass: parse, write, leave out keys held, commit"


@dataclass
class PipelinedWrite:
    """What a one-pass write did.

    :param table: the table it wrote (its commit holds the batch; the rest goes under the writer's ``:rest`` series).
    :param complete: the batch is wholly written (nothing for the cached plan to do).
    :param files: the batch's input files.
    :param rows: rows inserted per table.
    :param carried: rows the batch carried per table (before deduplication); ``None`` when the
        observation did not arrive.
    :param done: tables the pass wrote whole (nothing of the batch left for them).
    :param rest_files: the input files whose rows it did not write (``None``: not known, all of them).
    """

    table: str
    complete: bool
    files: int
    rows: dict[str, int] = field(default_factory=dict)
    carried: dict[str, int] | None = None
    done: tuple[str, ...] = ()
    rest_files: list[str] | None = None


def bounded_table(targets: list[TableTarget]) -> tuple[TableTarget, str, int] | None:
    """The target whose partition column the files' delivery dates bound, that column, and the days before
    (the registry checks that the column is a partition column in the key of an insert table)."""
    for target in targets:
        bound = target.delivery_date_bound
        if bound is not None and bound.column in target.prune_by and target.write_mode == "insert":
            return target, bound.column, bound.days_before
    return None


def delivery_bound(paths: list[str], days_before: int, layout: KeyLayout) -> list[dt.date] | None:
    """Every date from ``days_before`` days before each file's delivery date (the job's key layout) to that date;
    ``None`` when a file's name and folders carry no date."""
    dates: set[dt.date] = set()
    for path in paths:
        delivered = layout.delivery_date(path)
        if delivered is None:
            return None
        dates.update(delivered - dt.timedelta(days=n) for n in range(days_before + 1))
    return sorted(dates)


def rest_table(writer: ExactlyOnceWriter, targets: list[TableTarget], files: DataFrame, batch_id: int) -> str | None:
    """The table whose rows of ``batch_id`` not yet written go under the writer's ``:rest`` series: the bounded
    table, when it holds the batch already (a one pass wrote part of it, or a run before a crash did); ``None``
    for a batch without file paths (Kafka's: the pipelined pass never writes those)."""
    if "path" not in files.columns:
        return None
    found = bounded_table(targets)
    return found[0].name if found and writer.holds(batch_id, found[0].name) else None


@dataclass(frozen=True)
class PipelinedPlan:
    """A batch the pipelined pass applies to (see the module docstring), before anything is written.

    :param target: the bounded table.
    :param column: its partition column the files' delivery dates bound.
    :param paths: the batch's input files.
    :param bound: the dates of ``column`` the batch's rows may have.
    :param time_range: the range of the target's ``delivery_time_bound`` column the pass takes (``None``:
        no time bound declared, or a file without a delivery time in its name).
    """

    target: TableTarget
    column: str
    paths: list[str]
    bound: list[dt.date]
    time_range: TimeRange | None = None


def plan_pipelined(writer: ExactlyOnceWriter, targets: list[TableTarget], files: DataFrame,
                  batch_id: int, *, job: JobSpec, paths: list[str] | None = None) -> PipelinedPlan | None:
    """Whether the pipelined pass applies to ``files``, and its bound.

    :param job: the registry entry (its source's key layout dates the files).
    :param paths: the batch's files when known (the landing source's manifest); else they are listed from
        ``files`` (one small Spark job).
    :returns: ``None`` when it does not (see the module's docstring).
    """
    found = bounded_table(targets)
    layout = getattr(job.source, "layout", None)
    if found is None or layout is None or "path" not in files.columns:
        return None
    target, column, days_before = found
    if writer.holds(batch_id, target.name):
        return None
    if paths is None:
        with job_step(files.sparkSession, STEP_LIST):
            paths = [row[0] for row in files.select("path").collect()]
    if not paths:
        return None
    bound = delivery_bound(paths, days_before, layout)
    if bound is None:
        log.info("batch %d: a file has no delivery date in its name or folders: parsing into the batch's cache",
                 batch_id)
        return None
    return PipelinedPlan(target, column, paths, bound, delivery_range(target, paths, layout))


def delivery_range(target: TableTarget, paths: list[str], layout: KeyLayout) -> TimeRange | None:
    """The range of ``target``'s time-bound column that the files' delivery times (their names', to the minute)
    allow, or ``None`` when the table declares no time bound or a file's name carries no delivery time."""
    bound = target.delivery_time_bound
    if bound is None or not layout.names_carry_minutes:
        return None
    times = [layout.name_time(path) for path in paths]
    if not times or None in times:
        return None
    return TimeRange(bound.column, min(times) - dt.timedelta(minutes=bound.minutes_before),
                     max(times) + dt.timedelta(minutes=bound.minutes_after, seconds=59.999999))


def write_pipelined(module: JobModule, job: JobSpec, writer: ExactlyOnceWriter, targets: list[TableTarget],
                   files: DataFrame, batch_id: int, pipelined: PipelinedPlan | None = None) -> PipelinedWrite | None:
    """Write ``files`` to the bounded table in one pass, observing what else the batch holds.

    :param job: the registry entry (its ``source_file_column``: the rest is then written from only the
        files with rows this pass left).
    :param pipelined: the plan :func:`plan_pipelined` made (made here when not given).
    :returns: ``None`` when the one pass does not apply (see the module's docstring), else what it did.
    """
    pipelined = pipelined or plan_pipelined(writer, targets, files, batch_id, job=job)
    if pipelined is None:
        return None
    target, column, paths, bound = pipelined.target, pipelined.column, pipelined.paths, pipelined.bound
    spark = files.sparkSession
    parsed = module.transform(files, job)
    route = route_column(targets)
    inside = F.col(column).isin(bound)
    timed = pipelined.time_range
    if timed is not None:
        inside = inside & F.col(timed.column).between(F.lit(timed.start), F.lit(timed.end))
    inside = F.coalesce(inside, F.lit(False))
    observation = Observation(f"one_pass_{uuid.uuid4().hex}")
    left = (route != target.name) | ~inside  # a row this pass does not write
    source_file = job.source_file_column
    named = [F.collect_set(F.when(left, F.col(source_file))).alias(_REST_FILES)] if source_file else []
    observed = parsed.observe(observation, *[F.count_if(route == t.name).alias(t.name) for t in targets],
                              F.count_if((route == target.name) & ~inside).alias(_OUTSIDE), *named)
    source = table_rows(module, target, observed).where(inside)
    with job_step(spark, STEP_PIPELINED):
        inserted = writer.insert_staged(batch_id, target.name, source, {column: bound}, time_range=timed).inserted
    rows = {t.name: 0 for t in targets} | {target.name: inserted}
    metrics = _observed(observation)
    if metrics is None:
        log.warning("batch %d: the one pass's metrics did not arrive in %.0f s; writing the rest from the batch's "
                    "cache", batch_id, OBSERVATION_WAIT_SECONDS)
        return PipelinedWrite(target.name, False, len(paths), rows)
    carried = {t.name: int(metrics[t.name]) for t in targets}
    outside = int(metrics[_OUTSIDE])
    others = sum(count for name, count in carried.items() if name != target.name)
    rest_files = sorted(metrics[_REST_FILES]) if source_file else None
    if outside or others:
        log.info("batch %d: %d rows outside the delivery dates (or times), %d rows for other tables (from %s "
                 "files): writing "
                 "them the cached way", batch_id, outside, others, len(rest_files) if rest_files is not None else "all")
    return PipelinedWrite(target.name, not outside and not others, len(paths), rows, carried,
                         done=(target.name,) if not outside else (), rest_files=rest_files)


def _observed(observation: Observation, timeout: float = OBSERVATION_WAIT_SECONDS) -> dict | None:
    """The observation's metrics, or ``None`` when they do not arrive within ``timeout`` seconds
    (``Observation.get`` itself waits for ever)."""
    box: dict = {}
    waiter = threading.Thread(target=lambda: box.update(metrics=observation.get), daemon=True,
                              name="one-pass-observation")
    waiter.start()
    waiter.join(timeout)
    return box.get("metrics")
