"""A continuous job's settings that on-call changes while it runs: ``<lake>/control/<job>/settings.json``.

The registry declares each job's defaults (``RestartPolicy.warm_standby``). What a person chose since, with the
on-call DAG's ``set_warm_standby`` action or ``python -m spark_jobs standby JOB on|off|default``, is kept here,
beside the checkpoint, so that it holds for every later run: a new run of ``<job>_continuous``, the run an unpause
starts, ``resume_supervision``, a restart of Airflow. The supervisor reads it while it runs and starts or stops the
standby when it changes. A run's own ``warm_standby`` param (``supervise --warm-standby``) overrides both for that
run only.

The file is small JSON, rewritten whole (temp file + rename; one put on an object store)::

    {"warm_standby": {"value": true, "by": "alice", "at": "2026-12-07T06:40:00.000+00:00", "reason": "..."}}

No pyspark here.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.control.supervision.state import read_json, utc_iso, write_json_atomically
from spark_jobs.model.jobs import JobSpec

SETTINGS_FILE = "settings.json"
WARM_STANDBY = "warm_standby"


@dataclass(frozen=True)
class Setting:
    """A setting's value in force and where it comes from (``registry``, ``on-call``, ``this run``)."""

    value: bool
    source: str
    by: str | None = None
    at: str | None = None

    def describe(self) -> str:
        """``on (set by alice at ...)``, ``off (the registry's default)``, ``on (this run's param)``."""
        said = "on" if self.value else "off"
        if self.source == "on-call":
            return f"{said} (set by {self.by or 'someone'} at {self.at})"
        if self.source == "this run":
            return f"{said} (this run's param)"
        return f"{said} (the registry's default)"


def read_settings(control: str) -> dict:
    """Every setting on-call has made for the job (none: ``{}``)."""
    found = read_json(control, SETTINGS_FILE)
    return found if isinstance(found, dict) else {}


def set_warm_standby(control: str, value: bool | None, by: str, reason: str | None = None) -> dict:
    """Keep the job's warm standby on (``True``) or off (``False``) from now on, or go back to the registry's
    default (``None``); returns the settings as written."""
    settings = read_settings(control)
    if value is None:
        settings.pop(WARM_STANDBY, None)
    else:
        settings[WARM_STANDBY] = {"value": bool(value), "by": by, "at": utc_iso(), "reason": reason}
    write_json_atomically(control, SETTINGS_FILE, settings)
    return settings


def warm_standby(job: JobSpec, control: str, this_run: bool | None = None, default: bool | None = None) -> Setting:
    """Whether the job keeps a warm standby now: this run's own choice, else on-call's, else ``default`` (the
    registry's ``RestartPolicy.warm_standby``, or a policy made from it)."""
    if this_run is not None:
        return Setting(bool(this_run), "this run")
    chosen = read_settings(control).get(WARM_STANDBY)
    if isinstance(chosen, dict) and isinstance(chosen.get("value"), bool):
        return Setting(chosen["value"], "on-call", chosen.get("by"), chosen.get("at"))
    return Setting(bool(job.restart.warm_standby if default is None else default), "registry")


def parse_switch(text: str) -> bool | None:
    """``on``/``off``/``default`` (and true/false, yes/no) as True/False/None.

    :raises ValueError: naming the value and the words accepted.
    """
    word = str(text).strip().lower()
    if word in ("on", "true", "yes", "1"):
        return True
    if word in ("off", "false", "no", "0"):
        return False
    if word in ("default", "registry", "none", ""):
        return None
    raise ValueError(f"{text!r} is not on, off or default")

