"""What Spark's own file source costs on a landing with history: the contrast of ``bench --only history_scale``.

Usage (the benchmark runs it as a process of its own; the figures come back as one JSON line)::

    python -m tools.bench.file_source_listing LANDING WORK

Spark's file source (``binaryFile`` with the job's ``recursiveFileLookup`` and ``pathGlobFilter``, the way
``cloudtrail_etl`` read its landing before discovery), its ``path`` column into the ``noop`` sink with a
checkpoint in ``WORK``:

1. an available-now query ingests the whole landing (one micro-batch: no ``maxFilesPerTrigger``, so the source
   log is one file holding every path, the size a compact file of the same history has);
2. one new file lands, and a new query on the same checkpoint (a restart, ``processing-time:1s``) ingests it: the
   time from its start (which reads the source log back) to its first batch, and the next trigger, which finds
   nothing and whose ``latestOffset`` is still the listing of every folder under the landing (Spark's own
   ``durationMs``), are reported with the source log's and the checkpoint's bytes.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger("tools.bench")
SCHEMA = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"  # binaryFile's own


def _bytes_under(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure_file_source(landing: Path, work: Path, timeout: float = 1800) -> dict:
    """Run this module on ``landing`` in its own process (its own SparkSession); its figures."""
    from spark_jobs.model.lake import PROJECT_ROOT

    work.mkdir(parents=True, exist_ok=True)
    log_path = work / "file-source.log"
    log.info("file source on %s", landing)
    with log_path.open("w") as err:
        done = subprocess.run([sys.executable, "-m", "tools.bench.file_source_listing", str(landing), str(work)],
                              cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"the file-source run on {landing} failed (exit {done.returncode}); see {log_path}")
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def _query(spark, landing: Path, checkpoint: Path, **trigger):
    from tools.bench.history_state import JOB

    options = {k: v for k, v in JOB.file_source_options.items() if k in ("recursiveFileLookup", "pathGlobFilter")}
    return (spark.readStream.format("binaryFile").schema(SCHEMA).options(**options).load(str(landing)).select("path")
            .writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())


def _progress(query, test, timeout: float) -> tuple[float, dict]:
    """The first progress event of ``query`` that passes ``test``, and when it came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for progress in query.recentProgress:
            value = json.loads(progress.json)
            if test(value):
                return time.monotonic(), value
        if query.exception() is not None:
            raise RuntimeError(f"the file-source query failed: {query.exception()}")
        time.sleep(0.05)
    raise RuntimeError(f"no such progress within {timeout:g} s")


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.driver.session import build_session
    from tools.bench.history_landing import BODY, History, land_local

    landing, work = (Path(a) for a in (argv or sys.argv[1:])[:2])
    checkpoint = work / "checkpoint"
    new = landing / History.new_key()
    new.unlink(missing_ok=True)
    spark = build_session("file_source_listing")
    try:
        started = time.monotonic()
        query = _query(spark, landing, checkpoint, availableNow=True)
        query.awaitTermination()
        ingest_s, ingested = time.monotonic() - started, sum(p.numInputRows for p in query.recentProgress)
        land_local(landing, History.new_key(), BODY)
        try:
            started = time.monotonic()
            query = _query(spark, landing, checkpoint, processingTime="1 second")
            try:
                committed, batch = _progress(query, lambda p: p["numInputRows"] > 0, 1800)
                _, idle = _progress(query, lambda p: p["batchId"] == batch["batchId"] + 1 or (
                    p["numInputRows"] == 0 and p["timestamp"] > batch["timestamp"]), 120)
            finally:
                query.stop()
        finally:
            new.unlink(missing_ok=True)
    finally:
        spark.stop()
    if batch["numInputRows"] != 1:
        raise AssertionError(f"the restart was meant to read the one new file, it read {batch['numInputRows']}")
    sources = checkpoint / "sources" / "0"
    print(json.dumps({
        "files": ingested,
        "ingest_s": round(ingest_s, 1),
        "restart_to_first_batch_s": round(committed - started, 2),
        "first_batch_ms": batch["durationMs"],
        "idle_trigger_ms": idle["durationMs"],
        "listing_s": round(idle["durationMs"].get("latestOffset", 0) / 1000, 2),
        "source_log_bytes": _bytes_under(sources),
        "source_log_files": sorted(p.name for p in sources.iterdir() if not p.name.startswith(".")),
        "checkpoint_bytes": _bytes_under(checkpoint),
        "what": "Spark's binaryFile source (recursiveFileLookup, the job's pathGlobFilter) into the noop sink, a "
                "restart on processing-time:1s with one new file; listing_s is an idle trigger's latestOffset after "
                "it (the listing of every folder under the landing, which every trigger makes); "
                "restart_to_first_batch_s is from the new query's start (in a running session: no JVM start) to its "
                "first batch's progress",
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
