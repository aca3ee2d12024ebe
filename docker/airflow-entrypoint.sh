#!/usr/bin/env bash
# The command of every Airflow service in docker-compose.yml:
#
#   airflow-entrypoint.sh init               once, before the others: migrate the Postgres metadata DB, make the
#                                            lake and landing folders, land the sample logs if the landing is empty
#   airflow-entrypoint.sh api-server|scheduler|dag-processor|triggerer
#
# The login (SimpleAuthManager) is the first user in AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS with the password
# $AIRFLOW_ADMIN_PASSWORD from .env, and the service user of the connection airflow_api ($AIRFLOW_CONN_AIRFLOW_API:
# its login and password, $AIRFLOW_SERVICE_PASSWORD from .env) with its own, both written where the API server reads
# them (other users get a generated one, printed in the api-server's log); never baked into the image.
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
    airflow db migrate
    mkdir -p "$LAKE_ROOT" "$CLOUDTRAIL_ETL_INPUT"
    if [ -z "$(ls -A "$CLOUDTRAIL_ETL_INPUT")" ]; then
      python -m spark_jobs sample-data --out "$CLOUDTRAIL_ETL_INPUT"
    fi
    ;;
  api-server)
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
