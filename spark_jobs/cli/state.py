"""``python -m spark_jobs state JOB [--show N] [--json]``: a stateful job's state, read with Spark's
``state-metadata`` and ``statestore`` data sources (:mod:`spark_jobs.driver.stream_state`)."""

from __future__ import annotations

import argparse
import json

from spark_jobs.driver.stream_state import read_state
from spark_jobs.model.errors import UsageError

HELP = "a stateful job's state: operators, variables, rows"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``state`` command's options."""
    from spark_jobs.registry import JOBS

    parser.add_argument("job", help=f"a registered job: {', '.join(JOBS)}")
    parser.add_argument("--lake", help="lake root (default: $LAKE_ROOT or ./lake)")
    parser.add_argument("--show", type=int, default=0, metavar="N", help="also print N rows of each state variable")
    parser.add_argument("--json", action="store_true", help="one JSON object per state variable")


def run(args: argparse.Namespace) -> int:
    """``python -m spark_jobs state JOB``: print the job's state variables and their rows."""
    from spark_jobs.model.lake import Lake
    from spark_jobs.registry import get_job
    from spark_jobs.driver.session import build_session

    job = get_job(args.job)
    checkpoint = Lake.at(args.lake).checkpoint_path(job.name)
    if not (checkpoint / "offsets").is_dir():
        raise UsageError(f"job {job.name} has no checkpoint at {checkpoint}: run it first "
                         f"(python -m spark_jobs run {job.name}) or pass --lake")
    spark = build_session(f"{job.name}_state")
    try:
        variables = read_state(spark, str(checkpoint), args.show)
    finally:
        spark.stop()
    if not variables:
        print(f"{job.name}: no state (a stateless query)")
    for variable in variables:
        if args.json:
            print(json.dumps(variable.to_dict(), default=str, sort_keys=True))
            continue
        label = variable.variable or "(its store)"
        print(f"operator {variable.operator_id} {variable.operator}: {label} [{variable.kind}"
              f"{', TTL' if variable.ttl else ''}]: {variable.rows} rows")
        for row in variable.sample:
            print(f"    {json.dumps(row, default=str, sort_keys=True)}")
    return 0
