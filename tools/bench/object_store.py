"""The cost of an object store: the same data from the local S3-compatible server against local disk.

Side by side in one run, alternating, each a fresh ``python -m spark_jobs`` process (the driver the
contract checks use: only the standard AWS variables point it at the server):

- **throughput**: ``run cloudtrail_etl --trigger available-now`` over the benchmark's landing folder,
  (a) read from disk into a lake on disk, (b) read from a bucket into a lake in another bucket; the
  figure is the run's own seconds (``RunSummary.seconds``: from the query's start, without the JVM's),
  records per second and the ratio S3 / disk;
- **freshness**: a driver on ``processing-time:1s`` (warmed up first), then files landed one at a time
  (copied into the folder, or uploaded to the bucket); the time from a file's landing until the batch
  that read it is committed (its ``commits/N`` in the checkpoint), p50 and p95, and the ratio.

The server is moto (tools/s3_server.py): S3's protocol over HTTP on loopback, data in memory, one
Python process. It measures what S3A, the AWS SDK, Delta's conditional-put log store and the listings
cost against a local disk; it says nothing of a real bucket's network latency.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fsspec

from tools.bench.probes import median
from tools.s3_server import REGION, LocalS3
from spark_jobs.model.lake import PROJECT_ROOT

log = logging.getLogger("tools.bench")
JOB = "cloudtrail_etl"


def _run(landing: str, lake: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-m", "spark_jobs", "run", JOB, "--input", landing, "--lake", lake,
                           "--trigger", "available-now"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"run over {landing} failed (exit {done.returncode}):\n" + done.stderr[-3000:])
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _commits(fs, checkpoint: str) -> int:
    fs.invalidate_cache()
    try:
        return sum(1 for name in fs.ls(f"{checkpoint}/commits", detail=False) if name.rsplit("/", 1)[-1].isdigit())
    except FileNotFoundError:
        return 0


def _freshness(files: list[Path], land, input_url: str, lake: str, fs, env: dict, log_path: Path,
               warmup: int = 3, timeout: float = 120) -> list[float]:
    """Seconds from each landing to the commit of the batch that read it (after ``warmup`` files); ``fs``
    is the lake's filesystem, for polling the checkpoint."""
    checkpoint = f"{lake}/checkpoints/{JOB}"
    process = subprocess.Popen([sys.executable, "-m", "spark_jobs", "run", JOB, "--input", input_url, "--lake", lake,
                                "--trigger", "processing-time:1s"], cwd=PROJECT_ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=log_path.open("w"), start_new_session=True)
    seconds = []
    try:
        for index, file in enumerate(files):
            before = _commits(fs, checkpoint)
            land(file)
            started = time.monotonic()
            limit = timeout if index else 10 * timeout  # the first one waits for the driver's start too
            while _commits(fs, checkpoint) <= before:
                if process.poll() is not None or time.monotonic() - started > limit:
                    raise RuntimeError(f"no batch committed {file.name} within {timeout:g} s (see {log_path})")
                time.sleep(0.05)
            if index >= warmup:
                seconds.append(round(time.monotonic() - started, 3))
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(process.pid, signal.SIGKILL)
    return seconds


def measure_object_store(landing: Path, records: int, run_dir: Path, repeat: int, freshness_files: int = 10,
                         freshness_gap_s: float = 1.0) -> dict:
    """Throughput and freshness of ``landing`` from the local S3 server against local disk (see the module)."""
    from tools.sample_data import write_sample_landing

    root = run_dir / "object-store"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    with LocalS3(log_path=root / "s3-server.log") as server:
        env = {**os.environ, **server.environment()}
        env.pop("LAKE_ROOT", None)
        server.create_bucket("bench-input")
        started = time.monotonic()
        uploaded = server.upload(landing, "bench-input")
        upload_s = round(time.monotonic() - started, 1)
        runs: dict[str, list[dict]] = {"disk": [], "s3": []}
        for attempt in range(repeat):
            bucket = server.create_bucket(f"bench-lake-{attempt}")
            for where, (source, lake) in (("disk", (str(landing), str(root / f"lake-{attempt}"))),
                                          ("s3", ("s3a://bench-input", f"{bucket}/lake"))):
                summary = _run(source, lake, env)
                runs[where].append({"seconds": summary["seconds"], "rows": summary["rows"]["cloudtrail_events"],
                                    "records_per_s": round(records / summary["seconds"])})
                log.info("object store: %s run %d: %.1f s", where, attempt + 1, summary["seconds"])
        disk_s = median([r["seconds"] for r in runs["disk"]])
        s3_s = median([r["seconds"] for r in runs["s3"]])
        if {r["rows"] for r in runs["disk"] + runs["s3"]} != {runs["disk"][0]["rows"]}:
            raise AssertionError(f"the runs wrote different row counts: {runs}")

        scratch = Path(tempfile.mkdtemp(prefix="fresh-", dir=root))
        sample = write_sample_landing(scratch / "files", files=freshness_files + 3, records_per_file=50, seed=11,
                                      include_bad_files=False)
        files = sorted(sample.files_written, key=lambda p: p.name)
        local_landing = root / "fresh-landing"
        local_landing.mkdir()
        client = server.client()
        server.create_bucket("fresh-input")
        fresh_lake = server.create_bucket("fresh-lake")

        def to_disk(file: Path) -> None:
            time.sleep(freshness_gap_s)
            temp = local_landing / f".{file.name}.tmp"  # hidden while it is written, then renamed into place
            shutil.copyfile(file, temp)
            os.replace(temp, local_landing / file.name)

        def to_bucket(file: Path) -> None:
            time.sleep(freshness_gap_s)
            client.upload_file(str(file), "fresh-input", f"landing/{file.name}")

        client.put_object(Bucket="fresh-input", Key="landing/")  # the prefix exists before the first file
        bucket_fs = fsspec.filesystem("s3a", key=server.access_key, secret=server.secret_key,
                                      client_kwargs={"endpoint_url": server.endpoint, "region_name": REGION},
                                      use_listings_cache=False)
        try:
            fresh = {"disk": _freshness(files, to_disk, str(local_landing), str(root / "fresh-lake"),
                                        fsspec.filesystem("file"), env, root / "fresh-disk.log"),
                     "s3": _freshness(files, to_bucket, "s3a://fresh-input/landing", f"{fresh_lake}/lake", bucket_fs,
                                      env, root / "fresh-s3.log")}
        except Exception as error:  # noqa: BLE001 - the throughput figures stand on their own
            fresh = {"error": f"{type(error).__name__}: {error}"}
    throughput = {"disk": runs["disk"], "s3": runs["s3"], "disk_median_s": disk_s, "s3_median_s": s3_s,
                  "disk_records_per_s": round(records / disk_s), "s3_records_per_s": round(records / s3_s),
                  "ratio_s3_to_disk": round(disk_s / s3_s, 2)}
    if "error" in fresh:
        return {"input": {"records": records, "objects": uploaded, "upload_s": upload_s}, "throughput": throughput,
                "freshness": fresh, "goal": None}
    p50 = {where: _percentile(values, 0.5) for where, values in fresh.items()}
    p95 = {where: _percentile(values, 0.95) for where, values in fresh.items()}
    return {
        "server": "moto (tools/s3_server.py) on 127.0.0.1; input and lake each in a bucket",
        "input": {"records": records, "objects": uploaded, "upload_s": upload_s},
        "throughput": throughput,
        "freshness": {"files": len(files) - 3, "gap_s": freshness_gap_s, "disk_s": fresh["disk"], "s3_s": fresh["s3"],
                      "disk_p50_s": p50["disk"], "disk_p95_s": p95["disk"], "s3_p50_s": p50["s3"],
                      "s3_p95_s": p95["s3"], "ratio_p50_s3_to_disk": round(p50["s3"] / p50["disk"], 2)},
        "goal": None,
    }
