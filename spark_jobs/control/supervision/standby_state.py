"""A warm standby's word that it is warm and waiting: ``<lake>/control/<job>/standby.json``.

The standby (:mod:`spark_jobs.driver.standby`) writes it once it has warmed up and starts waiting for the lease, and
removes it when it takes the lease or stops; the supervisor reads it to tell a warm standby (which takes a freed
lease within its poll) from one still starting. It holds the standby's pid, host, code version, since when and how long
its warm-up took. Written atomically (temp file + rename; on an object store, one put); no pyspark.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket

import fsspec

from spark_jobs.control.supervision.state import utc_iso

STANDBY_FILE = "standby.json"


def _where(control: str):
    fs, path = fsspec.core.url_to_fs(str(control))
    return fs, path.rstrip("/"), f"{path.rstrip('/')}/{STANDBY_FILE}"


def announce_standby(control: str, warm_seconds: float, version: str | None = None) -> dict:
    """Say that this process is a warm standby of code ``version`` waiting for the lease; returns what was written."""
    said = {"pid": os.getpid(), "host": socket.gethostname(), "warm_seconds": round(warm_seconds, 2),
            "since": utc_iso(dt.datetime.now(dt.timezone.utc)), "version": version}
    fs, base, path = _where(control)
    fs.makedirs(base, exist_ok=True)
    temp = f"{base}/.{STANDBY_FILE}.{os.getpid()}.tmp"
    fs.pipe_file(temp, json.dumps(said).encode("utf-8"))
    fs.mv(temp, path)
    return said


def withdraw_standby(control: str) -> None:
    """Remove ``standby.json`` when it is this process's."""
    said = read_standby(control)
    if said and said.get("pid") == os.getpid() and said.get("host") == socket.gethostname():
        fs, _, path = _where(control)
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass


def read_standby(control: str) -> dict | None:
    """The job's waiting standby (its ``standby.json``), or ``None``."""
    fs, _, path = _where(control)
    try:
        return json.loads(fs.cat_file(path).decode("utf-8"))
    except (FileNotFoundError, ValueError):
        return None
