"""``make demo-s3``: the whole path against a local S3-compatible server (moto, tools/s3_server.py).

Generated CloudTrail objects land in a bucket under the CloudTrail layout
(``s3://cloudtrail-logs/AWSLogs/ACCOUNT/CloudTrail/REGION/YYYY/MM/DD/``), the catch-up DAG runs through
Airflow (``airflow dags test cloudtrail_etl_catchup``, as ``make demo`` does) with its input and its lake
in buckets (``$CLOUDTRAIL_ETL_INPUT`` and ``$LAKE_ROOT`` are ``s3a://`` URLs), and a query reads the
table from its bucket. Everything reaches the server through the standard AWS variables only
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``). The server
lives only as long as the demo (its data is in memory).

Usage::

    python -m tools.demo_s3          # after make setup, in the Makefile's environment
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT
from tools.s3_server import LocalS3
from tools.sample_data import write_sample_landing

INPUT_BUCKET, LAKE_BUCKET = "cloudtrail-logs", "lake"
QUERIES = (
    ("cloudtrail_events: rows per date (DuckDB on delta-rs, from the lake's bucket)",
     "SELECT date, count(*) AS events, count(DISTINCT eventID) AS distinct_ids FROM cloudtrail_events "
     "GROUP BY date ORDER BY date"),
    ("example query: errors per eventSource",
     "SELECT eventSource, errorCode, count(*) AS n FROM cloudtrail_events WHERE errorCode IS NOT NULL "
     "GROUP BY 1, 2 ORDER BY n DESC LIMIT 5"),
)


def main() -> int:
    home = Path(os.environ.get("AIRFLOW_HOME") or PROJECT_ROOT / ".airflow")
    scratch = PROJECT_ROOT / ".spark" / "demo-s3"
    scratch.mkdir(parents=True, exist_ok=True)
    with LocalS3(log_path=scratch / "s3-server.log") as server:
        print(f"== S3 server (moto) on {server.endpoint}; buckets {INPUT_BUCKET}, {LAKE_BUCKET} ==")
        landing = scratch / f"landing-{os.getpid()}"
        write_sample_landing(landing)
        server.create_bucket(INPUT_BUCKET)
        server.create_bucket(LAKE_BUCKET)
        count = server.upload(landing, INPUT_BUCKET)
        print(f"uploaded {count} CloudTrail objects to s3://{INPUT_BUCKET}/AWSLogs/...")
        env = {**os.environ, **server.environment(), "CLOUDTRAIL_ETL_INPUT": f"s3a://{INPUT_BUCKET}/AWSLogs",
               "LAKE_ROOT": f"s3a://{LAKE_BUCKET}/lake"}
        print("== running DAG cloudtrail_etl_catchup through Airflow (airflow dags test), lake in "
              f"s3a://{LAKE_BUCKET}/lake ==")
        log = home / "demo-s3-dag-run.log"
        with log.open("w") as out:
            done = subprocess.run(["airflow", "dags", "test", "cloudtrail_etl_catchup"], env=env, stdout=out,
                                  stderr=subprocess.STDOUT, cwd=PROJECT_ROOT)
        if done.returncode != 0:
            print("".join(log.read_text().splitlines(keepends=True)[-40:]), file=sys.stderr)
            return 1
        for title, query in QUERIES:
            print(f"== {title} ==")
            shown = subprocess.run([sys.executable, "-m", "spark_jobs", "sql", "--engine", "duckdb", query], env=env,
                                   cwd=PROJECT_ROOT, capture_output=True, text=True)
            print(shown.stdout.rstrip() or shown.stderr[-2000:])
            if shown.returncode != 0:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
