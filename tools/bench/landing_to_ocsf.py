"""From a CloudTrail file landing to its events' OCSF rows: the raw job and the OCSF job, running as people run them.

Usage::

    python -m tools.bench.landing_to_ocsf [--files 20] [--gap 3] [--records-per-file 100] [--warmup-files 3]
                                          [--trigger processing-time:1s] [--out .spark/bench/landing-to-ocsf.json]

Two drivers, each its own process and JVM on the same two cores: ``python -m spark_jobs run cloudtrail_etl`` reading
the landing folder and ``python -m spark_jobs run cloudtrail_ocsf`` reading ``cloudtrail_events`` as a Delta stream,
both with ``--trigger`` (the benchmark's freshness trigger by default). Both are warmed up first (a JVM's first
micro-batches are several times slower; :mod:`tools.bench.freshness`), then files of real records, re-stamped with
fresh ``eventID``\\ s (:class:`tools.bench.data.RecordSource`), land ``--gap`` seconds apart on a fixed clock.

A delta-rs reader (as a DuckDB or pandas user reads the tables) polls every 0.1 s: ``cloudtrail_events``' new files
for their ``_source_file``, and the OCSF tables' (``ocsf_api_activity``, ``ocsf_authentication``,
``ocsf_account_change``) and ``cloudtrail_ocsf_quarantine``'s new files for their events' keys (``metadata.uid``,
``source_key``). A file's raw latency ends at the poll that first shows it in ``cloudtrail_events``; its OCSF
latency at the poll after which every one of its events is in an OCSF table or the OCSF quarantine. Reported: p50,
p95 and max of both, every latency, and the two drivers' batch durations. Prints one JSON object and writes it to
``--out``. Not part of the tests.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import platform
import random
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT, Lake
from spark_jobs.registry import get_job
from tools.bench.data import RecordSource
from tools.bench.freshness import TRIGGER, JobProcess, start_job
from tools.bench.freshness_large import POLL_PAUSE_S, DeltaRsWatcher, Poller
from tools.bench.probes import percentile

log = logging.getLogger("tools.bench")
OCSF_JOB = get_job("cloudtrail_ocsf")
VISIBLE_TIMEOUT_S = 300.0


def event_ids(landing: Path, name: str) -> set[str]:
    """The ``eventID``\\ s of the CloudTrail file ``name`` landed under ``landing`` (in its dated folder)."""
    [path] = landing.rglob(name)
    return {record["eventID"] for record in json.loads(gzip.decompress(path.read_bytes()))["Records"]}


class Clock(Poller):
    """Polls the raw table and the OCSF tables until stopped; records when each landed file was first seen in each.

    :param lake: the run's lake.
    :param landed: file name -> (landing time, its event ids); filled by the caller as files land.
    """

    def __init__(self, lake: Lake, landed: dict[str, tuple[float, set[str]]]):
        super().__init__("landing-to-ocsf-clock")
        self.landed = landed
        self.raw = DeltaRsWatcher(lake.table_path("cloudtrail_events"))
        self.ocsf = [DeltaRsWatcher(lake.table_path(table.name), "metadata", "uid", key=str)
                     for table in OCSF_JOB.tables if table.name.startswith("ocsf_")]
        self.quarantine = DeltaRsWatcher(lake.table_path("cloudtrail_ocsf_quarantine"), "source_key", key=str)
        self.raw_latency: dict[str, float] = {}
        self.ocsf_latency: dict[str, float] = {}

    def poll_once(self) -> None:
        in_raw = self.raw.poll()
        in_ocsf = set().union(*(watcher.poll() for watcher in self.ocsf), self.quarantine.poll())
        seen_at = time.monotonic()
        for name, (landed_at, ids) in list(self.landed.items()):
            if name not in self.raw_latency and name in in_raw:
                self.raw_latency[name] = round(seen_at - landed_at, 3)
            if name not in self.ocsf_latency and ids <= in_ocsf:
                self.ocsf_latency[name] = round(seen_at - landed_at, 3)

    def wait_for(self, names: set[str], timeout: float = VISIBLE_TIMEOUT_S, jobs: tuple[JobProcess, ...] = ()) -> None:
        deadline = time.monotonic() + timeout
        while not names <= self.ocsf_latency.keys():
            if self.error is not None:
                raise RuntimeError(f"the reader failed: {self.error!r}") from self.error
            for job in jobs:
                job.check_alive()
            if time.monotonic() > deadline:
                missing = sorted(names - self.ocsf_latency.keys())
                raise TimeoutError(f"{len(missing)} files never reached the OCSF tables within {timeout:g} s")
            time.sleep(POLL_PAUSE_S)


def _stats(values: list[float]) -> dict:
    return {"p50_s": percentile(values, 50), "p95_s": percentile(values, 95), "max_s": max(values)}


def _batches(job: JobProcess) -> list[str]:
    """The driver's log lines of its micro-batches (``batch N: ...``)."""
    return [line.split("INFO spark_jobs: ", 1)[-1] for line in job.lines if "INFO spark_jobs: batch" in line]


def measure(workdir: Path, files: int, gap_s: float, records_per_file: int, warmup_files: int, trigger: str,
            seed: int = 7) -> dict:
    """Warm both drivers up, land ``files`` files ``gap_s`` apart, time each to its raw and its OCSF rows."""
    source = RecordSource()
    raw = start_job(workdir, source, warmup_files, records_per_file, seed, name="landing-to-ocsf")
    ocsf: JobProcess | None = None
    clock: Clock | None = None
    try:
        raw.warmup.join(timeout=VISIBLE_TIMEOUT_S + 180)
        if raw.warmup_error or raw.warmup.is_alive():
            raise RuntimeError(f"the raw job's warm-up did not finish: {raw.warmup_error!r}\n{raw.job.tail()}")
        landed = {name: (raw.landed[name], event_ids(raw.landing, name)) for name in raw.warmup_names}
        ocsf = JobProcess(["run", OCSF_JOB.name, "--lake", str(raw.lake.root), "--trigger", trigger])
        clock = Clock(raw.lake, landed)
        clock.start()
        clock.wait_for(set(raw.warmup_names), jobs=(raw.job, ocsf))  # the OCSF job's first batches: its warm-up
        ocsf_warmup_batches = len(_batches(ocsf))
        raw_warmup_batches = len(_batches(raw.job))
        order: list[str] = []
        started = time.monotonic()
        for index in range(files):  # on a fixed clock: file k lands gap_s * k after the first
            name = raw.land()
            landed[name] = (raw.landed[name], event_ids(raw.landing, name))
            order.append(name)
            log.info("landing to OCSF: file %d of %d landed", index + 1, files)
            pause = started + gap_s * (index + 1) - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        clock.wait_for(set(order), jobs=(raw.job, ocsf))
    finally:
        if clock is not None:
            clock.halt.set()
            clock.join(timeout=10)
        ocsf_summary = ocsf.stop() if ocsf is not None else ""
        raw_summary = raw.job.stop()
    raw_latencies = [clock.raw_latency[name] for name in order]
    ocsf_latencies = [clock.ocsf_latency[name] for name in order]
    return {
        "what": "file landed (os.replace) -> its events' OCSF rows (or OCSF quarantine entries) visible to a delta-rs "
                f"reader; drivers: python -m spark_jobs run cloudtrail_etl / {OCSF_JOB.name} --trigger {trigger}",
        "files": files, "records_per_file": records_per_file, "gap_s": gap_s, "trigger": trigger,
        "source": source.name,
        "landing_to_ocsf": {**_stats(ocsf_latencies), "latencies_s": ocsf_latencies},
        "landing_to_raw": {**_stats(raw_latencies), "latencies_s": raw_latencies},
        "ocsf_after_raw_p50_s": percentile([o - r for o, r in zip(ocsf_latencies, raw_latencies)], 50),
        "raw_batches": _batches(raw.job)[raw_warmup_batches:],
        "ocsf_batches": _batches(ocsf)[ocsf_warmup_batches:],
        "ocsf_warmup_batches": _batches(ocsf)[:ocsf_warmup_batches],
        "reader_polls": clock.polls,
        "summaries": {"raw": raw_summary.strip().splitlines()[-1:], "ocsf": ocsf_summary.strip().splitlines()[-1:]},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--gap", type=float, default=3.0, help="seconds between two landings")
    parser.add_argument("--records-per-file", type=int, default=100)
    parser.add_argument("--warmup-files", type=int, default=3)
    parser.add_argument("--trigger", default=TRIGGER, help="both drivers' trigger")
    parser.add_argument("--workdir", type=Path, default=PROJECT_ROOT / ".spark" / "bench")
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / ".spark" / "bench" / "landing-to-ocsf.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = datetime.now(UTC)
    result = measure(args.workdir, args.files, args.gap, args.records_per_file, args.warmup_files, args.trigger)
    report = {"measured_at": started.isoformat(timespec="seconds"), "host": platform.node(),
              "cpus": os.cpu_count(), **result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    shutil.rmtree(args.workdir / "landing-to-ocsf", ignore_errors=True)
    return report


if __name__ == "__main__":
    main()
