"""``python -m spark_jobs metrics [--lake PATH] [--serve PORT [--host ADDRESS]]``: every job's health as Prometheus
metrics, for a deployment without Airflow (with Airflow, the health plugin serves the same at
``/streaming-health/metrics``).

Without ``--serve``: one scrape in Prometheus' text format on stdout (the numbers of ``status --json``). With it: an
HTTP server (``prometheus_client``'s) on ``ADDRESS:PORT`` (127.0.0.1 unless told) whose every path answers with a
fresh scrape, computed when Prometheus asks; it also keeps ``<lake>/control/prometheus_targets.json``, the live
drivers' Spark UIs for Prometheus' ``file_sd``, current. Runs until stopped (SIGTERM, Ctrl-C). No Spark, no Airflow.
Exit status 0, 2 for a bad value.

Example::

    python -m spark_jobs metrics --serve 9464     # scrape http://127.0.0.1:9464/metrics
"""

from __future__ import annotations

import argparse
import sys

from spark_jobs.model.errors import UsageError

HELP = "every job's health as Prometheus metrics (stdout, or an HTTP server with --serve)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--serve", type=int, metavar="PORT", help="serve the metrics over HTTP on this port")
    parser.add_argument("--host", default="127.0.0.1", help="the address to serve on (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from spark_jobs.control.monitoring.metrics import exposition, registry
    from spark_jobs.model.lake import resolve_lake_root

    lake = str(resolve_lake_root(args.lake))
    if args.serve is None:
        sys.stdout.write(exposition(lake).decode())
        return 0
    if not 0 < args.serve < 65536:
        raise UsageError(f"--serve {args.serve}: a port is 1-65535 (0 is not accepted: Prometheus needs a known one)")
    import threading

    from prometheus_client import start_http_server

    try:
        server, thread = start_http_server(args.serve, addr=args.host, registry=registry(lake))
    except OSError as exc:
        raise UsageError(f"cannot serve on {args.host}:{args.serve}: {exc}; choose another --serve PORT") from exc
    print(f"serving the streaming metrics of {lake} at http://{args.host}:{args.serve}/metrics", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0
