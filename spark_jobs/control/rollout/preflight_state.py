"""A new version's pre-flight verdict: ``<lake>/control/<job>/preflight.json``.

The pre-flight (:mod:`spark_jobs.driver.preflight`) runs in the new version's standby, before it warms up, and
writes what it found here: the version, passed or refused, and each finding (``code``, ``explanation``,
``action``). A refused standby then exits with :data:`PREFLIGHT_REFUSED_EXIT_STATUS` and the explanation as its
``error:`` line; the supervisor reads both and ends the rollout ``refused`` while the old driver runs on.
Written whole (temp file + rename; one put on an object store). No pyspark here.
"""

from __future__ import annotations

from spark_jobs.control.supervision.state import read_json, utc_iso, write_json_atomically

PREFLIGHT_FILE = "preflight.json"
#: A pre-flight standby's exit status when its version is refused (1: failed; 2: a bad value; 3: the lease is held).
PREFLIGHT_REFUSED_EXIT_STATUS = 4


def write_preflight(control: str, version: str, code: str, findings: list[dict], checks: list[str],
                    seconds: float) -> dict:
    """Record the verdict; returns it (``passed`` is true when nothing was found)."""
    verdict = {"version": version, "code": code, "passed": not findings, "findings": findings, "checks": checks,
               "seconds": round(seconds, 2), "at": utc_iso()}
    write_json_atomically(control, PREFLIGHT_FILE, verdict)
    return verdict


def read_preflight(control: str) -> dict | None:
    """The last verdict, or None."""
    return read_json(control, PREFLIGHT_FILE)


def refusal_text(job: str, verdict: dict) -> str:
    """One paragraph: which version was refused for which job, each finding and its way out."""
    parts = [f"{f['explanation']} Way out: {f['action']}" for f in verdict.get("findings") or []]
    return (f"version {verdict.get('version')} of job {job} is refused in pre-flight; the running driver was not "
            f"stopped: " + " | ".join(parts))
