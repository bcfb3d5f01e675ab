#!/usr/bin/env bash
# Redial and BullMQ side by side, in one run, on this machine: the same workloads against the same
# receiver (a separate process). BullMQ runs twice: Redis without persistence, and Redis with
# appendonly yes + appendfsync everysec. Prints a table of ratios (Redial / BullMQ) and writes
# results/*.json. Redial runs on its embedded SQLite store and, unless POSTGRES=0, on PostgreSQL too
# (a throwaway server with PostgreSQL's default durability, started by scripts/throwaway-postgres).
# Usage: bench/compare/run.sh   (JOBS=50000 CONC=100 POSTGRES=1 by default)
set -euo pipefail
cd "$(dirname "$0")"
JOBS=${JOBS:-50000}
CONC=${CONC:-100}
mkdir -p results

echo "== installing the peer (Redis from Debian, BullMQ from npm) and building Redial's bench"
if ! command -v redis-server >/dev/null; then
  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
fi
[ -d node_modules/ioredis ] || npm install --no-audit --no-fund --silent --no-package-lock
(cd ../.. && cargo build --release -q -p redial-bench)
BENCH=../../target/release/redial-bench

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RECV_PORT=$(free_port)
$BENCH --serve-receiver "$RECV_PORT" 2>/dev/null &
RECV_PID=$!
REDIS_PID=""
PGDIR=""
cleanup() {
  kill "$RECV_PID" 2>/dev/null || true
  [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null || true
  [ -n "$PGDIR" ] && ../../scripts/throwaway-postgres stop "$PGDIR" || true
}
trap cleanup EXIT
sleep 0.5
BASE="http://127.0.0.1:$RECV_PORT"

echo "== Redial (embedded SQLite, synchronous=FULL: every acknowledged write is fsynced)"
$BENCH --only enqueue,noop,http,latency,retry --jobs "$JOBS" --concurrency "$CONC" \
  --receiver-base "$BASE" --out results/redial.json

rm -f results/redial-pg.json
if [ "${POSTGRES:-1}" != 0 ]; then
  eval "$(../../scripts/throwaway-postgres start --durable)"
  PGDIR=$REDIAL_TEST_PGDATA
  echo "== Redial on PostgreSQL $(psql "$DATABASE_URL" -Atc 'show server_version') (fsync and synchronous_commit on: every acknowledged write is durable)"
  $BENCH --database-url "$DATABASE_URL" --only enqueue,noop,http,latency,retry --jobs "$JOBS" \
    --concurrency "$CONC" --receiver-base "$BASE" --out results/redial-pg.json
  ../../scripts/throwaway-postgres stop "$PGDIR"; PGDIR=""
fi

for mode in memory aof; do
  echo "== BullMQ $(node -p 'require("./node_modules/bullmq/package.json").version') on Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') ($mode)"
  RPORT=$(free_port)
  RDIR=$(mktemp -d)
  if [ "$mode" = memory ]; then
    redis-server --port "$RPORT" --save '' --appendonly no --dir "$RDIR" --daemonize no >/dev/null &
  else
    redis-server --port "$RPORT" --save '' --appendonly yes --appendfsync everysec --dir "$RDIR" --daemonize no >/dev/null &
  fi
  REDIS_PID=$!
  sleep 0.5
  node bullmq.js "$RPORT" "$JOBS" "$CONC" "$BASE" > "results/bullmq-$mode.json"
  kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true; REDIS_PID=""
  rm -rf "$RDIR"
done

python3 - "$JOBS" "$CONC" <<'PY'
import json, sys
jobs, conc = sys.argv[1], sys.argv[2]
r = {k: v["value"] for k, v in json.load(open("results/redial.json")).items()}
peers = {m: json.load(open(f"results/bullmq-{m}.json")) for m in ("memory", "aof")}
rows = [
    ("enqueue, batches of 1000 (jobs/s)", "enqueue, batches of 1000 (durable)", "enqueue, batches of 1000", True),
    (f"no-op, concurrency {conc} (jobs/s)", f"no-op jobs, concurrency {conc} (full path)", f"no-op jobs, concurrency {conc}", True),
    (f"HTTP dispatch, concurrency {conc} (jobs/s)", f"HTTP dispatch to a loopback receiver, concurrency {conc}", f"HTTP dispatch, concurrency {conc}", True),
    ("enqueue to first attempt p50, idle (ms)", "enqueue to first attempt p50, idle", "enqueue to first attempt p50, idle", False),
    ("enqueue to first attempt p99, idle (ms)", "enqueue to first attempt p99, idle", "enqueue to first attempt p99, idle", False),
    ("enqueue to first attempt p99, under load (ms)", "enqueue to first attempt p99, under load (no-op backlog draining)", "enqueue to first attempt p99, under load", False),
    ("rate limit 100/s: wasted requests", "rate limit 100/s: wasted requests (429/503) for 1000 jobs", "rate limit 100/s: wasted requests (429/503) for 1000 jobs", False),
    ("rate limit 100/s: dead-lettered", "rate limit 100/s: dead-lettered", "rate limit 100/s: dead-lettered", False),
    ("rate limit 100/s: drain time (s)", "rate limit 100/s: drain time", "rate limit 100/s: drain time", False),
    ("2 s outage: wasted requests", "2 s outage: wasted requests (429/503) for 1000 jobs", "2 s outage: wasted requests (429/503) for 1000 jobs", False),
    ("2 s outage: dead-lettered", "2 s outage: dead-lettered", "2 s outage: dead-lettered", False),
    ("2 s outage: drain time (s)", "2 s outage: drain time", "2 s outage: drain time", False),
]
print()
print(f"{'workload':<48} {'Redial':>10} {'BullMQ mem':>11} {'ratio':>7} {'BullMQ AOF':>11} {'ratio':>7}")
out = {}
for label, rk, pk, higher_better in rows:
    rv = r.get(rk)
    line = f"{label:<48} {rv if rv is not None else float('nan'):>10.1f}"
    for m in ("memory", "aof"):
        pv = peers[m].get(pk)
        ratio = (rv / pv) if (rv is not None and pv) else float("nan")
        line += f" {pv if pv is not None else float('nan'):>11.1f} {ratio:>7.2f}"
        out.setdefault(label, {})[m] = {"redial": rv, "bullmq": pv, "ratio": ratio}
    print(line)
try:
    pg = {k: v["value"] for k, v in json.load(open("results/redial-pg.json")).items()}
except FileNotFoundError:
    pg = None
if pg:
    print()
    print(f"{'Redial on PostgreSQL':<48} {'Redial PG':>10} {'BullMQ mem':>11} {'ratio':>7} {'BullMQ AOF':>11} {'ratio':>7} {'PG/SQLite':>9}")
    for label, rk, pk, higher_better in rows:
        rv = pg.get(rk)
        line = f"{label:<48} {rv if rv is not None else float('nan'):>10.1f}"
        for m in ("memory", "aof"):
            pv = peers[m].get(pk)
            ratio = (rv / pv) if (rv is not None and pv) else float("nan")
            line += f" {pv if pv is not None else float('nan'):>11.1f} {ratio:>7.2f}"
            out.setdefault(label, {})[m + "_postgres"] = {"redial": rv, "bullmq": pv, "ratio": ratio}
        sv = r.get(rk)
        line += f" {(rv / sv) if (rv is not None and sv) else float('nan'):>9.2f}"
        print(line)
json.dump(out, open("results/ratios.json", "w"), indent=2)
print("\nratio = Redial / BullMQ: above 1 is better for throughput; below 1 is better for latency, wasted requests and drain time.")
PY
