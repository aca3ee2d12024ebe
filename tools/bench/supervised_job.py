"""A supervised job for the trials: ``python -m spark_jobs supervise`` in its own process group, and what it committed.

Shared by the trials through the command line (:mod:`tools.bench.recovery`) and through a running Airflow
(:mod:`tools.bench.recovery_airflow`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from spark_jobs.control.checkpoint.logs import (LogDamage, file_source_offset, parse_offsets, read_checked,
                                               read_source_log, scan_log_dir)
from spark_jobs.control.checkpoint.store import Location
from spark_jobs.model.lake import PROJECT_ROOT, Lake
from spark_jobs.registry import get_job

JOB = get_job("cloudtrail_etl")


def batch_files(folder: Path) -> dict[int, Path]:
    if not folder.is_dir():
        return {}
    return {int(p.name): p for p in folder.iterdir() if p.name.isdigit()}


def committed_files(checkpoint: Path) -> set[str]:
    """Names of the input files of committed batches, read with the checkpoint library.

    ``commits/`` says the last batch done, its ``offsets/`` entry the file source's offset then (the
    batch id of the source's own log, which runs ahead of the query's batch ids once a driver was
    killed after the source logged its next files but before it wrote the batch's offsets), and the
    source log (its newest ``.compact`` file and the files after it) which files each of its batches
    holds; for a stream that discovers its files, the discovery log's manifests up to the one of the last
    committed batch (the trials' runs are short: every manifest is still there). A log file caught mid-write
    counts as nothing committed yet: the caller polls again.
    """
    from spark_jobs.control.discovery.planner import manifest_of
    from spark_jobs.control.discovery.state import DiscoveryLog, DiscoveryStateError

    root = Location.of(checkpoint)
    latest = scan_log_dir(root.child("commits")).latest
    if latest is None:
        return set()
    try:
        source = parse_offsets(read_checked(scan_log_dir(root.child("offsets")), latest)).sources[0]
        manifest = manifest_of(source)
        if manifest is not None:
            log = DiscoveryLog(root)
            found = (log.read_manifest(number) for number in range(1, manifest + 1))
            return {f.key.rsplit("/", 1)[-1] for m in found if m is not None for f in m.files}
        offset = file_source_offset(source)
        if offset is None:
            raise ValueError(f"{checkpoint}/offsets/{latest}: neither a discovery nor a file source's offset")
        entries = read_source_log(scan_log_dir(root.child("sources", "0")))
    except (LogDamage, DiscoveryStateError):
        return set()
    return {entry["path"].rsplit("/", 1)[-1] for entry in entries if int(entry.get("batchId", -1)) <= offset}


class SupervisedJob:
    """``python -m spark_jobs supervise`` in its own process group; its events on stdout, its log on stderr.

    :param landing: the input folder.
    :param lake: the lake root.
    :param trigger: ``--trigger`` (None: the registry's continuous trigger).
    :param workdir: where its output files go.
    :param policy: ``--policy`` (RestartPolicy fields to override).
    :param env: its environment (default: this process's), e.g. ``$SPARK_JOBS_RELEASES``.
    """

    def __init__(self, landing: Path, lake: Path, trigger: str | None, workdir: Path, policy: dict | None = None,
                 env: dict | None = None) -> None:
        self.lake = Lake(lake)
        self.control = self.lake.control_path(JOB.name)
        self.checkpoint = self.lake.checkpoint_path(JOB.name)
        self.command = [sys.executable, "-m", "spark_jobs", "supervise", JOB.name, "--lake", str(lake),
                        "--input", str(landing)] + (["--trigger", trigger] if trigger else []) \
            + (["--policy", json.dumps(policy)] if policy else [])
        self.env = env
        self.stdout, self.stderr = workdir / "supervise.out", workdir / "supervise.err"
        self.proc = self._start("w")

    def _start(self, mode: str) -> subprocess.Popen:
        return subprocess.Popen(self.command, cwd=PROJECT_ROOT, stdout=self.stdout.open(mode),
                                stderr=self.stderr.open(mode), start_new_session=True, env=self.env)

    def restart(self) -> None:
        """Start the supervisor again (after it ended, or was killed), its output appended to the same files."""
        if self.proc.poll() is None:
            raise RuntimeError(f"the supervisor (pid {self.proc.pid}) still runs")
        self.proc = self._start("a")

    def lease(self):
        from spark_jobs.control.checkpoint.lease import read_lease

        return read_lease(str(self.control))

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            tail = "\n".join(self.stderr.read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"the supervisor exited early (status {self.proc.returncode}):\n{tail}")

    def commits(self) -> dict[int, Path]:
        return batch_files(self.checkpoint / "commits")

    def wait(self, condition, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            value = condition()
            if value:
                return value
            time.sleep(0.2)
        raise TimeoutError(f"{what} did not happen within {timeout:g} s")

    def live_driver(self):
        """The lease of a running, unreleased driver, or None."""
        lease = self.lease()
        if lease is None or lease.released or not lease.alive_locally():
            return None
        return lease

    def state(self) -> dict:
        from spark_jobs.control.supervision.state import read_supervisor_state

        return read_supervisor_state(str(self.control)) or {}

    def events(self) -> list[dict]:
        from spark_jobs.control.supervision.state import read_events

        return read_events(str(self.control))

    def stop(self, timeout: float) -> tuple[int | None, float, list[int]]:
        """SIGTERM the supervisor (a graceful stop of its driver); returns (status, seconds, processes left)."""
        from spark_jobs.control.supervision.child import group_members

        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        took = time.monotonic() - started
        left = group_members(self.proc.pid)
        lease = self.lease()
        if lease is not None and lease.alive_locally():
            left.append(lease.pid)
        return self.proc.returncode, took, sorted(set(left))
