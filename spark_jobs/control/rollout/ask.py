"""Asking for a rollout, checked before anything runs: the CLI's ``rollout`` and the on-call action ``rollout``.

Refused with :class:`~spark_jobs.model.errors.UsageError`, naming the value and the way out: a job without a
continuous trigger, an unknown version, a version whose registry has no such job (or no continuous trigger), the
version that runs already, a job whose supervisor is not running, a rollout under way. No pyspark here.
"""

from __future__ import annotations

import subprocess
import sys

from spark_jobs.control.rollout.request import job_version, request_rollout
from spark_jobs.control.supervision.state import read_supervisor_state
from spark_jobs.model.errors import UsageError
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.lake import Lake

LIVE_SUPERVISOR_STATES = ("starting", "running", "backing_off", "waiting_for_lease")
# The new version's own registry is asked, in a Python of its own (the release first on its path).
_REGISTRY_PROBE = ("import sys; from spark_jobs.registry import JOBS; job = JOBS.get(sys.argv[1]); "
                   "print('missing' if job is None else 'ok' if job.continuous_trigger else 'not_continuous')")


def running_version(control: str) -> str | None:
    """The version of the driver that holds the lease now (its lease says), else the job's version setting."""
    from spark_jobs.control.checkpoint.lease import read_lease

    lease = read_lease(control)
    if lease is not None and not lease.released and lease.details.get("version"):
        return lease.details["version"]
    return job_version(control)


def check_release_has_job(version: str, job: JobSpec) -> None:
    """:raises UsageError: the release's registry has no such job, or no continuous trigger for it."""
    from spark_jobs.launch.releases import driver_env, find_release

    release = find_release(version)
    said = subprocess.run([sys.executable, "-c", _REGISTRY_PROBE, job.name], env=driver_env(release),
                          capture_output=True, text=True, timeout=120)
    answer = said.stdout.strip().splitlines()[-1:] or [f"error: {said.stderr.strip()[-300:]}"]
    if answer[0] == "missing":
        raise UsageError(f"version {version} has no job {job.name!r} in its registry; roll out a version that has it")
    if answer[0] == "not_continuous":
        raise UsageError(f"version {version} declares no continuous_trigger for {job.name}: it would not run "
                         "supervised; give it one in that version's registry")
    if answer[0] != "ok":
        raise UsageError(f"version {version}'s registry cannot be read: {answer[0]}")


def ask_for_rollout(job: JobSpec, lake: Lake, version: str, by: str, reason: str | None = None) -> dict:
    """Check the request and write it for the job's supervisor; returns it (see the module docstring)."""
    control = check_rollout(job, lake, version)
    return request_rollout(control, job.name, version, running_version(control), by, reason)


def check_rollout(job: JobSpec, lake: Lake, version: str) -> str:
    """Every check of :func:`ask_for_rollout` (nothing written); returns the job's control folder.

    :raises UsageError: naming what does not fit and the way out.
    """
    from spark_jobs.control.rollout.request import RolloutRefused, active_rollout

    if not job.continuous_trigger:
        raise UsageError(f"job {job.name!r} has no continuous trigger: it is not supervised, so a new version reaches "
                         "it at its next run; roll out only continuous jobs")
    control = str(lake.control_path(job.name))
    check_release_has_job(version, job)
    supervisor = read_supervisor_state(control) or {}
    if supervisor.get("state") not in LIVE_SUPERVISOR_STATES:
        raise UsageError(f"no supervisor runs {job.name} now (state {supervisor.get('state') or 'none'}): a rollout "
                         f"needs the running job; start it (unpause {job.name}_continuous, or `python -m spark_jobs "
                         f"supervise {job.name}`) and ask again")
    under_way = active_rollout(control)
    if under_way:
        raise RolloutRefused(f"a rollout of {job.name} to {under_way.get('version')} is under way (phase "
                             f"{under_way.get('phase')}, asked by {under_way.get('by')}); wait for it to end "
                             f"(`python -m spark_jobs rollout {job.name} --status`)")
    if running_version(control) == version:
        raise RolloutRefused(f"version {version} already runs {job.name}; nothing to roll out")
    return control
