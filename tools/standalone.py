"""A Spark standalone cluster from the pip-installed Spark, and the ``spark_default`` connection that points at one.

Usage (the tests do this; by hand, mind the worker's memory)::

    with StandaloneCluster(Path("/tmp/cluster"), worker_cores=2, worker_memory="1g") as cluster:
        os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = connection_json(cluster.host, cluster.port)
        ...  # the DAGs, the supervisor and spark-submit now run their jobs on the cluster

The pip ``pyspark`` has ``bin/spark-class`` but no ``sbin/start-master.sh``; Spark's own daemons are
started the way those scripts start them: ``spark-class org.apache.spark.deploy.master.Master`` and
``spark-class org.apache.spark.deploy.worker.Worker spark://HOST:PORT``. Each runs in a process group
of its own (the worker's executors and their Python workers are its children, so stopping the group
leaves nothing), binds the host given (127.0.0.1 here), takes a free port (the master's RPC port is
read back from its JSON status page), and writes its log into the cluster's folder.

The workers' environment has no ``PYTHONPATH``: like a cluster's machines, the executors find the
project's code only in the zip the driver ships (:mod:`spark_jobs.launch.code_zip`).

Python applications cannot use ``--deploy-mode cluster`` on a standalone master (spark-submit refuses
it): the driver runs in client mode, inside the spark-submit process that the Airflow task or the
supervisor owns, so the supervisor, the lease and the process-group stop work unchanged.

:func:`spark_connection` is the one declaration of a standalone ``spark_default``: the tests and
docker-compose.yml use the same (checked by :mod:`tools.deploy_checks`). No pyspark here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tools.ports import free_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
DEFAULT_MASTER_PORT = 7077


def spark_connection(host: str, port: int = DEFAULT_MASTER_PORT) -> dict:
    """The Airflow ``spark_default`` connection of a standalone master (client mode), as a JSON-able dict.

    The Spark provider turns it into ``--master spark://<host>:<port> --deploy-mode client``.
    """
    return {"conn_type": "spark", "host": f"spark://{host}", "port": int(port), "extra": {"deploy-mode": "client"}}


def connection_json(host: str, port: int = DEFAULT_MASTER_PORT) -> str:
    """:func:`spark_connection` as the value of ``AIRFLOW_CONN_SPARK_DEFAULT``."""
    return json.dumps(spark_connection(host, port))


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class StandaloneCluster:
    """A standalone master and one worker on ``host``, started from the pip Spark; a context manager.

    :param folder: logs (``master.log``, ``worker.log``), the worker's work folder and scratch space.
    :param host: the address every daemon binds and advertises.
    :param worker_cores: cores the worker offers (each application takes all it can get).
    :param worker_memory: memory the worker offers executors (an executor asks 1g by default).
    :param daemon_memory: the heap of the master's and the worker's own JVMs.
    """

    def __init__(self, folder: Path, *, host: str = "127.0.0.1", worker_cores: int = 2, worker_memory: str = "1g",
                 daemon_memory: str = "256m") -> None:
        self.folder = Path(folder)
        self.host = host
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.master_ui_port = 0
        self.worker_ui_port = 0
        self.port = 0
        self._processes: dict[str, subprocess.Popen] = {}

    # -- life ------------------------------------------------------------------------------------

    def _env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update({"SPARK_LOCAL_IP": self.host, "SPARK_LOCAL_DIRS": str(self.folder / "local"),
                    "SPARK_DAEMON_MEMORY": self.daemon_memory, "SPARK_LOG_DIR": str(self.folder)})
        return env

    def _start(self, name: str, argv: list[str]) -> None:
        binary = shutil.which("spark-class")
        if binary is None:
            raise RuntimeError("spark-class is not on PATH: put the venv's bin on PATH (eval \"$(make -s env)\")")
        with open(self.folder / f"{name}.log", "ab") as log:
            self._processes[name] = subprocess.Popen([binary, *argv], stdin=subprocess.DEVNULL, stdout=log,
                                                     stderr=subprocess.STDOUT, env=self._env(), cwd=self.folder,
                                                     start_new_session=True)

    def start(self, timeout: float = 180) -> "StandaloneCluster":
        """Start the master, then the worker; return once the master counts the worker alive.

        :raises RuntimeError: a daemon died or the cluster was not up within ``timeout`` (with its log's tail).
        """
        for sub in ("local", "work"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self.master_ui_port = free_port(self.host)
        self._start("master", [MASTER_CLASS, "--host", self.host, "--port", "0", "--webui-port",
                               str(self.master_ui_port)])
        status = self._wait(lambda s: s.get("status") == "ALIVE" and s.get("url"), self.master_state, timeout,
                            "the master")
        self.port = int(status["url"].rsplit(":", 1)[1])
        self.worker_ui_port = free_port(self.host)
        self._start("worker", [WORKER_CLASS, self.master_url, "--host", self.host, "--port", "0", "--webui-port",
                               str(self.worker_ui_port), "--cores", str(self.worker_cores), "--memory",
                               self.worker_memory, "--work-dir", str(self.work_dir)])
        self._wait(lambda s: s.get("aliveworkers") == 1, self.master_state, timeout, "the worker to register")
        return self

    def _wait(self, ready, probe, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for name, process in self._processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"the Spark {name} exited with {process.returncode} while waiting for {what}: "
                                       f"{self.log_tail(name)}")
            try:
                state = probe()
                if ready(state):
                    return state
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}: {self.log_tail('master')}")
            time.sleep(0.5)

    def stop(self, grace_seconds: float = 20) -> None:
        """SIGTERM each daemon's process group (worker first: it kills its executors), SIGKILL after the grace."""
        for name in ("worker", "master"):
            process = self._processes.get(name)
            if process is None:
                continue
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + grace_seconds
            while _group_alive(process.pid) and time.monotonic() < deadline:
                process.poll()
                time.sleep(0.2)
            if _group_alive(process.pid):
                os.killpg(process.pid, signal.SIGKILL)
                while _group_alive(process.pid):
                    process.poll()
                    time.sleep(0.1)
            process.wait()
        self._processes.clear()

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what it says ------------------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def work_dir(self) -> Path:
        """The worker's work folder: ``<app id>/<executor id>/`` holds each executor's fetched files and logs."""
        return self.folder / "work"

    @property
    def pgids(self) -> list[int]:
        """The daemons' process groups (each holds its daemon and everything it started)."""
        return [p.pid for p in self._processes.values()]

    def _json(self, port: int) -> dict:
        with urllib.request.urlopen(f"http://{self.host}:{port}/json/", timeout=10) as response:
            return json.loads(response.read())

    def master_state(self) -> dict:
        """The master's JSON status: ``status``, ``aliveworkers``, ``activeapps``, ``completedapps``, ..."""
        return self._json(self.master_ui_port)

    def worker_state(self) -> dict:
        """The worker's JSON status: ``executors`` (running) and ``finishedexecutors``, each with its ``appid``."""
        return self._json(self.worker_ui_port)

    def log_tail(self, name: str, lines: int = 15) -> str:
        try:
            text = (self.folder / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return " / ".join(text.splitlines()[-lines:])


def executor_processes(app_id: str | None = None) -> dict[int, str]:
    """pid -> command line of every live executor JVM on this machine (of ``app_id`` only, when given)."""
    import psutil

    found = {}
    for process in psutil.process_iter():
        try:
            words = [word for word in process.cmdline() if word]
        except psutil.Error:
            continue
        if EXECUTOR_CLASS not in words:
            continue
        if app_id is not None and (words + [""])[words.index("--app-id") + 1 if "--app-id" in words else -1] != app_id:
            continue
        found[process.pid] = " ".join(words)
    return found
