#!/usr/bin/env bash
# The command of every Airflow service in docker-compose.yml:
#
#   airflow-entrypoint.sh init               once, before the others: migrate the Postgres metadata DB, make the
#                                            lake and landing folders, land the sample logs if the landing is empty
#   airflow-entrypoint.sh api-server|scheduler|dag-processor|triggerer
#
# Who is who (the FAB auth manager, docs/identity.md): `init` syncs this product's roles and creates the admin (password
# $AIRFLOW_ADMIN_PASSWORD from .env) and the service user of the connection airflow_api ($AIRFLOW_CONN_AIRFLOW_API: its
# login and password, $AIRFLOW_SERVICE_PASSWORD from .env) if they are missing (tools/fab_setup.py, the passwords on
# its stdin: never a command line or a log, never baked into the image); teammates are added with
# `airflow users create`. With Airflow's simple auth manager instead (AIRFLOW__CORE__AUTH_MANAGER), the api-server
# writes those two passwords where it reads them, for the first user of AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS.
set -euo pipefail

# .env.example's placeholder left in .env: stop with the name of the secret, before anything starts.
refuse_placeholder() {
  if [[ "$2" == *change-me* ]]; then
    echo "error: $1 is still the placeholder of .env.example: put a real secret in .env (see .env.example)" >&2
    exit 2
  fi
}

case "${1:-}" in
  init)
    refuse_placeholder POSTGRES_PASSWORD "$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"
    refuse_placeholder AIRFLOW_JWT_SECRET "$AIRFLOW__API_AUTH__JWT_SECRET"
    refuse_placeholder AIRFLOW_API_SECRET_KEY "$AIRFLOW__API__SECRET_KEY"
    refuse_placeholder AIRFLOW_FERNET_KEY "$AIRFLOW__CORE__FERNET_KEY"
    refuse_placeholder AIRFLOW_ADMIN_PASSWORD "${AIRFLOW_ADMIN_PASSWORD:-}"
    refuse_placeholder AIRFLOW_SERVICE_PASSWORD "${AIRFLOW_CONN_AIRFLOW_API:-}"
    airflow db migrate
    if [[ "${AIRFLOW__CORE__AUTH_MANAGER:-}" == *FabAuthManager ]]; then
      python - <<'PY' | python /opt/project/tools/fab_setup.py
import json, os
api = json.loads(os.environ["AIRFLOW_CONN_AIRFLOW_API"])
print(json.dumps({"users": [
    {"username": "admin", "role": "Admin", "password": os.environ["AIRFLOW_ADMIN_PASSWORD"]},
    {"username": api["login"], "role": "streaming_service", "password": api["password"], "sync_password": True}]}))
PY
    fi
    mkdir -p "$LAKE_ROOT" "$LAKE_ROOT/_lineage/airflow" "$CLOUDTRAIL_ETL_INPUT"
    if [ -z "$(ls -A "$CLOUDTRAIL_ETL_INPUT")" ]; then
      python -m spark_jobs sample-data --out "$CLOUDTRAIL_ETL_INPUT"
    fi
    ;;
  api-server)
    if [[ "${AIRFLOW__CORE__AUTH_MANAGER:-}" != *SimpleAuthManager ]]; then
      exec airflow api-server  # FAB: the users are in the metadata DB (init)
    fi
    refuse_placeholder AIRFLOW_ADMIN_PASSWORD "$AIRFLOW_ADMIN_PASSWORD"
    refuse_placeholder AIRFLOW_SERVICE_PASSWORD "${AIRFLOW_CONN_AIRFLOW_API:-}"
    umask 077
    python - <<'PY'
import json, os
path = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
try:  # other users keep the passwords Airflow generated for them at an earlier start
    passwords = json.load(open(path))
except (OSError, ValueError):
    passwords = {}
passwords[os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(":")[0]] = os.environ["AIRFLOW_ADMIN_PASSWORD"]
api = json.loads(os.environ.get("AIRFLOW_CONN_AIRFLOW_API") or "{}")
if api.get("login"):
    passwords[api["login"]] = api["password"]
with open(path, "w") as handle:
    os.fchmod(handle.fileno(), 0o600)  # before a secret is in it, whoever made the file
    json.dump(passwords, handle)
PY
    exec airflow api-server
    ;;
  scheduler|dag-processor|triggerer)
    exec airflow "$1"
    ;;
  *)
    echo "usage: airflow-entrypoint.sh init|api-server|scheduler|dag-processor|triggerer (got: ${1:-nothing})" >&2
    exit 2
    ;;
esac
