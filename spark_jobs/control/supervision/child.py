"""A supervised child process (a job's driver command) and its process group: it dies with its supervisor,
stops gracefully, leaves nothing behind. (A process handle of the control plane; the driver *layer*, the
code that runs in that process, is :mod:`spark_jobs.driver`.)

The driver command (``python -m spark_jobs run ...`` or ``spark-submit ...``) starts as a child in
a new session and process group (the group holds the Python driver, the JVM and Spark's Python
workers), with ``prctl(PR_SET_PDEATHSIG, SIGTERM)``: if the supervising thread dies (``kill -9`` of
an Airflow task included), the kernel sends the driver SIGTERM, so no driver is ever orphaned.
Mind that the kernel sends it when the *thread* that started the child ends: start and watch a
driver from one thread (:class:`~spark_jobs.control.supervision.supervisor.Supervisor` does).

Stopping:

- :meth:`ChildProcess.stop`: SIGTERM to the Python driver (its pid is in the lease: under spark-submit it
  is the JVM's child, and a SIGTERM to the JVM would stop Spark under the running batch), which
  stops after the current micro-batch; after ``grace_seconds`` SIGKILL to the whole group.
- :meth:`ChildProcess.kill`: SIGKILL to the whole group (works on a SIGSTOPped process too).

Both reap the child and wait until no process of the group is left. Linux only.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

log = logging.getLogger("spark_jobs.control.supervision")

PR_SET_PDEATHSIG = 1
# After the child itself ended, how long the rest of its group (a JVM shutting down) gets.
GROUP_EXIT_SECONDS = 10.0
LOG_ROTATE_BYTES = 64 * 1024 * 1024


def _libc_prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()


def _die_with_parent(parent_pid: int):
    """``preexec_fn``: SIGTERM this child when its parent (thread) dies, even if it already has."""

    def setup() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return setup


def _in_group(pid: int, pgid: int) -> bool:
    """Whether ``pid`` is a live (not a zombie) process of process group ``pgid``."""
    try:
        return os.getpgid(pid) == pgid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (OSError, psutil.Error):  # gone
        return False


def group_members(pgid: int) -> list[int]:
    """The live (non-zombie) processes of process group ``pgid``."""
    return sorted(pid for pid in psutil.pids() if _in_group(pid, pgid))


def tail_text(path: Path, start: int = 0, lines: int = 20, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of ``path`` from byte ``start`` on."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            end = handle.tell()
            begin = max(start, end - max_bytes)
            handle.seek(begin)
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class ChildProcess:
    """One child process (a driver command) started in its own process group, and that group.

    :param command: the driver command (argv).
    :param log_path: the file its stdout and stderr are appended to.
    :param env: its environment (default: this process's).
    :param cwd: its working folder.
    """

    def __init__(self, command: list[str], log_path: Path, env: dict | None = None, cwd: str | None = None) -> None:
        self.command = list(command)
        self.log_path = Path(log_path)
        self.env = env
        self.cwd = cwd
        self.process: subprocess.Popen | None = None
        self.started_monotonic: float | None = None
        self._log_start = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def pgid(self) -> int | None:
        """The driver's process group (the child is its leader)."""
        return self.pid

    def start(self) -> int:
        """Start the command; returns its pid."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"driver pid {self.process.pid} is still running; stop it before starting another")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists() and self.log_path.stat().st_size > LOG_ROTATE_BYTES:
            self.log_path.replace(self.log_path.with_name(self.log_path.name + ".1"))
        with open(self.log_path, "ab") as out:
            out.write(f"==== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} starting: "
                      f"{' '.join(self.command)}\n".encode())
            # on disk before the child starts: its own writes (O_APPEND) must come after this header, or the
            # offset below would point into them and the failure's reason lose its line
            out.flush()
            self._log_start = out.tell()
            self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
                                            start_new_session=True, preexec_fn=_die_with_parent(os.getpid()))
        self.started_monotonic = time.monotonic()
        log.info("driver started: pid %d: %s", self.process.pid, " ".join(self.command))
        return self.process.pid

    def poll(self) -> int | None:
        """The exit status if the child ended (reaped), else None."""
        return self.process.poll() if self.process else None

    def owns(self, pid: int | None) -> bool:
        """Whether ``pid`` is a live process of this driver's group (the Python driver under spark-submit)."""
        return pid is not None and self.pgid is not None and _in_group(pid, self.pgid)

    def members(self) -> list[int]:
        """The live processes of the driver's group."""
        return group_members(self.pgid) if self.pgid is not None else []

    def log_tail(self, lines: int = 20) -> str:
        """The last lines this driver wrote."""
        return tail_text(self.log_path, self._log_start, lines)

    def _signal_group(self, sig: signal.Signals) -> None:
        if self.pgid is None:
            return
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _wait_group_empty(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None:
                self.process.poll()
            if not self.members():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def kill(self) -> int | None:
        """SIGKILL the whole group (stopped or not), reap the child, wait until the group is gone.

        :returns: the child's exit status.
        """
        if self.process is None:
            return None
        self._signal_group(signal.SIGKILL)
        code = self.process.wait()
        if not self._wait_group_empty(GROUP_EXIT_SECONDS):
            self._signal_group(signal.SIGKILL)
            if not self._wait_group_empty(GROUP_EXIT_SECONDS):
                log.error("processes %s of driver group %d survived SIGKILL", self.members(), self.pgid)
        return code

    def stop(self, grace_seconds: float, driver_pid: int | None = None) -> tuple[int | None, bool]:
        """Stop gracefully: SIGTERM to the Python driver, SIGKILL to the group after ``grace_seconds``.

        :param driver_pid: the Python driver's pid (from the lease); used when it is in this group,
            else the child itself gets the SIGTERM.
        :returns: (the child's exit status, whether it ended within the grace period).
        """
        if self.process is None:
            return None, True
        if self.process.poll() is None:
            target = driver_pid if self.owns(driver_pid) else self.process.pid
            try:
                os.kill(target, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                log.warning("driver pid %d did not stop within %g s: killing its process group",
                            self.process.pid, grace_seconds)
                return self.kill(), False
        if not self._wait_group_empty(min(GROUP_EXIT_SECONDS, max(grace_seconds, 1.0))):
            self.kill()
        return self.process.returncode, True

    def cleanup_after_exit(self) -> None:
        """After the child ended by itself (a crash): SIGKILL what is left of its group (a JVM that
        could still be writing), and wait until it is gone."""
        if self.process is not None and self.members():
            self.kill()


def error_line(tail: str) -> str | None:
    """A driver's own one-line error (``error: ...``, what ``python -m spark_jobs`` prints before it exits with a
    status), else the last exception line of a Python traceback in ``tail`` (its output); None when neither is
    there."""
    lines = [line.rstrip() for line in tail.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("error:"):
            return line[:1000]
    if any(line.startswith("Traceback") for line in lines):  # the exception line ends a traceback
        return next((line[:1000] for line in reversed(lines) if not line[0].isspace()), None)
    return None
