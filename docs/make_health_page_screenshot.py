"""Make ``docs/health-page.png``: a real continuous run of ``cloudtrail_etl`` on the health page.

Usage (from the project root, after ``eval "$(make -s env)"``; about 5 minutes)::

    python docs/make_health_page_screenshot.py [--root /tmp/health-shot] [--batches 16]

It writes the generated samples to ``<root>/landing``, runs ``python -m spark_jobs run cloudtrail_etl
--trigger processing-time:5s --max-files-per-trigger 2`` with ``LAKE_ROOT=<root>/lake``, starts an
Airflow API server on loopback over the same lake (:class:`tools.local_airflow.LocalAirflow`),
waits for ``--batches`` rows in ``streaming_progress``, logs in with headless Chromium (Playwright,
Debian's ``/usr/bin/chromium``) as the browser test does, screenshots Browse → Streaming health,
prints ``python -m spark_jobs status``, then stops the driver (SIGTERM) and Airflow.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT / "plugins"), str(PROJECT)]

from spark_jobs.control.monitoring.history import read_progress  # noqa: E402
from tools.sample_data import write_sample_landing  # noqa: E402
from tools.local_airflow import LocalAirflow, free_port  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default="/tmp/health-shot")
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--out", default=str(PROJECT / "docs" / "health-page.png"))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    root = Path(args.root)
    shutil.rmtree(root, ignore_errors=True)
    landing, lake, home = root / "landing", root / "lake", root / "airflow_home"
    write_sample_landing(landing)
    env = {**os.environ, "LAKE_ROOT": str(lake), "CLOUDTRAIL_ETL_INPUT": str(landing)}
    with open(root / "driver.log", "wb") as log:
        driver = subprocess.Popen([sys.executable, "-m", "spark_jobs", "run", "cloudtrail_etl", "--trigger",
                                   "processing-time:5s", "--max-files-per-trigger", "2"], cwd=PROJECT, env=env,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    airflow = LocalAirflow(home, free_port(28700), {**env, "AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN":
                                                    f"sqlite:///{home / 'airflow.db'}"}, components=("api-server",))
    try:
        airflow.start()
        while len(read_progress(lake, "cloudtrail_etl", limit=None)) < args.batches:
            if driver.poll() is not None:
                raise SystemExit(f"the driver ended (exit {driver.returncode}); see {root / 'driver.log'}")
            time.sleep(5)
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(root / "chromium-profile"), executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                headless=True, args=CHROMIUM_ARGS, viewport={"width": 1320, "height": 1180})
            page = context.new_page()
            page.goto(airflow.url + "/")
            page.get_by_label("Username").fill("admin")
            page.get_by_label("Password").fill(airflow.password())
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("button", name="Browse").click()
            page.get_by_role("menuitem", name="Streaming health").click()
            page.frame_locator("iframe[title='Streaming health']").locator("table.jobs").wait_for(timeout=60_000)
            page.wait_for_timeout(1000)
            page.screenshot(path=args.out)
            context.close()
        print(subprocess.run([sys.executable, "-m", "spark_jobs", "status", "--lake", str(lake)], cwd=PROJECT, env=env,
                             capture_output=True, text=True).stdout)
        print(f"wrote {args.out}")
    finally:
        driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=300)
        airflow.stop(grace=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
