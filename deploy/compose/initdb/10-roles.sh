#!/usr/bin/env bash
# Run by the postgres image once, when its data volume is new, as its superuser over the local socket: makes
# the roles and databases of roles.psql beside this file. The superuser is for this and nothing else; no
# service of compose.yaml logs in as it.
set -eo pipefail  # not -u: the image sources a script that lost its executable bit
for var in DAGSTER_DB_PASSWORD SCANWATCH_WRITER_PASSWORD SCANWATCH_READER_PASSWORD SCANWATCH_GRAFANA_DB_PASSWORD; do
  if [ -z "${!var:-}" ]; then
    echo "deploy/compose/initdb: $var is empty; set it in deploy/.env" >&2
    exit 1
  fi
done
psql -X -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  -f "$(dirname "${BASH_SOURCE[0]}")/roles.psql"
