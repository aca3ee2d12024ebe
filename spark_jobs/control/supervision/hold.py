"""Paused supervision: a hold the supervisor honours, ``<lake>/control/<job>/supervision_hold.json``.

While the hold exists the supervisor leaves the driver alone: a driver that exits is **not**
restarted (the supervisor waits, state ``held``), and a stalled driver is **not** killed. The
driver that runs keeps running. When the hold is lifted, a supervisor that has no driver starts one
from the same checkpoint (a ``resume`` event), and the stall checks apply again. On-call engineers
set it with ``streaming_oncall`` (``pause_supervision`` / ``resume_supervision``) to work on a
driver (take a thread dump of a stalled one, stop it by hand for a while) without the supervisor
interfering, and without stopping the continuous DAG.

The file holds who set it, when and why. It is written atomically (temp file + rename); no pyspark.
"""

from __future__ import annotations

import json
import os
import uuid

from spark_jobs.control.supervision.state import utc_iso

HOLD_FILE = "supervision_hold.json"


def hold_path(control: str) -> str:
    return os.path.join(str(control), HOLD_FILE)


def read_hold(control: str) -> dict | None:
    """The hold on ``control``'s job (``by``, ``reason``, ``at``, ``audit_id``), or ``None``."""
    try:
        with open(hold_path(control), encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except ValueError:  # cut short: still a hold (its presence is what counts)
        return {"by": None, "reason": "(unreadable hold file)", "at": None}


def place_hold(control: str, by: str | None, reason: str, audit_id: str | None = None) -> dict:
    """Pause supervision of the job whose control folder is ``control``; returns the hold written."""
    hold = {"by": by, "reason": reason, "at": utc_iso(), "audit_id": audit_id}
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
        os.remove(hold_path(control))
    except FileNotFoundError:
        return None
    return hold
