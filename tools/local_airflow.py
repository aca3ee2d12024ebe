"""Airflow for real on loopback: start the four components, wait until healthy, stop all of it.

Usage (the Makefile's ``make airflow`` / ``make stop`` run these with its environment)::

    python tools/local_airflow.py start [--port 8080]   # AIRFLOW_HOME from the environment
    python tools/local_airflow.py stop

``start`` migrates the metadata DB, then starts ``airflow api-server``, ``scheduler``,
``dag-processor`` and ``triggerer`` as separate processes, each in its own process group (its pid in
``$AIRFLOW_HOME/<component>.pid``, its output in ``$AIRFLOW_HOME/logs/<component>.out``), waits
until ``/api/v2/monitor/health`` reports every component healthy, and prints the UI's URL and the
login. Every setting that depends on the port is derived from it: the API port and base URL, the
execution API's URL (without it every task fails with "Connection refused"), and the worker and
triggerer log-server ports (``port+1``, ``port+2``), so two instances on one machine never collide.

Every process started here carries ``STREAMING_AIRFLOW_INSTANCE=<AIRFLOW_HOME>`` in its environment,
and so does everything it starts in turn (task processes, spark-submit, the Spark driver). ``stop``
stops the scheduler, dag-processor and triggerer (SIGTERM to each process group, SIGKILL after a
grace period; the scheduler's task supervisors forward the SIGTERM to the tasks, whose ``on_kill``
stops their drivers after the micro-batch), then any process still carrying the marker (a driver
whose task was killed), then the API server, so nothing this instance started is left running.

**Users, roles and the API connection.** The auth manager is FAB's (``apache-airflow-providers-fab``: users and
roles in the metadata DB) unless ``$AIRFLOW__CORE__AUTH_MANAGER`` names another (the Makefile's ``AIRFLOW_AUTH=simple``
switch names Airflow's simple auth manager, for a laptop). With FAB, ``start`` migrates the DB, then syncs this
product's roles (:mod:`streaming.roles`, by ``tools/fab_setup.py``) and creates two users if they are missing: ``admin``
(role ``Admin``) and the service user :data:`SERVICE_USER` (role ``streaming_service``: it may read, pause, unpause
and clear the ``<job>_continuous`` DAGs, nothing more; never a person's login), each with a generated password kept in
``$AIRFLOW_HOME/fab_passwords.json`` (mode 0600). ``make airflow`` prints the admin's password once, when it is
created. Teammates are added with ``airflow users create ... --role ...`` while Airflow runs (FAB reads its users
at each login: no restart).

With the simple auth manager the people are the users of ``AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS``
(``admin:admin`` when unset; e.g. ``admin:admin,alice:user``). Before the API server starts, ``start`` gives every user
without one a generated password in the auth manager's passwords file
(``$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated``, mode 0600; Airflow keeps the passwords it finds
there and so prints none to its log), and ``make airflow`` prints each person's login. It adds the service user
too (role ``user``). A user added later needs ``make stop`` and ``make airflow``. The tests' instances that let
everyone in (``SIMPLE_AUTH_MANAGER_ALL_ADMINS``) get no service user.

Either way the service user's password reaches every component as the connection ``airflow_api``
(``AIRFLOW_CONN_AIRFLOW_API`` in their environment: neither a command line nor a log; Airflow masks it in task logs):
the on-call actions ``restart``, ``stop`` and ``resume_supervision`` reach Airflow's REST API with it. A connection
``airflow_api`` you define yourself in the environment is kept.

**Lineage.** Airflow's OpenLineage provider reports every task run into the lake's ``_lineage/airflow/`` (its file
transport, namespace ``airflow``) unless the environment configures the provider or OpenLineage itself
(:func:`spark_jobs.control.lineage.emitter.airflow_provider_env`, docs/lineage.md).

This module is not an Airflow plugin (``plugins/.airflowignore`` keeps Airflow from importing it);
it imports nothing from Airflow, so the tests' fixture can use it too.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

for _folder in (Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[1] / "plugins"):
    if str(_folder) not in sys.path:  # run as a script: the project (tools.ports) and the plugins, as Airflow has them
        sys.path.append(str(_folder))  # the hook's module imports nothing of Airflow at its top
from spark_jobs.control.lineage.emitter import airflow_provider_env  # noqa: E402
from spark_jobs.model.lake import resolve_lake_root  # noqa: E402
# the one REST client of Airflow, and the on-call operator's connection
from streaming import roles  # noqa: E402
from streaming.hooks.airflow_api import API_CONN_ID, AirflowApi, AirflowApiError  # noqa: E402
from tools import ports  # noqa: E402

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
HEALTH_KEYS = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}
MARKER = "STREAMING_AIRFLOW_INSTANCE"
DEFAULT_PORT = 8080
PORT_ENV = "AIRFLOW_PORT"
USERS_ENV = "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"
PASSWORDS_FILE_ENV = "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"
ALL_ADMINS_ENV = "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"
DEFAULT_USERS = "admin:admin"  # the simple auth manager's own default
AUTH_MANAGER_ENV = "AIRFLOW__CORE__AUTH_MANAGER"
FAB_AUTH_MANAGER = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
AUTH_MANAGERS = {"fab": FAB_AUTH_MANAGER, "simple": SIMPLE_AUTH_MANAGER}
# The on-call operator's own login to Airflow's REST API (simple auth manager: role "user"; FAB: its own role).
SERVICE_USER = roles.SERVICE_USER
SERVICE_ROLE = "user"
FAB_ADMIN, FAB_ADMIN_ROLE = "admin", "Admin"
FAB_PASSWORDS_FILE = "fab_passwords.json"


LOG_LEVEL_ENV = "AIRFLOW_LOG_LEVEL"  # `make airflow`'s components log at this level (default INFO)
API_CONN_ENV = f"AIRFLOW_CONN_{API_CONN_ID.upper()}"


class CannotStart(RuntimeError):
    """Airflow was not started (it already runs, or its port is taken); nothing needs stopping."""


def port_settings(port: int) -> dict[str, str]:
    """Every Airflow setting that depends on the API server's port."""
    return {
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}/",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(port + 1),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(port + 2),
    }


@dataclass
class LocalAirflow:
    """One Airflow instance on loopback.

    :param home: its ``AIRFLOW_HOME`` (metadata DB, pid files, component output).
    :param port: the API server's port; every dependent setting is derived from it.
    :param env: the environment of every component (default: this process's), before the port's
        settings and the marker are added.
    :param components: the components to run (default: all four; a test of the UI alone needs only
        the ``api-server``).
    :param auth: ``fab`` or ``simple`` (default: the auth manager ``env`` names, else FAB's).
    :param fab_users: FAB only: more users created at set-up if missing (``username``, ``role``, ``password``; the
        tests' people), after the admin and the service user.
    """

    home: Path
    port: int = DEFAULT_PORT
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    components: tuple[str, ...] = COMPONENTS
    auth: str | None = None
    fab_users: list[dict] = field(default_factory=list)
    created: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.auth is None:
            named = self.env.get(AUTH_MANAGER_ENV) or FAB_AUTH_MANAGER
            self.auth = "simple" if named == SIMPLE_AUTH_MANAGER else "fab" if named == FAB_AUTH_MANAGER else named
        if self.auth not in AUTH_MANAGERS:
            raise ValueError(f"auth manager {self.auth!r} is not fab or simple: set {AUTH_MANAGER_ENV} to "
                             f"{FAB_AUTH_MANAGER} or {SIMPLE_AUTH_MANAGER} (AIRFLOW_AUTH=fab|simple with make)")

    @property
    def fab(self) -> bool:
        return self.auth == "fab"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def component_env(self) -> dict[str, str]:
        lineage = airflow_provider_env(resolve_lake_root(self.env.get("LAKE_ROOT")), self.env)
        return {**self.env, **lineage, "AIRFLOW_HOME": str(self.home), **port_settings(self.port),
                AUTH_MANAGER_ENV: AUTH_MANAGERS[self.auth], **self._users_env(), MARKER: str(self.home)}

    # -- users ------------------------------------------------------------------------------------

    @property
    def passwords_file(self) -> Path:
        """The set-up users' passwords (mode 0600): FAB's admin and service user, or the simple auth manager's
        passwords file (``$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE``)."""
        if self.fab:
            return self.home / FAB_PASSWORDS_FILE
        return Path(self.env.get(PASSWORDS_FILE_ENV) or self.home / "simple_auth_manager_passwords.json.generated")

    @property
    def all_admins(self) -> bool:
        return not self.fab and str(self.env.get(ALL_ADMINS_ENV, "")).lower() in ("true", "1")

    def users(self) -> dict[str, str]:
        """Every set-up user (name -> role), the service user included (none when everyone is let in): FAB's admin,
        service user and :attr:`fab_users`, or the simple auth manager's users."""
        if self.fab:
            return {FAB_ADMIN: FAB_ADMIN_ROLE, **{u["username"]: u["role"] for u in self.fab_users},
                    SERVICE_USER: roles.SERVICE}
        found = {}
        for entry in (self.env.get(USERS_ENV) or DEFAULT_USERS).split(","):
            name, _, role = entry.strip().partition(":")
            if name:
                found[name] = role.split(":")[0] or "viewer"
        if not self.all_admins:
            found.setdefault(SERVICE_USER, SERVICE_ROLE)
        return found

    def _users_env(self) -> dict[str, str]:
        """The users' setting with the service user, and the ``airflow_api`` connection as that user."""
        if self.all_admins:
            return {}
        users = {} if self.fab else {USERS_ENV: ",".join(f"{name}:{role}" for name, role in self.users().items())}
        if API_CONN_ENV in self.env:
            return users
        password = self.passwords().get(SERVICE_USER)
        if password is None:  # before start() wrote it: no connection yet
            return users
        connection = {"conn_type": "http", "host": self.url, "login": SERVICE_USER, "password": password}
        return {**users, API_CONN_ENV: json.dumps(connection)}

    def passwords(self) -> dict[str, str]:
        """The passwords file (empty when there is none yet)."""
        try:
            found = json.loads(self.passwords_file.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def ensure_passwords(self) -> list[str]:
        """Give every user without one a generated password in the passwords file (0600), before the API server
        starts (Airflow keeps them and prints none). :returns: the users that got one."""
        found = self.passwords()
        named = {u["username"] for u in self.fab_users}  # a test's people bring their own
        missing = [name for name in self.users() if name not in found and name not in named]
        if missing:
            found.update({name: secrets.token_urlsafe(12) for name in missing})
            self.passwords_file.parent.mkdir(parents=True, exist_ok=True)
            temp = self.passwords_file.with_name(f".{self.passwords_file.name}.tmp")
            descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                handle.write(json.dumps(found) + "\n")
            os.replace(temp, self.passwords_file)
        return missing

    def pid_file(self, component: str) -> Path:
        return self.home / f"{component}.pid"

    def output_file(self, component: str) -> Path:
        return self.home / "logs" / f"{component}.out"

    # -- start ------------------------------------------------------------------------------------

    def start(self, timeout: float = 180) -> None:
        """Migrate the DB, start every component, wait until all are healthy.

        :raises CannotStart: it already runs from this home, or a port it needs is taken.
        :raises RuntimeError: a component exited or the instance did not get healthy in time,
            with the tail of the component's output.
        """
        running = [c for c in self.components if _alive(self._read_pid(c))]
        if running:
            raise CannotStart(f"Airflow is already running from {self.home} ({', '.join(running)}): "
                               f"`make stop` first, or choose another AIRFLOW_HOME")
        taken = [port for port in (self.port, self.port + 1, self.port + 2) if ports.in_use(port)]
        if taken:
            raise CannotStart(f"port {', '.join(map(str, taken))} on 127.0.0.1 is taken: choose another with "
                              f"{PORT_ENV}=<port> (Airflow uses <port>, <port>+1 and <port>+2)")
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        if not self.all_admins:
            self.ensure_passwords()
        migrate = subprocess.run(["airflow", "db", "migrate"], env=self.component_env, capture_output=True,
                                 text=True, timeout=300)
        if migrate.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed (exit {migrate.returncode}):\n"
                               f"{_tail(migrate.stdout + migrate.stderr)}")
        if self.fab:
            self.sync_fab()
        for component in self.components:
            with open(self.output_file(component), "ab") as out:
                process = subprocess.Popen(["airflow", component], env=self.component_env, stdout=out,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
            self.pid_file(component).write_text(f"{process.pid}\n")
        self.wait_healthy(timeout)

    def sync_fab(self) -> None:
        """This product's roles and the set-up users in FAB (``tools/fab_setup.py``; the passwords on its stdin)."""
        passwords = self.passwords()
        users = [{"username": FAB_ADMIN, "role": FAB_ADMIN_ROLE, "password": passwords[FAB_ADMIN]},
                 *self.fab_users,
                 {"username": SERVICE_USER, "role": roles.SERVICE, "password": passwords[SERVICE_USER],
                  "sync_password": True}]
        done = subprocess.run([sys.executable, str(Path(__file__).with_name("fab_setup.py"))],
                              input=json.dumps({"users": users}), env=self.component_env, capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"syncing the FAB roles and users failed (exit {done.returncode}):\n"
                               f"{_tail(done.stdout + done.stderr)}")
        self.created = json.loads(done.stdout.strip().splitlines()[-1])["created"]

    def health(self) -> dict | None:
        """``/api/v2/monitor/health`` (no login needed), or None while the API server is not up (one attempt:
        :meth:`wait_healthy` polls it anyway)."""
        try:
            return AirflowApi(self.url, timeout=5, attempts=1).api("GET", "/monitor/health")
        except AirflowApiError:
            return None

    def wait_healthy(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        health = None
        watched = {HEALTH_KEYS[c] for c in self.components if c in HEALTH_KEYS} | {"metadatabase"}
        while time.monotonic() < deadline:
            for component in self.components:
                if not _alive(self._read_pid(component)):
                    raise RuntimeError(f"airflow {component} exited at start; its output "
                                       f"({self.output_file(component)}) ends with:\n"
                                       f"{_tail(self.output_file(component).read_text(errors='replace'))}")
            health = self.health()
            if health and all((health.get(key) or {}).get("status") == "healthy" for key in watched):
                return health
            time.sleep(1)
        raise RuntimeError(f"Airflow at {self.url} was not healthy after {timeout:.0f} s (last health: "
                           f"{health}); see {self.home / 'logs'}/*.out")

    def password(self, user: str = "admin") -> str | None:
        """A user's password from the simple auth manager's passwords file, if it has one."""
        return self.passwords().get(user)

    # -- stop -------------------------------------------------------------------------------------

    def stop(self, grace: float = 60) -> list[tuple[int, str]]:
        """Stop the components, then every process left that carries this instance's marker.

        The scheduler goes first: its task supervisors forward the SIGTERM to their tasks, whose
        ``on_kill`` stops each Spark driver after its micro-batch (``RestartPolicy.stop_grace_seconds``
        at most) and report the task's end through the API server, which goes last.

        :param grace: seconds the scheduler's group gets after SIGTERM before SIGKILL (the other
            steps get a third of it).
        :returns: (pid, command) of every process group that was signalled.
        """
        first = {pid: f"airflow {c}" for c in COMPONENTS if c != "api-server" and _alive(pid := self._read_pid(c))}
        last = {pid: "airflow api-server" for pid in [self._read_pid("api-server")] if _alive(pid)}
        _stop_groups(first, grace)
        # Task processes and drivers that outlived the scheduler (a task process killed with SIGKILL
        # whose driver lives on in its own session), but not the API server yet.
        leaders = {}
        for pid, command in marked_processes(str(self.home)).items():
            leader = _pgid(pid) or pid
            if leader not in last:
                leaders.setdefault(leader, command)
        _stop_groups(leaders, grace / 3)
        _stop_groups(last, grace / 3)
        for pid, command in marked_processes(str(self.home)).items():  # anything the steps above missed
            _signal_group(_pgid(pid) or pid, signal.SIGKILL)
            leaders.setdefault(pid, command)
        for component in COMPONENTS:
            self.pid_file(component).unlink(missing_ok=True)
        return [*first.items(), *leaders.items(), *last.items()]

    def dead_components(self) -> list[str]:
        """The components whose process is not running (all of them before :meth:`start`)."""
        return [c for c in self.components if not _alive(self._read_pid(c))]

    def _read_pid(self, component: str) -> int | None:
        try:
            return int(self.pid_file(component).read_text().strip())
        except (OSError, ValueError):
            return None


def free_port(start: int = 28080) -> int:
    """The first port from ``start`` with it and the next two free (the API server, the worker's and the
    triggerer's log servers), reserved for this process (:func:`tools.ports.free_port`)."""
    return ports.free_port(start=start, run=3)


def marked_processes(instance: str) -> dict[int, str]:
    """pid -> command line of every process of this user whose environment names ``instance``."""
    import psutil

    found = {}
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            if process.environ().get(MARKER) != instance:
                continue
            command = " ".join(process.cmdline()).strip()
        except (psutil.Error, OSError):  # gone, a zombie, or another user's
            continue
        if command:  # a zombie has no command line and needs no signal
            found[process.pid] = command
    return found


def _stop_groups(groups: dict[int, str], grace: float) -> None:
    """SIGTERM each process group, wait up to ``grace`` s for all of them, SIGKILL what is left."""
    for leader in groups:
        _signal_group(leader, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_group_alive(leader) for leader in groups):
        time.sleep(0.5)
    for leader in groups:
        if _group_alive(leader):
            _signal_group(leader, signal.SIGKILL)


def _signal_group(leader: int, sig: signal.Signals) -> None:
    try:
        os.killpg(leader, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(leader, sig)


def _group_alive(leader: int) -> bool:
    try:
        os.killpg(leader, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A group of zombies only (children not reaped yet) counts as gone.
    import psutil

    return any(_pgid(pid) == leader and _alive(pid) for pid in psutil.pids())


def _alive(pid: int | None) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    import psutil

    try:
        return pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--port", type=int, default=int(os.environ.get(PORT_ENV) or DEFAULT_PORT),
                        help=f"the API server's port (default: ${PORT_ENV}, else {DEFAULT_PORT})")
    args = parser.parse_args(argv)
    home = os.environ.get("AIRFLOW_HOME")
    if not home:
        print("error: AIRFLOW_HOME is not set: run `make airflow` / `make stop`", file=sys.stderr)
        return 2
    # The task logs people read in the UI (an on-call action's plan and result) are written at INFO.
    env = {**os.environ, "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get(LOG_LEVEL_ENV) or "INFO"}
    airflow = LocalAirflow(Path(home).resolve(), args.port, env)
    if args.action == "stop":
        stopped = airflow.stop()
        for pid, command in stopped:
            print(f"stopped process group {pid}: {command[:120]}")
        print("Airflow is stopped" if stopped else f"nothing of Airflow from {airflow.home} was running")
        return 0
    try:
        print(f"starting Airflow from {airflow.home} on 127.0.0.1:{args.port} "
              f"(api-server, scheduler, dag-processor, triggerer)")
        started = time.monotonic()
        airflow.start()
    except CannotStart as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        airflow.stop(grace=10)
        return 1
    print(f"Airflow is healthy after {time.monotonic() - started:.0f} s")
    print(f"  UI:     {airflow.url}/")
    for line in login_lines(airflow):
        print(line)
    print(f"  logs:   {airflow.home / 'logs'}/<component>.out; pids: {airflow.home}/<component>.pid")
    print("  stop:   make stop")
    return 0


def login_lines(airflow: LocalAirflow) -> list[str]:
    """What ``make airflow`` prints about the logins: each person's, and the service user's without its password."""
    if airflow.all_admins:
        return ["  login:  none needed (SIMPLE_AUTH_MANAGER_ALL_ADMINS lets everyone in)"]
    if airflow.fab:
        return fab_login_lines(airflow)
    people = {name: role for name, role in airflow.users().items() if name != SERVICE_USER}
    lines = [f"  login:  {name} / {airflow.password(name) or '(not generated yet)'}  (role {role})"
             for name, role in people.items()]
    lines.append(f"          passwords: {airflow.passwords_file}; users: ${USERS_ENV} (a user added there needs "
                 "`make stop` and `make airflow`)")
    lines.append(api_line(airflow, SERVICE_ROLE, "the passwords file"))
    return lines


def api_line(airflow: LocalAirflow, role: str, kept_in: str) -> str:
    """What ``make airflow`` prints about the connection ``airflow_api``: yours, or the service user's (its role,
    where its password is kept, never the password)."""
    if API_CONN_ENV in airflow.env:
        return f"  API:    the connection {API_CONN_ID} from your environment (on-call restart, stop, resume_supervision)"
    return (f"  API:    the connection {API_CONN_ID} logs in as the service user {SERVICE_USER} (role {role}; its "
            f"password is only in {kept_in}) for the on-call restart, stop and resume_supervision")


def fab_login_lines(airflow: LocalAirflow) -> list[str]:
    """FAB: the admin's password only the time it was created; how to add a teammate; the service user."""
    if FAB_ADMIN in airflow.created:
        lines = [f"  login:  {FAB_ADMIN} / {airflow.password(FAB_ADMIN)}  (role {FAB_ADMIN_ROLE}; shown this once, kept "
                 f"in {airflow.passwords_file}, mode 0600)"]
    else:
        lines = [f"  login:  {FAB_ADMIN} (role {FAB_ADMIN_ROLE}; its password is in {airflow.passwords_file})"]
    lines += [f"  roles:  {', '.join(roles.PERSON_ROLES)} (docs/identity.md says what each may do)",
              "  add a teammate (no restart; it asks for the password, never put it on the command line):",
              '          eval "$(make -s env)"; airflow users create --username NAME --firstname FIRST --lastname LAST '
              f"--email EMAIL --role {roles.OPERATOR}"]
    lines.append(api_line(airflow, f"{roles.SERVICE}, no person's", airflow.passwords_file.name))
    return lines


if __name__ == "__main__":
    sys.exit(main())
