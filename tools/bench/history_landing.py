"""Landings that hold years of CloudTrail deliveries, for ``bench --only history_scale`` (:mod:`tools.bench.history_scale`).

A history of ``count`` files is CloudTrail's layout with one delivery every 5 minutes (``count / 288`` days),
taken in turn by :data:`REGIONS` of one account (so each region's day folder gets one every 20 minutes)::

    AWSLogs/<account>/CloudTrail/<region>/YYYY/MM/DD/<account>_CloudTrail_<region>_YYYYMMDDTHHMMZ_<id>.json.gz

The newest delivery is :data:`END` at every size and older ones reach further back, so the window, the next
delivery (:meth:`History.new_key`) and the folders a trigger lists are the same at 10k and at 1M files; only the
history behind them grows. Every history file holds the same tiny gzip (``{"Records":[]}``): it is listed, never
read again (the benchmark builds it as already ingested, :mod:`tools.bench.history_state`).

- **local**: :func:`build_local` writes the files with threads (``os.open``/``os.write``: a few µs of Python per
  file, the rest in the kernel with the GIL released) into ``<folder>/landing``, renamed into place when complete
  and reused while its ``history.json`` says so (1M files take about a minute and 4 GB of 4-KB blocks);
- **bucket**: :func:`put_objects` PUTs them to the local S3 server (moto) from threads, as an uploader would;
  :class:`PreloadedS3` is the fast way for large counts: a moto server process that fills its own store
  before it answers (moto's ``put_object`` in-process, the same objects and listings as PUTs leave: moto answers
  about 250 PUTs/s on this machine, its store takes about 25,000/s), and answers LIST requests from a sorted
  index of the keys, as S3 does (:mod:`tools.bench.s3_listing_index`).
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from tools.s3_server import LocalS3

UTC = dt.timezone.utc
ACCOUNT = "111122223333"
REGIONS = ("us-east-1", "us-west-2", "eu-west-1", "ap-southeast-1")
EVERY = dt.timedelta(minutes=5)
END = dt.datetime(2026, 11, 1, tzinfo=UTC)
# Every history file's bytes (a valid, empty CloudTrail document; mtime 0 in the gzip header: the same bytes always).
BODY = gzip.compress(b'{"Records":[]}', mtime=0)
_META = "history.json"


@dataclass(frozen=True)
class History:
    """``count`` deliveries ending at :data:`END`.

    :param count: files in the history.
    """

    count: int

    @staticmethod
    def at(age: int) -> tuple[dt.datetime, str]:
        """The delivery time and region of the delivery ``age`` steps before :data:`END` (``-1``: the next one)."""
        return END - age * EVERY, REGIONS[age % len(REGIONS)]

    @staticmethod
    def key_at(age: int) -> str:
        """The key (relative to the landing) of the delivery ``age`` steps before :data:`END`."""
        moment, region = History.at(age)
        token = hashlib.blake2b(str(age).encode(), digest_size=8).hexdigest()
        return (f"AWSLogs/{ACCOUNT}/CloudTrail/{region}/{moment:%Y/%m/%d}/"
                f"{ACCOUNT}_CloudTrail_{region}_{moment:%Y%m%dT%H%MZ}_{token}.json.gz")

    def keys(self) -> Iterator[str]:
        """Every history key, oldest delivery first."""
        return (self.key_at(age) for age in range(self.count - 1, -1, -1))

    @staticmethod
    def new_key() -> str:
        """The delivery right after the history (5 minutes after :data:`END`): the one new file a trigger finds."""
        return History.key_at(-1)

    @property
    def days(self) -> float:
        return round(self.count * EVERY / dt.timedelta(days=1), 1)


@lru_cache(maxsize=4)
def new_file_body(events: int = 50, seed: int = 7) -> bytes:
    """The new delivery's bytes: ``events`` real-shaped CloudTrail records (fresh ids) in its 5 minutes."""
    import random

    from tools.bench.data import RecordSource
    from tools.sample_data import _gzip, _records_document

    moment, _ = History.at(-1)
    records = RecordSource().records(random.Random(seed), events, moment - EVERY)
    return _gzip(_records_document(records).encode())


def _write_folder(root: str, folder: str, names: list[str]) -> int:
    path = os.path.join(root, folder)
    os.makedirs(path, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for name in names:
        handle = os.open(os.path.join(path, name), flags, 0o644)
        try:
            os.write(handle, BODY)
        finally:
            os.close(handle)
    return len(names)


def _by_folder(history: History) -> Iterator[tuple[str, list[str]]]:
    """The history's names grouped by their folder (a region's day), oldest folder first."""
    folders: dict[str, list[str]] = {}
    for key in history.keys():
        folder, name = key.rsplit("/", 1)
        folders.setdefault(folder, []).append(name)
    return iter(folders.items())


def build_local(folder: Path, count: int, threads: int = 8) -> dict:
    """``folder/landing`` holding the history of ``count`` files: reused when complete, else written.

    :returns: ``{"landing", "files", "folders", "seconds", "reused", "bytes_on_disk"}``.
    """
    meta_path = folder / _META
    landing = folder / "landing"
    if meta_path.is_file() and landing.is_dir():
        meta = json.loads(meta_path.read_text())
        if meta.get("files") == count and meta.get("end") == END.isoformat() and meta.get("body") == len(BODY):
            return {**meta, "landing": str(landing), "reused": True}
    started = time.monotonic()
    partial = folder / "landing.partial"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(landing, ignore_errors=True)
    meta_path.unlink(missing_ok=True)
    partial.mkdir(parents=True)
    groups = list(_by_folder(History(count)))
    with ThreadPoolExecutor(threads) as pool:
        written = sum(pool.map(lambda group: _write_folder(str(partial), *group), groups))
    if written != count:
        raise AssertionError(f"wrote {written} history files, expected {count}")
    os.rename(partial, landing)
    meta = {"files": count, "folders": len(groups), "days": History(count).days, "end": END.isoformat(),
            "body": len(BODY), "seconds": round(time.monotonic() - started, 1),
            "bytes_on_disk": count * os.stat(landing / next(History(count).keys())).st_blocks * 512}
    meta_path.write_text(json.dumps(meta))
    return {**meta, "landing": str(landing), "reused": False}


def land_local(landing: Path, key: str, body: bytes) -> Path:
    """Deliver ``key`` into ``landing`` as an uploader does: a hidden temp name, then renamed into place."""
    path = landing / key
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(body)
    os.replace(temp, path)
    return path


def put_objects(client, bucket: str, keys: list[str], threads: int = 16) -> dict:
    """PUT ``keys`` (each :data:`BODY`) into ``bucket`` from ``threads`` threads; how long it took."""
    started = time.monotonic()

    def put(chunk: list[str]) -> int:
        for key in chunk:
            client.put_object(Bucket=bucket, Key=key, Body=BODY)
        return len(chunk)

    chunks = [keys[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        done = sum(pool.map(put, chunks))
    seconds = time.monotonic() - started
    return {"objects": done, "seconds": round(seconds, 1), "puts_per_s": round(done / seconds) if seconds else None,
            "how": f"PutObject from {threads} threads"}


class PreloadedS3(LocalS3):
    """The local S3 server (:class:`~tools.s3_server.LocalS3`) with ``bucket`` holding the history of ``count``
    objects under ``prefix`` before it answers: ``python -m tools.bench.history_landing serve`` fills moto's store in
    its own process, then serves it with moto's threaded server.

    :param bucket: the bucket.
    :param count: objects in its history.
    :param log_path: the server's output (its first line says how long the fill took).
    :param prefix: the folder the history's keys are under (``""``: the bucket's root).
    """

    def __init__(self, bucket: str, count: int, log_path: Path, prefix: str = "") -> None:
        super().__init__(log_path=log_path)
        self.bucket, self.count, self.prefix = bucket, count, prefix

    def command(self) -> list[str]:
        return [sys.executable, "-m", "tools.bench.history_landing", "serve", "--port", str(self.port),
                "--bucket", self.bucket, "--count", str(self.count), "--prefix", self.prefix]

    def fill(self) -> dict:
        """How the bucket was filled (read from the server's first line)."""
        for line in self.log_path.read_text().splitlines():
            if line.startswith('{"preloaded"'):
                value = json.loads(line)
                return {"objects": value["preloaded"], "seconds": value["seconds"],
                        "how": "moto's put_object in the server's own process, before it answers"}
        raise RuntimeError(f"the preloaded S3 server did not say how it filled {self.bucket} (see {self.log_path})")


def _serve(port: int, bucket: str, count: int, prefix: str = "") -> int:
    """Fill moto's in-process store with the history, then answer S3 on loopback until SIGTERM (moto's own server)."""
    import signal
    import threading

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    from tools.s3_server import REGION

    from tools.bench.s3_listing_index import index_listings

    index_listings()  # a LIST costs what it answers, as on S3 (not every key of the bucket, as in moto)
    started = time.monotonic()
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_bucket(bucket, REGION)
    for key in History(count).keys():
        backend.put_object(bucket, f"{prefix.strip('/')}/{key}" if prefix.strip("/") else key, BODY)
    print(json.dumps({"preloaded": count, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tools.bench.history_landing", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    local = sub.add_parser("local", help="write (or reuse) a local history landing")
    local.add_argument("folder", type=Path)
    local.add_argument("--count", type=int, required=True)
    serve = sub.add_parser("serve", help="a moto S3 server preloaded with a history")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--bucket", required=True)
    serve.add_argument("--count", type=int, required=True)
    serve.add_argument("--prefix", default="")
    args = parser.parse_args(argv)
    if args.command == "local":
        print(json.dumps(build_local(args.folder, args.count)))
        return 0
    return _serve(args.port, args.bucket, args.count, args.prefix)


if __name__ == "__main__":
    sys.exit(main())
