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
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT
from tools.bench import side_by_side
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

    def run(exporter: bool) -> dict:
        if not exporter:
            return {**timed_catch_up(spark, data.landing, lake, files_per_batch, True), "scrapes": 0,
                    "median_scrape_s": None}
        with scraped(lake, interval) as durations:
            result = timed_catch_up(spark, data.landing, lake, files_per_batch, True)
        return {**result, "scrapes": len(durations),
                "median_scrape_s": round(statistics.median(durations), 3) if durations else None}

    runs = side_by_side.alternate(run, repeat, "exporter scraped")
    spark.stop()
    on, off = (side_by_side.summary(runs, mode, ("events", "scrapes", "median_scrape_s")) for mode in (True, False))
    return {**side_by_side.report_header(), "records": records, "files": data.files,
            "files_per_batch": files_per_batch, "repeat": repeat, "scrape_interval_s": interval, "scraped": on,
            "not_scraped": off, **side_by_side.ratios(on, off)}


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
    side_by_side.write(report, Path(args.out), load_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
