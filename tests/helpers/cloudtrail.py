"""The cloudtrail_etl job as the tests see it: its registry entry, and its input files read by Python's own json."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
from pathlib import Path

from spark_jobs.registry import get_job

JOB = get_job("cloudtrail_etl")


def source_records(path: Path) -> list:
    """The records of a healthy CloudTrail file, parsed by Python's json (the test's own reader)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    text = data.decode("utf-8")
    if path.name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    document = json.loads(text)
    return document["Records"] if isinstance(document, dict) else document


def file_name(uri: str) -> str:
    """The file name of a ``file:/...`` URI as Spark reports it."""
    return uri.rsplit("/", 1)[-1]


def dated_delivery(folder: Path, delivered: dt.datetime, records: list[dict], token: str) -> Path:
    """A CloudTrail delivery of ``records`` named with its delivery time, as S3 writes it."""
    day = folder / f"{delivered:%Y/%m/%d}"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"111122223333_CloudTrail_eu-west-1_{delivered:%Y%m%dT%H%MZ}_{token}.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"Records": records}).encode()))
    return path


def overlapping_landings(landing: Path, files: int, records_per_file: int):
    """Two writers' inputs that overlap: ``landing/own`` (with bad files) and ``landing/extra`` (its own good files and
    three of own's good files again under new names, as a redelivery).

    :returns: the two sample manifests (own, extra).
    """
    from tools.sample_data import write_sample_landing

    own = write_sample_landing(landing / "own", files=files, records_per_file=records_per_file, seed=41)
    extra = write_sample_landing(landing / "extra", files=files // 2, records_per_file=records_per_file, seed=42,
                                 include_bad_files=False)
    bad = {b.path.name for b in own.bad}
    for i, path in enumerate(p for p in own.files_written if p.name not in bad):
        if i < 3:  # a redelivery of some of the job's files under new names
            shutil.copyfile(path, landing / "extra" / f"copy-{path.name}")
    return own, extra
