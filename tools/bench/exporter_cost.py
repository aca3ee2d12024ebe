"""What serving the Prometheus metrics costs the query: the same catch-up with the exporter scraped and without.

Usage::

    python -m tools.bench.exporter_cost [--records 12000] [--records-per-file 500] [--files-per-batch 4]
                                        [--repeat 4] [--scrape-interval 1] [--out .spark/bench/exporter-cost.json]

The exporter is ``python -m spark_jobs metrics --serve PORT`` on the run's lake, in a process of its own as the
Airflow API server is in production; a thread of this process scrapes it every ``--scrape-interval`` seconds
(Prometheus' default is 15 s: one second is fifteen times harsher). Each scrape computes every job's health (the
checkpoint, the backlog listing, the progress rows, the quarantine reasons) while the query runs on the same two
cores. The runs are :mod:`tools.bench.progress_cost`'s (one SparkSession, a warm-up of each mode, then alternating
repetitions on a fresh lake, many micro-batches); reported per mode: the runs' wall times, the median micro-batch
duration (Spark's ``batchDuration``), and for the scraped mode the scrapes made and their median time. Prints one
JSON object and writes it to ``--out``. Not part of the tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT
from tools.bench.progress_cost import timed_catch_up
from tools.ports import free_port, in_use

log = logging.getLogger("tools.bench")


@contextlib.contextmanager
def scraped(lake: Path, interval: float):
    """The exporter serving ``lake``, scraped every ``interval`` seconds until the block ends; yields the list the
    scrapes' durations (seconds) go to."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "spark_jobs", "metrics", "--lake", str(lake), "--serve",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    durations: list[float] = []
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(interval):
            started = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
                response.read()
            durations.append(time.monotonic() - started)

    try:
        deadline = time.monotonic() + 60
        while not in_use(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the exporter did not serve on {port}: {server.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
        scraper = threading.Thread(target=scrape, name="scraper", daemon=True)
        scraper.start()
        yield durations
    finally:
        stop.set()
        server.terminate()
        server.wait(timeout=30)


def measure(records: int, records_per_file: int, files_per_batch: int, repeat: int, interval: float,
            workdir: Path) -> dict:
    from spark_jobs.driver.session import build_session
    from tools.bench.data import write_landing

    data = write_landing(workdir / "data", records, records_per_file)
    lake = workdir / "lake"
    spark = build_session("exporter_cost")
    runs: list[dict] = []

    def run(exporter: bool) -> dict:
        if not exporter:
            return {**timed_catch_up(spark, data.landing, lake, files_per_batch, True), "exporter": False}
        with scraped(lake, interval) as durations:
            result = timed_catch_up(spark, data.landing, lake, files_per_batch, True)
        return {**result, "exporter": True, "scrapes": len(durations),
                "median_scrape_s": round(statistics.median(durations), 3) if durations else None}

    for exporter in (True, False):  # warm-up, not counted
        log.info("warm-up run, exporter %s", "scraped" if exporter else "off")
        run(exporter)
    for index in range(repeat):
        for exporter in ((True, False) if index % 2 == 0 else (False, True)):
            log.info("repetition %d of %d, exporter %s", index + 1, repeat, "scraped" if exporter else "off")
            runs.append(run(exporter))
    spark.stop()

    def summary(exporter: bool) -> dict:
        mine = [r for r in runs if r["exporter"] is exporter]
        out = {"runs_s": [r["seconds"] for r in mine], "median_s": statistics.median(r["seconds"] for r in mine),
               "median_batch_ms": statistics.median(r["median_batch_ms"] for r in mine),
               "batch_ms_medians": [r["median_batch_ms"] for r in mine], "batches": mine[0]["batches"],
               "events": [r["events"] for r in mine]}
        if exporter:
            out.update(scrapes=[r["scrapes"] for r in mine], median_scrape_s=[r["median_scrape_s"] for r in mine])
        return out

    on, off = summary(True), summary(False)
    return {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "host": platform.node(),
            "records": records, "files": data.files, "files_per_batch": files_per_batch, "repeat": repeat,
            "scrape_interval_s": interval, "scraped": on, "not_scraped": off,
            "ratio_median_s": round(on["median_s"] / off["median_s"], 3),
            "ratio_median_batch_ms": round(on["median_batch_ms"] / off["median_batch_ms"], 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.exporter_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=12_000)
    parser.add_argument("--records-per-file", type=int, default=500)
    parser.add_argument("--files-per-batch", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--scrape-interval", type=float, default=1.0)
    parser.add_argument("--out", default=str(PROJECT_ROOT / ".spark" / "bench" / "exporter-cost.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    load_before = os.getloadavg()
    report = measure(args.records, args.records_per_file, args.files_per_batch, args.repeat, args.scrape_interval,
                     PROJECT_ROOT / ".spark" / "bench" / "exporter-cost")
    report["load_average_at_start_and_end"] = [round(load_before[0], 1), round(os.getloadavg()[0], 1)]
    text = json.dumps(report, indent=1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
