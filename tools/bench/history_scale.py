"""``bench --only history_scale``: what finding new files costs once a landing holds years of deliveries.

A job that has ingested every delivery of a landing, then finds one new file of 50 events. The landings are
CloudTrail histories (:mod:`tools.bench.history_landing`: one delivery every 5 minutes over ``N / 288`` days) of
10k, 100k and 1M small files on local disk (cached under ``.spark/bench/history/``) and of 1k and 100k objects in
the local S3 server (moto on loopback, answering LIST from a sorted key index as S3 does), each under its own
prefix of one bucket (see :func:`_buckets`).
Each is taken as already ingested (:mod:`tools.bench.history_state`: discovery's window and Spark's checkpoint
files as the stream would have left them, checked against the planner itself). Then, per landing, repeated and
interleaved across the landings (so the ratios are side by side in one run):

- **discovery per trigger** (:meth:`~spark_jobs.control.discovery.planner.Discovery.latest` in this process, on a
  copy of the discovery log): a trigger of a running stream that finds the new file (``trigger_new``, the goal's
  figure), one that finds nothing (``trigger_idle``) and the first trigger after a restart (``restart_trigger``,
  which reads the window back first): seconds, and the LIST requests sent (the store's own counter:
  ``Store.requests``; a local folder read counts as one). On the bucket, the time spent waiting for LIST
  responses is given apart (``list_wait_s``, and ``discovery_own_s`` the rest);
- **restart to first commit**: a real ``python -m spark_jobs run cloudtrail_etl --trigger available-now``
  process started on that checkpoint, timed to its first commit (``commits/1`` appears) and to its exit, after
  which the new file's 50 events must be in ``cloudtrail_events`` and its manifest must hold only that file;
- **checkpoint inspect**: the real ``python -m spark_jobs checkpoint inspect --json`` process, with a second new
  file waiting (it must report one file waiting, every other one ingested and no problem);
- **no-op catch-up**: the real ``run`` with nothing new, which must end without starting Spark;
- **state**: bytes under ``<checkpoint>/discovery/`` and under the whole checkpoint after the restart.

Each figure is reported as a ratio to the smallest landing of its kind (local: to 10k; bucket: to 1k), with the
goal beside it: at most 1.3x for discovery, restart to first commit, inspect and the no-op; requests per trigger
not growing; state at most 2x. Beside them: one LIST request's round trip on the S3 server, on a bucket of the
smallest history alone and on the shared bucket (``s3_server``), and Spark's own file source on the 10k and 100k
local landings (:mod:`tools.bench.file_source_listing`): what its trigger lists and the log it keeps.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.bench.history_landing import BODY, History, PreloadedS3, build_local, land_local, new_file_body, put_objects
from tools.bench.history_state import JOB, write_ingested_state
from tools.bench.launches import _summary, timed
from tools.s3_server import LocalS3
from spark_jobs.model.lake import PROJECT_ROOT

log = logging.getLogger("tools.bench")

CACHE = PROJECT_ROOT / ".spark" / "bench" / "history"
LOCAL_SCALES = (10_000, 100_000, 1_000_000)
BUCKET_SCALES = (1_000, 100_000)
FILE_SOURCE_SCALES = (10_000, 100_000)
# Above this many objects a bucket is filled by the preloaded server (moto answers ~250 PUTs/s here).
PUT_AT_MOST = 10_000
TIME_GOAL = 1.3
STATE_GOAL = 2.0
# In-process discovery samples per repetition: milliseconds each locally, a third of a second on the bucket (31
# LISTs of about 10 ms each from the indexed server), so a load spike on one is not the median.
DISCOVERY_REPEAT = 5
# The no-op and inspect are half-second processes: a few samples per repetition, so a load spike on one is not
# the median (one sample each read 1.33x on a loaded machine where four alternating reruns read 0.98x).
PROCESS_REPEAT = 3
SHARED_BUCKET = "history"
ALONE_BUCKET = "history-alone"
NEW_EVENTS = 50
TIMED = ("discovery_s", "restart_first_commit_s", "inspect_s", "noop_s")


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def _bytes_under(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _files_under(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file())


@dataclass
class Landing:
    """One history landing being measured.

    :param where: ``local`` or ``s3``.
    :param count: files in its history.
    :param root: what ``--input`` is (a folder, or ``s3a://bucket``).
    :param folder: its work folder (lakes, logs).
    :param build: how it was built.
    :param env: the environment of its processes.
    :param client: the bucket's boto3 client (``s3`` only).
    """

    where: str
    count: int
    root: str
    folder: Path
    build: dict
    env: dict
    client: object | None = None
    template: Path | None = None
    state: dict = field(default_factory=dict)
    samples: dict = field(default_factory=dict)
    checks: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.where}-{self.count}"

    @property
    def bucket(self) -> str:
        return self.root.split("://", 1)[1].split("/", 1)[0]

    @property
    def prefix(self) -> str:
        """The folder of the landing in its bucket, with its ``/`` (``""``: the bucket's root)."""
        path = self.root.split("://", 1)[1].partition("/")[2].strip("/")
        return f"{path}/" if path else ""

    def land(self, key: str, body: bytes) -> None:
        if self.client is not None:
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body)
        else:
            land_local(Path(self.root), key, body)

    def remove(self, key: str) -> None:
        if self.client is not None:
            self.client.delete_object(Bucket=self.bucket, Key=self.prefix + key)
        else:  # and the folders landing it made (a trigger lists every folder there is)
            path = Path(self.root) / key
            path.unlink(missing_ok=True)
            for folder in path.parents:
                if folder == Path(self.root):
                    break
                if folder.is_dir():
                    if any(folder.iterdir()):
                        break
                    folder.rmdir()

    def full_key(self, key: str) -> str:
        return f"{self.root.rstrip('/')}/{key}" if self.client is not None else f"file:{self.root}/{key}"

    def add(self, metric: str, value) -> None:
        self.samples.setdefault(metric, []).append(value)


def _command(landing: Landing, lake: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "spark_jobs", *args, JOB.name, "--input", landing.root, "--lake", str(lake)]


class _TimedClient:
    """A boto3 S3 client that adds up the time spent in ``list_objects_v2`` (waiting for the server)."""

    def __init__(self, client) -> None:
        self._client = client
        self.list_seconds = 0.0

    def list_objects_v2(self, **kwargs):
        started = time.monotonic()
        try:
            return self._client.list_objects_v2(**kwargs)
        finally:
            self.list_seconds += time.monotonic() - started

    def __getattr__(self, name):
        return getattr(self._client, name)


def _discovery(landing: Landing, checkpoint: Path):
    """A :class:`Discovery` of ``landing`` on ``checkpoint``, its store counting requests (and, on a bucket, timing)."""
    from spark_jobs.control.discovery.listing import S3Store, store_of
    from spark_jobs.control.discovery.planner import Discovery
    from spark_jobs.control.discovery.settings import discovery_settings

    settings = discovery_settings(JOB, landing.root, str(checkpoint), dict(JOB.file_source_options))
    timer = _TimedClient(landing.client) if landing.client is not None else None

    def store(root: str):
        return S3Store(root, client=timer) if timer is not None else store_of(root)

    return Discovery(settings, store_factory=store), timer


def _trigger(discovery, timer, start: dict) -> tuple[dict, dict]:
    """One ``latest`` call: its end offset and cost."""
    requests = discovery.store.requests
    waited = timer.list_seconds if timer else 0.0
    started = time.perf_counter()
    end = discovery.latest(start, discovery.settings.max_files)
    seconds = time.perf_counter() - started
    cost = {"s": seconds, "requests": discovery.store.requests - requests}
    if timer is not None:
        cost["list_wait_s"] = timer.list_seconds - waited
    return end, cost


def _measure_discovery(landing: Landing, scratch: Path, repeat: int) -> None:
    """Discovery in this process on copies of the discovery log (see the module docstring)."""
    from spark_jobs.control.discovery.planner import offset

    manifest = landing.state["manifest"]
    start = offset(manifest)
    new_key = History.new_key()
    for sample in range(repeat):
        for copy in ("running", "restarted"):
            target = scratch / f"{copy}-{sample}"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(landing.template / "checkpoints" / JOB.name / "discovery", target / "discovery")
        landing.remove(new_key)
        running, timer = _discovery(landing, scratch / f"running-{sample}")
        end, _ = _trigger(running, timer, start)  # the window read in: a running stream holds it
        if end != start:
            raise AssertionError(f"{landing.name}: discovery found files in a landing with nothing new: {end}")
        end, idle = _trigger(running, timer, start)
        landing.land(new_key, b"x" * 64)
        try:
            end, fresh = _trigger(running, timer, start)
            found = [f.key for f in running.files(start, end)]
            if found != [landing.full_key(new_key)]:
                raise AssertionError(f"{landing.name}: a trigger after one new file found {found[:5]}")
            restarted, timer = _discovery(landing, scratch / f"restarted-{sample}")
            end, first = _trigger(restarted, timer, start)
            if end != offset(manifest + 1):
                raise AssertionError(f"{landing.name}: the first trigger after a restart returned {end}")
        finally:
            landing.remove(new_key)
        for name, cost in (("trigger_idle", idle), ("trigger_new", fresh), ("restart_trigger", first)):
            for key, value in cost.items():
                landing.add(f"{name}_{key}", value)
        shutil.rmtree(scratch / f"running-{sample}")
        shutil.rmtree(scratch / f"restarted-{sample}")


def _list_request_s(client, bucket: str, prefix: str, samples: int = 10) -> list[float]:
    """Round trips of one LIST request: the newest delivery's day folder under ``prefix``."""
    folder = prefix + History.key_at(0).rsplit("/", 1)[0] + "/"
    seconds = []
    for _ in range(samples):
        started = time.perf_counter()
        client.list_objects_v2(Bucket=bucket, Prefix=folder, Delimiter="/")
        seconds.append(time.perf_counter() - started)
    return seconds


def _wait_for(path: Path, process: subprocess.Popen, timeout: float) -> float:
    started = time.monotonic()
    while not path.exists():
        if process.poll() is not None:
            raise RuntimeError(f"the run exited ({process.returncode}) before {path.name} appeared")
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{path} did not appear within {timeout:g} s")
        time.sleep(0.02)
    return time.monotonic()


def _measure_restart(landing: Landing, lake: Path, log_path: Path) -> None:
    """The real run on the ingested state with one new file: to its first commit and to its exit; then check it."""
    from deltalake import DeltaTable

    from spark_jobs.control.checkpoint.store import Location
    from spark_jobs.control.discovery.state import DiscoveryLog

    checkpoint = lake / "checkpoints" / JOB.name
    landing.land(History.new_key(), new_file_body(NEW_EVENTS))
    command = _command(landing, lake, "run") + ["--trigger", "available-now"]
    with log_path.open("w") as err, (log_path.with_suffix(".out")).open("w") as out:
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=landing.env, stdout=out, stderr=err)
        try:
            committed = _wait_for(checkpoint / "commits" / "1", process, 900)
            code = process.wait(900)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
        ended = time.monotonic()
    if code != 0:
        raise RuntimeError(f"{landing.name}: the restart failed (exit {code}); see {log_path}")
    summary = _summary(log_path.with_suffix(".out").read_text())
    landing.add("restart_first_commit_s", committed - started)
    landing.add("restart_exit_s", ended - started)
    landing.add("restart_in_run_s", summary.get("seconds"))
    manifest = DiscoveryLog(Location.of(str(checkpoint))).read_manifest(landing.state["manifest"] + 1)
    rows = DeltaTable(str(lake / "tables" / "cloudtrail_events")).to_pyarrow_table(columns=["eventID"]).num_rows
    got = {"batches": summary.get("batches"), "input_files": summary.get("input_files"), "rows": rows,
           "manifest_files": [f.key for f in manifest.files] if manifest else None}
    want = {"batches": 1, "input_files": 1, "rows": NEW_EVENTS, "manifest_files": [landing.full_key(History.new_key())]}
    if got != want:
        raise AssertionError(f"{landing.name}: the restart did not ingest the new file exactly once: {got} != {want}")
    landing.checks.append("restart ingested the new file once (1 batch, 1 file, 50 rows, its manifest only)")


def _measure_inspect(landing: Landing, lake: Path) -> None:
    """``checkpoint inspect`` with a second new file waiting."""
    second = History.key_at(-2)
    landing.land(second, b"x" * 64)
    try:
        for _ in range(PROCESS_REPEAT):
            seconds, out = timed(_command(landing, lake, "checkpoint", "inspect") + ["--json"], landing.env)
            report = json.loads(out)
            got = (report["backlog_files"], report["ingested_files"], report["problems"])
            if got != (1, landing.count + 1, []):
                raise AssertionError(f"{landing.name}: inspect reported (waiting, ingested, problems) {got}, "
                                     f"expected (1, {landing.count + 1}, [])")
            landing.add("inspect_s", seconds)
            landing.add("inspect_requests", report["discovery"]["listing"]["requests"])
    finally:
        landing.remove(second)


def _measure_noop(landing: Landing, lake: Path) -> None:
    for _ in range(PROCESS_REPEAT):
        seconds, out = timed(_command(landing, lake, "run") + ["--trigger", "available-now"], landing.env)
        summary = _summary(out)
        if summary.get("batches") != 0 or not summary.get("skipped"):
            raise AssertionError(f"{landing.name}: the no-op run started Spark or ran batches: {summary}")
        landing.add("noop_s", seconds)


def _repetition(landing: Landing, rep: int) -> None:
    """One repetition on ``landing``: discovery, the restart, inspect, the no-op, the state's size."""
    lake = landing.folder / f"lake-{rep}"
    shutil.rmtree(lake, ignore_errors=True)
    shutil.copytree(landing.template, lake)
    _measure_discovery(landing, landing.folder / "scratch", DISCOVERY_REPEAT)
    try:
        _measure_restart(landing, lake, landing.folder / f"restart-{rep}.log")
        _measure_inspect(landing, lake)
        _measure_noop(landing, lake)
    finally:
        landing.remove(History.new_key())  # the cached landing holds the history only
    checkpoint = lake / "checkpoints" / JOB.name
    landing.add("state_discovery_bytes", _bytes_under(checkpoint / "discovery"))
    landing.add("state_discovery_files", _files_under(checkpoint / "discovery"))
    landing.add("checkpoint_bytes", _bytes_under(checkpoint))
    shutil.rmtree(lake)


def _prepare_state(landing: Landing) -> None:
    """The ingested state of ``landing``'s history, written once into its template lake."""
    template = landing.folder / "template"
    shutil.rmtree(template, ignore_errors=True)
    keys = list(History(landing.count).keys())
    state = write_ingested_state(template, landing.root, keys, size=len(BODY), mtime_ms=0)
    landing.template = template
    checkpoint = template / "checkpoints" / JOB.name
    landing.state = {**state.to_dict(), "discovery_bytes": _bytes_under(checkpoint / "discovery"),
                     "checkpoint_bytes": _bytes_under(checkpoint)}
    log.info("history %s: ingested state written in %.1f s (manifest %d, %d files in the window)", landing.name,
             state.seconds, state.manifest, state.seen)


def _local(count: int, work: Path, cache: Path) -> Landing:
    build = build_local(cache / f"local-{count}", count)
    landing = Path(build["landing"]).resolve()
    log.info("history local-%d: %s in %s s", count, "reused" if build["reused"] else "written", build["seconds"])
    env = {**os.environ}
    env.pop("LAKE_ROOT", None)
    return Landing("local", count, str(landing), work / f"local-{count}", build, env)


def _buckets(counts: tuple[int, ...], work: Path, servers: list) -> tuple[list[Landing], dict]:
    """The bucket histories, each under its own prefix (``h<count>/``) of one bucket of one S3 server, and how that
    server answers a LIST.

    The server answers LIST requests from a sorted index of the keys, as S3 does (:mod:`tools.bench.
    s3_listing_index`): moto as it is goes through every key of the bucket and cuts every key under the prefix
    at the delimiter, so that a request for ``AWSLogs/`` costs what the whole history below it costs, which S3
    does not do (measured so on 2026-11-27: discovery 1.35x and inspect 1.33x from 100k to 1k objects with the
    same 31 requests; docs/benchmarks.md). One bucket still, so that nothing but the history differs. The
    smallest history also goes alone into a bucket of its own, and one LIST on each bucket is timed
    (``s3_server``): with the index, the same. The largest history is preloaded (:class:`PreloadedS3`), the
    others PUT.
    """
    import boto3
    import botocore.config

    folder = work / "s3"
    folder.mkdir(parents=True, exist_ok=True)
    large = [c for c in counts if c > PUT_AT_MOST]
    if len(large) > 1:
        raise ValueError(f"one bucket history of more than {PUT_AT_MOST} objects at most (preloaded), got {large}")
    builds = {}
    if large:
        server = PreloadedS3(SHARED_BUCKET, large[0], folder / "s3-server.log", prefix=f"h{large[0]}")
        started = time.monotonic()
        server.start(timeout=600)
        servers.append(server)
        builds[large[0]] = {**server.fill(), "until_answering_s": round(time.monotonic() - started, 1)}
    else:
        server = LocalS3(log_path=folder / "s3-server.log").start()
        servers.append(server)
        server.create_bucket(SHARED_BUCKET)
    client = boto3.client("s3", endpoint_url=server.endpoint, region_name=server.environment()["AWS_REGION"],
                          aws_access_key_id=server.access_key, aws_secret_access_key=server.secret_key,
                          config=botocore.config.Config(max_pool_connections=32))
    for count in counts:
        if count not in builds:
            builds[count] = put_objects(client, SHARED_BUCKET, [f"h{count}/{key}" for key in History(count).keys()])
    server.create_bucket(ALONE_BUCKET)
    alone = put_objects(client, ALONE_BUCKET, list(History(min(counts)).keys()))
    env = {**os.environ, **server.environment()}
    env.pop("LAKE_ROOT", None)
    landings = []
    for count in counts:
        log.info("history s3-%d: %s", count, builds[count])
        landings.append(Landing("s3", count, f"s3a://{SHARED_BUCKET}/h{count}", work / f"s3-{count}",
                                {**builds[count], "bucket_objects": sum(counts)}, env, client=server.client()))
    probe = {"client": client, "buckets": {ALONE_BUCKET: min(counts), SHARED_BUCKET: sum(counts)}, "alone": alone,
             "samples": {ALONE_BUCKET: [], SHARED_BUCKET: []}}
    return landings, probe


def _probe_lists(probe: dict) -> None:
    for bucket, samples in probe["samples"].items():
        prefix = "" if bucket == ALONE_BUCKET else f"h{probe['buckets'][ALONE_BUCKET]}/"
        samples += _list_request_s(probe["client"], bucket, prefix)


def _server_figures(probe: dict) -> dict:
    medians = {bucket: _median(samples) for bucket, samples in probe["samples"].items()}
    return {"list_request_s": {f"{bucket} ({probe['buckets'][bucket]:,} objects)": medians[bucket]
                               for bucket in medians},
            "ratio": round(medians[SHARED_BUCKET] / medians[ALONE_BUCKET], 2) if medians[ALONE_BUCKET] else None,
            "what": "one LIST of a day folder (72 keys) with Delimiter '/', timed from this process: the same "
                    "request on a bucket holding only the smallest history and on the bucket holding every history",
            "put": probe["alone"]}


def _figures(landing: Landing) -> dict:
    medians = {metric: _median([v for v in values if v is not None]) for metric, values in landing.samples.items()}
    return {
        "files": landing.count, "days": History(landing.count).days, "input": landing.root, "build": landing.build,
        "ingested_state": landing.state,
        "discovery_s": medians["trigger_new_s"], "discovery_requests": medians["trigger_new_requests"],
        "restart_first_commit_s": medians["restart_first_commit_s"], "restart_exit_s": medians["restart_exit_s"],
        "inspect_s": medians["inspect_s"], "noop_s": medians["noop_s"],
        "state_discovery_bytes": medians["state_discovery_bytes"], "checkpoint_bytes": medians["checkpoint_bytes"],
        "medians": medians, "samples": landing.samples, "checks": sorted(set(landing.checks)),
        **({"discovery_list_wait_s": medians["trigger_new_list_wait_s"],
            "discovery_own_s": _median([s - w for s, w in zip(landing.samples["trigger_new_s"],
                                                             landing.samples["trigger_new_list_wait_s"])])}
           if "trigger_new_list_wait_s" in medians else {}),
    }


RATIO_GOALS = {"discovery_s": TIME_GOAL, "restart_first_commit_s": TIME_GOAL, "inspect_s": TIME_GOAL,
               "noop_s": TIME_GOAL, "discovery_requests": 1.0, "state_discovery_bytes": STATE_GOAL,
               "checkpoint_bytes": STATE_GOAL}


# Reported beside the goals, without one: the restart's whole process, and on a bucket what moto's LIST costs.
RATIO_INFO = ("restart_exit_s", "discovery_list_wait_s", "discovery_own_s")


def _ratios(big: dict, small: dict) -> dict:
    out = {}
    for metric in (*RATIO_GOALS, *RATIO_INFO):
        if metric not in big or metric not in small:
            continue
        ratio = round(big[metric] / small[metric], 2) if small[metric] else None
        goal = RATIO_GOALS.get(metric)
        out[metric] = {"small": small[metric], "large": big[metric], "ratio": ratio,
                       "goal": f"<= {goal:g}x" if goal else None,
                       "met": (ratio is not None and ratio <= goal) if goal else None}
    return out


def _table(kind: str, figures: dict, base: str) -> list[str]:
    """Plain-text rows: each figure per landing and as a ratio to ``base``."""
    names = list(figures)
    lines = [f"{kind}: " + " | ".join(["figure"] + names + [f"ratio {names[-1]}/{base}", "goal"])]
    for metric in (*RATIO_GOALS, *RATIO_INFO):
        if any(metric not in figures[n] for n in names):
            continue
        values = [figures[n][metric] for n in names]
        ratio = round(values[-1] / figures[base][metric], 2) if figures[base][metric] else None
        goal = RATIO_GOALS.get(metric)
        lines.append(" | ".join([metric] + [str(v) for v in values] + [f"{ratio}x", f"<= {goal:g}x" if goal else "-"]))
    return lines


def measure_history_scale(run_dir: Path, repeat: int = 3, local: tuple[int, ...] = LOCAL_SCALES,
                          buckets: tuple[int, ...] = BUCKET_SCALES,
                          file_source: tuple[int, ...] = FILE_SOURCE_SCALES, cache: Path = CACHE) -> dict:
    """Build (or reuse) the landings, measure each ``repeat`` times interleaved, and report figures and ratios."""
    work = run_dir / "history-scale"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    servers: list = []
    try:
        landings = [_local(count, work, cache) for count in local]
        probe = None
        if buckets:
            in_buckets, probe = _buckets(buckets, work, servers)
            landings += in_buckets
        for landing in landings:
            landing.folder.mkdir(parents=True, exist_ok=True)
            for key in (History.new_key(), History.key_at(-2)):  # left by an interrupted run
                landing.remove(key)
            _prepare_state(landing)
        for rep in range(repeat):
            # forth, then back: a load that drifts during a round weighs on every landing alike
            for landing in (landings if rep % 2 == 0 else landings[::-1]):
                log.info("history_scale: repetition %d of %d on %s", rep + 1, repeat, landing.name)
                _repetition(landing, rep)
            if probe:
                _probe_lists(probe)
    finally:
        for server in servers:
            server.stop()
    section: dict = {"what": __doc__.split("\n\n")[0], "repeat": repeat, "discovery_samples": repeat * DISCOVERY_REPEAT}
    figures = {kind: {str(l.count): _figures(l) for l in landings if l.where == kind} for kind in ("local", "s3")}
    section.update(figures)
    if probe:
        section["s3_server"] = _server_figures(probe)
    ratios, table = {}, []
    for kind, scales in (("local", local), ("s3", buckets)):
        if len(scales) >= 2:
            small, big = str(min(scales)), str(max(scales))
            ratios[f"{kind}_{big}_to_{small}"] = _ratios(figures[kind][big], figures[kind][small])
            table += _table(kind, figures[kind], small)
    section["ratios"] = ratios
    section["table"] = table
    for line in table:
        log.info("%s", line)
    if file_source:
        from tools.bench.file_source_listing import measure_file_source

        section["file_source"] = {str(count): measure_file_source(Path(build_local(cache / f"local-{count}", count)
                                                                       ["landing"]).resolve(), work / f"file-source-{count}")
                                  for count in file_source}
    timed = [r["ratio"] for group in ratios.values() for m, r in group.items() if m in TIMED]
    section["worst_time_ratio"] = max(timed) if timed else None
    section["requests_ratio"] = max((group["discovery_requests"]["ratio"] for group in ratios.values()), default=None)
    section["worst_state_ratio"] = max((r["ratio"] for group in ratios.values() for m, r in group.items()
                                        if m in ("state_discovery_bytes", "checkpoint_bytes")), default=None)
    section["goal"] = (f"largest to smallest landing: discovery, restart to first commit, inspect and the no-op <= "
                       f"{TIME_GOAL:g}x; requests per trigger do not grow; state <= {STATE_GOAL:g}x")
    section["met"] = all(r["met"] for group in ratios.values() for r in group.values()
                         if r["goal"]) if ratios else None
    return section
