"""Throughput per core: the catch-up run in local mode and on a Spark standalone cluster (not part of the tests).

Usage::

    python -m tools.bench.cluster_cores [--records 20000] [--files 100] [--cores 1,2]

For each core count it spark-submits ``run cloudtrail_etl --trigger available-now`` on the same
generated landing folder into a fresh lake, once with ``--master local[N]`` and once on a standalone
master with one worker of N cores (:class:`tools.standalone.StandaloneCluster`, started from the
pip Spark on 127.0.0.1 and stopped after), and reports the run's own time (its summary's
``seconds``: the session, the query and its micro-batches, not the JVM start) as events per second
and per core. JSON on stdout and in ``.spark/bench/cluster-cores.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from tools.bench.launches import _summary, timed
from spark_jobs.launch.submit import SparkConnection, Submission
from spark_jobs.model.lake import PROJECT_ROOT
from tools.sample_data import write_sample_landing
from tools.standalone import StandaloneCluster

JOB = "cloudtrail_etl"
REPORT = PROJECT_ROOT / ".spark" / "bench" / "cluster-cores.json"


def _run(master: str, landing: Path, lake: Path) -> dict:
    command = Submission.of(["run", JOB, "--trigger", "available-now", "--input", str(landing), "--lake", str(lake)],
                            name=JOB).argv(SparkConnection(master, deploy_mode="client"))
    wall, out = timed(command, timeout=3600)
    summary = _summary(out)
    events = summary["rows"].get("cloudtrail_events", 0)
    return {"master": master, "wall_s": wall, "run_s": summary["seconds"], "batches": summary["batches"],
            "events": events, "events_per_s": round(events / summary["seconds"], 1)}


def measure(records: int, files: int, cores: list[int], scratch: Path) -> dict:
    landing = scratch / "landing"
    manifest = write_sample_landing(landing, files=files, records_per_file=max(1, records // files), seed=11,
                                    include_bad_files=False)
    results = []
    for n in cores:
        local = _run(f"local[{n}]", landing, scratch / f"lake-local-{n}")
        with StandaloneCluster(scratch / f"cluster-{n}", worker_cores=n, worker_memory="2g") as cluster:
            standalone = _run(cluster.master_url, landing, scratch / f"lake-standalone-{n}")
        for result in (local, standalone):
            result.update(cores=n, events_per_s_per_core=round(result["events_per_s"] / n, 1))
            results.append(result)
    return {"what": "catch-up run (available-now) of cloudtrail_etl, spark-submit client mode: local[N] vs a "
                    "standalone worker of N cores on the same machine",
            "records": len(manifest.good_event_ids), "files": files, "results": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.cluster_cores", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--cores", default="1,2", help="comma-separated core counts")
    args = parser.parse_args(argv)
    (PROJECT_ROOT / ".spark").mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="cluster-cores-", dir=PROJECT_ROOT / ".spark"))
    try:
        report = measure(args.records, args.files, [int(c) for c in args.cores.split(",")], scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
