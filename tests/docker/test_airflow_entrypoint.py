"""docker/airflow-entrypoint.sh refuses what it must before anything starts (plain bash: no Docker needed)."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers.project import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "docker" / "airflow-entrypoint.sh"
REAL = "s3cr3t-Xy9"
SIMPLE = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
INIT_ENV = {
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://airflow:{REAL}@postgres:5432/airflow",
    "AIRFLOW__API_AUTH__JWT_SECRET": REAL,
    "AIRFLOW__API__SECRET_KEY": REAL,
    "AIRFLOW__CORE__FERNET_KEY": REAL,
}


def run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    # PATH without airflow: a run that got past the refusals would fail on `airflow`, not start anything.
    return subprocess.run(["bash", str(SCRIPT), *args], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
                          text=True, timeout=30)


@pytest.mark.parametrize("secret, variable", [
    ("POSTGRES_PASSWORD", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"),
    ("AIRFLOW_JWT_SECRET", "AIRFLOW__API_AUTH__JWT_SECRET"),
    ("AIRFLOW_API_SECRET_KEY", "AIRFLOW__API__SECRET_KEY"),
    ("AIRFLOW_FERNET_KEY", "AIRFLOW__CORE__FERNET_KEY"),
])
def test_init_refuses_a_placeholder_secret_by_name(secret, variable):
    env = {**INIT_ENV, variable: INIT_ENV[variable].replace(REAL, "change-me")}

    done = run(["init"], env)

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"error: {secret} is still the placeholder of .env.example: put a real secret in .env "
                           "(see .env.example)\n")


def test_init_with_real_secrets_goes_on_to_migrate_the_db():
    done = run(["init"], INIT_ENV)

    assert done.returncode == 127 and "airflow: command not found" in done.stderr


# FAB (docker-compose.yml's): init creates the admin and the service user; the simple auth manager: the api-server
# writes their passwords where it reads them. Either refuses a placeholder first.
STARTS = [(["init"], INIT_ENV), (["api-server"], {"AIRFLOW__CORE__AUTH_MANAGER": SIMPLE})]


@pytest.mark.parametrize("args, env", STARTS)
def test_a_placeholder_login_password_is_refused(args, env):
    done = run(args, {**env, "AIRFLOW_ADMIN_PASSWORD": "change-me"})

    assert done.returncode == 2
    assert done.stderr.startswith("error: AIRFLOW_ADMIN_PASSWORD is still the placeholder of .env.example")


def test_an_unknown_component_gets_the_usage():
    done = run(["webserver"], {})

    assert done.returncode == 2
    assert done.stderr == ("usage: airflow-entrypoint.sh init|api-server|scheduler|dag-processor|triggerer "
                           "(got: webserver)\n")


@pytest.mark.parametrize("args, env", STARTS)
def test_a_placeholder_service_password_is_refused(args, env):
    connection = ('{"conn_type": "http", "host": "http://airflow-apiserver:8080", "login": "streaming_service", '
                  '"password": "change-me"}')
    done = run(args, {**env, "AIRFLOW_ADMIN_PASSWORD": REAL, "AIRFLOW_CONN_AIRFLOW_API": connection})

    assert done.returncode == 2
    assert done.stderr.startswith("error: AIRFLOW_SERVICE_PASSWORD is still the placeholder of .env.example")


def test_api_server_writes_the_admins_and_the_service_users_passwords(tmp_path):
    import json
    import sys

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)  # python, but no airflow on PATH
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"alice": "generated-earlier"}))
    connection = json.dumps({"conn_type": "http", "host": "http://airflow-apiserver:8080", "login": "streaming_service",
                             "password": "service-s3cr3t"})
    done = run(["api-server"], {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "AIRFLOW_ADMIN_PASSWORD": REAL,
                                "AIRFLOW_CONN_AIRFLOW_API": connection,
                                "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE,
                                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,alice:user,streaming_service:user",
                                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords)})

    assert done.returncode == 127 and "exec: airflow: not found" in done.stderr  # it got as far as the start
    assert json.loads(passwords.read_text()) == {"alice": "generated-earlier", "admin": REAL,
                                                 "streaming_service": "service-s3cr3t"}
    assert oct(passwords.stat().st_mode & 0o777) == "0o600"
    assert "s3cr3t" not in done.stdout + done.stderr
