#!/usr/bin/env bash
# What one update of a job's row costs on PostgreSQL, by what the table carries: every index
# as Redial's schema has it, or the two that no update changes, with and without room on the
# page (rows.sql says how). Starts a throwaway server (durable, as the benchmarks are), makes
# the schema with `redial migrate`, runs rows.sql, stops the server.
#   bench/pg-row-cost/run.sh        (builds target/release/redial first)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p redial
eval "$(scripts/throwaway-postgres start --durable)"
trap 'scripts/throwaway-postgres stop "$REDIAL_TEST_PGDATA"' EXIT
psql -qX "$DATABASE_URL" -c 'CREATE DATABASE row_cost'
url="${DATABASE_URL%/*}/row_cost"
target/release/redial migrate --database-url "$url" >/dev/null
psql -qX "$url" -f bench/pg-row-cost/rows.sql
