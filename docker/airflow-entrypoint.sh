#!/usr/bin/env bash
# The command of every Airflow service in docker-compose.yml:
#
#   airflow-entrypoint.sh init               once, before the others: migrate the Postgres metadata DB, make the
#                                            lake and landing folders, land the sample logs if the landing is empty
#   airflow-entrypoint.sh api-server|scheduler|dag-processor|triggerer
#
# The login (SimpleAuthManager) is the user in AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS with the password
# $AIRFLOW_ADMIN_PASSWORD from .env, written where the API server reads it; never baked into the image.
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
    umask 077
    python -c 'import json, os; user = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(":")[0]; \
print(json.dumps({user: os.environ["AIRFLOW_ADMIN_PASSWORD"]}))' > "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"
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
