"""A rollout of a job to a new version: ``<lake>/control/<job>/rollout.json``, and the job's version setting.

A person (``python -m spark_jobs rollout JOB VERSION``, the on-call action ``rollout``) asks for one with
:func:`request_rollout`; the job's supervisor carries it out and writes each phase back
(:mod:`spark_jobs.control.supervision.rollout`)::

    requested -> preflight -> handover -> probation -> done
                          \\-> refused       \\-> failed  \\-> rolled_back

A destructive rollout (a new checkpoint and new tables: :mod:`spark_jobs.control.rollout.destructive`) goes
``requested -> resetting -> rebuilding -> done`` (or ``failed``).

**One rollout at a time per job**: a request is refused while the last one is in a phase that is not final
(:data:`ACTIVE`), naming it; the file itself is created with an exclusive create, so of two requests at once one
wins. A finished rollout is kept under ``rollouts/<id>.json`` when the next one is asked for.

The version the supervisor starts is the job's ``version`` setting (``settings.json``, beside the warm standby's:
:mod:`spark_jobs.control.supervision.job_settings`): the supervisor sets it at the handover and sets it back at a
rollback, so a supervisor that starts later starts the version that won. No setting: the checkout's code.
No pyspark here.
"""

from __future__ import annotations

import json
import uuid

import fsspec

from spark_jobs.control.supervision.job_settings import SETTINGS_FILE, read_settings
from spark_jobs.control.supervision.state import read_json, utc_iso, write_json_atomically
from spark_jobs.model.errors import UsageError

ROLLOUT_FILE = "rollout.json"
HISTORY = "rollouts"
PHASES = ("requested", "preflight", "handover", "probation", "resetting", "rebuilding", "done", "refused", "failed",
          "rolled_back", "interrupted")
ACTIVE = ("requested", "preflight", "handover", "probation", "resetting", "rebuilding")
VERSION = "version"


class RolloutRefused(UsageError):
    """A rollout that cannot be asked for now (one runs, the version runs already): the message says why."""


def read_rollout(control: str) -> dict | None:
    """The job's last rollout (``rollout.json``), or None."""
    return read_json(control, ROLLOUT_FILE)


def active_rollout(control: str) -> dict | None:
    """The job's rollout while it is in a phase that is not final, else None."""
    found = read_rollout(control)
    return found if found and found.get("phase") in ACTIVE else None


def job_version(control: str) -> str | None:
    """The version the job's supervisor starts (the ``version`` setting), or None: the checkout's code."""
    chosen = read_settings(control).get(VERSION)
    return chosen.get("value") if isinstance(chosen, dict) and isinstance(chosen.get("value"), str) else None


def set_job_version(control: str, name: str | None, by: str, reason: str) -> dict:
    """Make ``name`` the version the supervisor starts (None: the checkout's code); returns the settings written."""
    settings = read_settings(control)
    if name is None:
        settings.pop(VERSION, None)
    else:
        settings[VERSION] = {"value": name, "by": by, "at": utc_iso(), "reason": reason}
    write_json_atomically(control, SETTINGS_FILE, settings)
    return settings


def request_rollout(control: str, job: str, version: str, running: str | None, by: str,
                    reason: str | None = None, destructive: bool = False) -> dict:
    """Ask the supervisor to move ``job`` to ``version``; returns the request.

    :param running: the version that runs now (the lease's), to refuse a rollout to it.
    :param destructive: a new checkpoint and new tables (:mod:`spark_jobs.control.rollout.destructive`).
    :raises RolloutRefused: a rollout is under way, or ``version`` runs already.
    """
    under_way = active_rollout(control)
    if under_way:
        raise RolloutRefused(f"a rollout of {job} to {under_way.get('version')} is under way (phase "
                             f"{under_way.get('phase')}, asked by {under_way.get('by')} at {under_way.get('asked_at')}"
                             f"); wait for it to end (`python -m spark_jobs rollout {job} --status`)")
    if running is not None and running == version:
        raise RolloutRefused(f"version {version} already runs {job}; nothing to roll out")
    fs, base = fsspec.core.url_to_fs(str(control))
    base = base.rstrip("/")
    path = f"{base}/{ROLLOUT_FILE}"
    last = read_rollout(control)
    if last:  # kept: the history of a job's rollouts
        fs.makedirs(f"{base}/{HISTORY}", exist_ok=True)
        try:
            fs.mv(path, f"{base}/{HISTORY}/{last.get('id', uuid.uuid4().hex)}.json")
        except FileNotFoundError:
            pass
    request = {"id": f"{utc_iso().replace(':', '').replace('-', '')[:15]}-{uuid.uuid4().hex[:6]}", "job": job,
               "version": version, "from_version": running, "by": by, "reason": reason, "asked_at": utc_iso(),
               "phase": "requested", "history": [{"phase": "requested", "at": utc_iso()}]}
    if destructive:
        request["destructive"] = True
    fs.makedirs(base, exist_ok=True)
    try:
        with fs.open(path, "xb") as handle:  # exclusive: of two requests at once one wins
            handle.write((json.dumps(request, sort_keys=True) + "\n").encode("utf-8"))
    except FileExistsError:
        raise RolloutRefused(f"another rollout of {job} was asked for at the same moment; see "
                             f"`python -m spark_jobs rollout {job} --status`") from None
    return request


def update_rollout(control: str, rollout: dict, phase: str | None = None, **fields) -> dict:
    """Write the rollout back with a new ``phase`` (its time added to ``history``) and ``fields``; returns it."""
    if phase is not None:
        if phase not in PHASES:
            raise ValueError(f"unknown rollout phase {phase!r}; one of {', '.join(PHASES)}")
        rollout["phase"] = phase
        rollout.setdefault("history", []).append({"phase": phase, "at": utc_iso()})
    rollout.update(fields)
    write_json_atomically(control, ROLLOUT_FILE, rollout)
    return rollout


def describe(rollout: dict | None) -> str:
    """One line for people: the rollout's version, phase and outcome."""
    if not rollout:
        return "no rollout yet"
    kind = "destructive rollout" if rollout.get("destructive") else "rollout"
    said = f"{kind} {rollout.get('id')}: {rollout.get('from_version') or 'the checkout'} -> {rollout.get('version')}" \
           f", phase {rollout.get('phase')}"
    if rollout.get("outcome"):
        said += f": {rollout['outcome']}"
    return said

