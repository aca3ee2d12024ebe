"""What OpenLineage costs a warm micro-batch: the same catch-up with lineage off, with the drivers' own emitter (the
default), and with the emitter and the openlineage-spark listener.

Usage::

    python -m tools.bench.lineage_cost [--records 4000] [--records-per-file 500] [--files-per-batch 2]
                                       [--repeat 2] [--out .spark/bench/lineage-cost.json]

Input: CloudTrail files built from the real samples (:mod:`tools.bench.data`). In one SparkSession started with
the pinned listener jar on its classpath, after one warm-up run of each mode, available-now runs of
``cloudtrail_etl`` rotate through the modes, each on a fresh lake, with a small ``maxFilesPerTrigger`` so that a
per-batch cost would show (:func:`tools.bench.progress_cost.timed_catch_up`: Spark's ``batchDuration`` of each
micro-batch, from a listener). The emitter is switched off with ``SPARK_JOBS_LINEAGE=off``; the listener
(``io.openlineage.spark.agent.OpenLineageSparkListener``, its file transport into the run's lake) is added to the
session's listener bus for its runs and removed after. Reported per mode: the runs' wall times, the median batch
duration, the events written; and the ratios of the median batch duration with against without. Prints one JSON
object and writes it to ``--out``. Not part of the tests.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT
from tools.bench import side_by_side

log = logging.getLogger("tools.bench")
MODES = ("off", "emitter", "emitter_and_listener")


def _count_lines(folder: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in folder.rglob("*.json*")) if folder.is_dir() else 0


def one_run(spark, mode: str, landing: Path, lake: Path, files_per_batch: int) -> dict:
    from spark_jobs.launch.lineage_listener import LISTENER_CLASS, listener_conf
    from tools.bench.progress_cost import timed_catch_up

    previous = os.environ.get("SPARK_JOBS_LINEAGE")
    os.environ["SPARK_JOBS_LINEAGE"] = "off" if mode == "off" else "on"
    listener = None
    context = spark.sparkContext._jsc.sc()
    if mode == "emitter_and_listener":
        conf = context.conf().clone()
        for key, value in listener_conf(str(lake)).items():
            conf.set(key, value)
        listener = getattr(spark.sparkContext._jvm, LISTENER_CLASS)(conf)
        context.addSparkListener(listener)
    try:
        run = timed_catch_up(spark, landing, lake, files_per_batch, history=True)
    finally:
        if listener is not None:
            context.removeSparkListener(listener)
        if previous is None:
            os.environ.pop("SPARK_JOBS_LINEAGE", None)
        else:
            os.environ["SPARK_JOBS_LINEAGE"] = previous
    return {**run, "mode": mode, "emitter_events": _count_lines(lake / "_lineage" / "spark"),
            "listener_events": _count_lines(lake / "_lineage" / "listener")}


def measure(records: int, records_per_file: int, files_per_batch: int, repeat: int, workdir: Path) -> dict:
    from spark_jobs.driver.session import build_session
    from spark_jobs.launch.jars import spark_jars
    from spark_jobs.launch.lineage_listener import listener_jar
    from tools.bench.data import write_landing

    data = write_landing(workdir / "data", records, records_per_file)
    spark = build_session("lineage_cost", extra_conf={"spark.jars": f"{spark_jars()},{listener_jar()}"})
    runs = side_by_side.alternate(
        lambda mode: one_run(spark, mode, data.landing, workdir / "lake", files_per_batch), repeat, "lineage", MODES)
    spark.stop()
    modes = {mode: side_by_side.summary(runs, mode, ("emitter_events", "listener_events")) for mode in MODES}
    return {**side_by_side.report_header(), "records": records, "files": data.files,
            "files_per_batch": files_per_batch, "repeat": repeat, "modes": modes,
            "ratio_emitter_batch_ms": side_by_side.ratios(modes["emitter"], modes["off"])["ratio_median_batch_ms"],
            "ratio_emitter_and_listener_batch_ms": side_by_side.ratios(
                modes["emitter_and_listener"], modes["off"])["ratio_median_batch_ms"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.lineage_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=4_000)
    parser.add_argument("--records-per-file", type=int, default=500)
    parser.add_argument("--files-per-batch", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default=str(PROJECT_ROOT / ".spark" / "bench" / "lineage-cost.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    load_before = os.getloadavg()
    report = measure(args.records, args.records_per_file, args.files_per_batch, args.repeat,
                     PROJECT_ROOT / ".spark" / "bench" / "lineage-cost")
    side_by_side.write(report, Path(args.out), load_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
