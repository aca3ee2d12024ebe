"""``python -m spark_jobs sql QUERY``: one SQL query over the lake's tables (Spark, or DuckDB on delta-rs)."""

from __future__ import annotations

import argparse

HELP = "run one SQL query over the lake's tables"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="SQL; every registry table is a view of its name")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="table (default) or json: one JSON object per row")
    parser.add_argument("--limit", type=int, default=1000, help="at most this many rows (default 1000)")
    parser.add_argument("--engine", choices=("spark", "duckdb"), default="spark",
                        help="spark (default; starts a JVM) or duckdb (delta-rs + DuckDB, no JVM, ~1 s)")
    parser.add_argument("--as-of", action="append", metavar="[TABLE=]VERSION|TIMESTAMP",
                        help="read every table (or TABLE) as of a version or a time (ISO-8601, UTC); repeatable")


def run(args: argparse.Namespace) -> int:
    from spark_jobs.driver.sql import run_query

    return run_query(args.query, lake=args.lake, engine=args.engine, output_format=args.format, limit=args.limit,
                     as_of=args.as_of)
