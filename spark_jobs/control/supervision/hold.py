"""Paused supervision: a hold the supervisor honours, ``<lake>/control/<job>/supervision_hold.json``.

While the hold exists the supervisor leaves the driver alone: a driver that exits is **not**
restarted (the supervisor waits, state ``held``), and a stalled driver is **not** killed. The
driver that runs keeps running. When the hold is lifted, a supervisor that has no driver starts one
from the same checkpoint (a ``resume`` event), and the stall checks apply again. On-call engineers
set it with ``streaming_oncall`` (``pause_supervision`` / ``resume_supervision``) to work on a
driver (take a thread dump of a stalled one, stop it by hand for a while) without the supervisor
interfering, and without stopping the continuous DAG.

The file holds who set it, when and why. It is written atomically (temp file + rename; on an object
store, one put); no pyspark.
"""

from __future__ import annotations

import json
import os
import uuid

from spark_jobs.control.supervision.state import utc_iso
from spark_jobs.model.object_store import is_url

HOLD_FILE = "supervision_hold.json"


def hold_path(control: str) -> str:
    return os.path.join(str(control), HOLD_FILE)


def _store(control: str):
    """The control folder's fsspec filesystem and path, for a lake on an object store (``s3a://``)."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(str(control))
    return fs, f"{path.rstrip('/')}/{HOLD_FILE}"


def read_hold(control: str) -> dict | None:
    """The hold on ``control``'s job (``by``, ``reason``, ``at``, ``audit_id``), or ``None``."""
    try:
        if is_url(control):
            fs, path = _store(control)
            return json.loads(fs.cat_file(path).decode("utf-8"))
        with open(hold_path(control), encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except ValueError:  # cut short: still a hold (its presence is what counts)
        return {"by": None, "reason": "(unreadable hold file)", "at": None}


def place_hold(control: str, by: str | None, reason: str, audit_id: str | None = None) -> dict:
    """Pause supervision of the job whose control folder is ``control``; returns the hold written."""
    hold = {"by": by, "reason": reason, "at": utc_iso(), "audit_id": audit_id}
    if is_url(control):
        fs, path = _store(control)
        fs.pipe_file(path, json.dumps(hold, sort_keys=True).encode("utf-8"))
        return hold
    os.makedirs(str(control), exist_ok=True)
    temp = os.path.join(str(control), f".{HOLD_FILE}.{uuid.uuid4().hex}.tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(hold, handle, sort_keys=True)
    os.replace(temp, hold_path(control))
    return hold


def lift_hold(control: str) -> dict | None:
    """Resume supervision; returns the hold that was lifted (``None``: there was none)."""
    hold = read_hold(control)
    try:
        if is_url(control):
            fs, path = _store(control)
            fs.rm_file(path)
            return hold
        os.remove(hold_path(control))
    except FileNotFoundError:
        return None
    return hold
