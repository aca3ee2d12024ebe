"""``python -m spark_jobs forward NAME``: the command line of :mod:`spark_jobs.driver.forward` (no pyspark at import)."""

from __future__ import annotations

import argparse
import json

from spark_jobs.model.errors import UsageError


HELP = "forward a table's new rows to a Kafka topic (spark_jobs.driver.forward)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.registry import FORWARDS

    parser.add_argument("name", help=f"a registered forward: {', '.join(FORWARDS)}")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--trigger", default="available-now",
                        help="available-now (default) | processing-time:<duration> (until SIGTERM)")
    parser.add_argument("--topic", help="the topic to write (default: the registry's)")


def run(args: argparse.Namespace) -> int:
    from spark_jobs.driver.forward import run_forward
    from spark_jobs.registry import FORWARDS
    from spark_jobs.driver.session import configure_logging

    if args.name not in FORWARDS:
        raise UsageError(f"unknown forward {args.name!r}; known forwards: {', '.join(sorted(FORWARDS))}")
    configure_logging()
    print(json.dumps(run_forward(FORWARDS[args.name], args.lake, args.trigger, topic=args.topic), sort_keys=True))
    return 0
