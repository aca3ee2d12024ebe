"""Benchmark input: CloudTrail log files made of real records with fresh ids and times.

Records are sampled (with a seeded RNG) from the real CloudTrail files in ``../shared/data/real/cloudtrail``
(only full records, i.e. those with a ``userIdentity``; some sources cut records down to a few
fields), each given a fresh uuid ``eventID`` and a fresh ``eventTime``, and written as S3 delivers
them: gzipped ``{"Records":[...]}`` files in the ``AWSLogs/<account>/CloudTrail/<region>/YYYY/MM/DD/``
layout, spread over :data:`tools.sample_data.SPAN`. Without the real samples the records come
from :func:`tools.sample_data.generate_records`. The same arguments write the same bytes, and a
folder written before with the same arguments is reused.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

from tools import sample_data
from spark_jobs.model.lake import PROJECT_ROOT

REAL_CLOUDTRAIL = PROJECT_ROOT.parent / "shared" / "data" / "real" / "cloudtrail"
_META = "bench-data.json"


@dataclass(frozen=True)
class BenchData:
    """A landing folder written by :func:`write_landing`.

    :param landing: the folder the job reads.
    :param records: events in it.
    :param files: log files in it.
    :param bytes_compressed: bytes on disk (gzipped).
    :param bytes_uncompressed: bytes of JSON text.
    :param source: where the records come from (``real`` or ``generated``), with the pool size.
    :param seed: the seed.
    :param dates: the UTC dates of the events, sorted.
    :param seconds: how long writing took (``0`` when an earlier folder was reused).
    :param reused: whether an earlier folder was reused.
    """

    landing: Path
    records: int
    files: int
    bytes_compressed: int
    bytes_uncompressed: int
    source: str
    seed: int
    dates: tuple[str, ...]
    seconds: float = 0.0
    reused: bool = False

    def to_dict(self) -> dict:
        return {**asdict(self), "landing": str(self.landing), "dates": list(self.dates)}


class RecordSource:
    """Fresh CloudTrail records: real ones re-stamped, or generated ones.

    :param real_root: the folder of real CloudTrail files; ``None`` or missing: generate records.
    """

    def __init__(self, real_root: Path | None = REAL_CLOUDTRAIL):
        self.pool = load_real_records(real_root) if real_root and real_root.is_dir() else []
        self.name = f"real ({len(self.pool)} full records from {real_root})" if self.pool else \
            "generated (tools.sample_data.generate_records)"

    def records(self, rng: random.Random, count: int, window_start: datetime) -> list[dict]:
        """``count`` records, each with a fresh eventID and an eventTime in the 5 minutes from ``window_start``."""
        if not self.pool:
            return sample_data.generate_records(rng, count, window_start)
        times = sorted(rng.randrange(int(sample_data.FILE_WINDOW.total_seconds())) for _ in range(count))
        return [{**record, "eventID": sample_data._random_uuid(rng),
                 "eventTime": sample_data._event_time(window_start + timedelta(seconds=offset))}
                for record, offset in zip(rng.choices(self.pool, k=count), times)]


def load_real_records(root: Path) -> list[dict]:
    """Every full record (one with a ``userIdentity``) of the parseable CloudTrail files under ``root``."""
    records: list[dict] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and ".json" in p.name):
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        try:
            document = json.loads(data)
        except ValueError:
            continue  # the one invalid file among the samples
        items = document.get("Records") if isinstance(document, dict) else document
        records += [r for r in items or () if isinstance(r, dict) and "userIdentity" in r]
    return records


def write_file(folder: Path, rng: random.Random, source: RecordSource, count: int, stamp: datetime,
               target: tuple[str, str]) -> tuple[Path, list[dict], int]:
    """Write one delivery atomically (temp name, then rename) under ``folder``.

    :returns: its path, its records and the size of its JSON text in bytes.
    """
    writer = sample_data._LandingWriter(folder, rng, stamp)
    delivery = writer.delivery_at(0, target)
    records = source.records(rng, count, stamp)
    text = sample_data._records_document(records).encode()
    path = writer.write(writer.new_path(delivery, ".json.gz"), sample_data._gzip(text))
    return path, records, len(text)


def write_landing(out: Path, records: int, records_per_file: int = 1000, seed: int = 1,
                  source: RecordSource | None = None) -> BenchData:
    """Write (or reuse) a landing folder of ``records`` events in files of ``records_per_file``.

    :param out: the data folder; the landing folder is ``out/landing``.
    :param records: events in all; the last file holds the remainder.
    :param records_per_file: events per file.
    :param seed: the seed of every random choice.
    :param source: where records come from (default: :class:`RecordSource` over the real samples).
    """
    source = source or RecordSource()
    wanted = {"records": records, "records_per_file": records_per_file, "seed": seed, "source": source.name}
    meta_path = out / _META
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta["params"] == wanted:
            return BenchData(**{**meta["data"], "landing": out.resolve() / "landing",
                                "dates": tuple(meta["data"]["dates"]), "seconds": 0.0, "reused": True})
    started = time.monotonic()
    shutil.rmtree(out, ignore_errors=True)
    landing = out.resolve() / "landing"
    rng = random.Random(seed)
    files = -(-records // records_per_file)
    slots = sample_data.SPAN // sample_data.FILE_WINDOW
    width = max(1, slots // max(files, 1))
    base = sample_data.DEFAULT_START
    compressed = uncompressed = 0
    dates: set[str] = set()
    for index in range(files):
        count = min(records_per_file, records - index * records_per_file)
        stamp = base + ((index * slots) // files + rng.randrange(width)) * sample_data.FILE_WINDOW
        target = sample_data.DELIVERY_TARGETS[index % len(sample_data.DELIVERY_TARGETS)]
        path, written, size = write_file(landing, rng, source, count, stamp, target)
        compressed += path.stat().st_size
        uncompressed += size
        dates.update(r["eventTime"][:10] for r in written)
    data = BenchData(landing, records, files, compressed, uncompressed, source.name, seed, tuple(sorted(dates)),
                     round(time.monotonic() - started, 2))
    meta_path.write_text(json.dumps({"params": wanted, "data": {**data.to_dict(), "seconds": data.seconds}}))
    return data
