#!/usr/bin/env bash
# Redial and BullMQ side by side, in one run, on this machine: the same workloads against the same
# receiver (a separate process). BullMQ runs twice: Redis without persistence, and Redis with
# appendonly yes + appendfsync everysec. Prints a table of ratios (Redial / BullMQ) and writes
# results/*.json. Redial runs on its embedded SQLite store and, unless POSTGRES=0, on PostgreSQL too
# (a throwaway server with PostgreSQL's default durability, started by scripts/throwaway-postgres),
# and then so do its PostgreSQL peers (pgpeers.js, each in fresh databases on that server):
# graphile-worker batched as its performance guide advises, graphile-worker with its defaults, and
# pg-boss, on the throughput workloads, with the server's CPU per job.
# The throughput workloads run ROUNDS times, alternating systems (Redial on SQLite, Redial on
# PostgreSQL, the PostgreSQL peers, BullMQ on both Redis setups in each round); the tables give each
# system's median and the median of the per-round ratios, with their range.
# Usage: bench/compare/run.sh   (JOBS=200000 CONC=100 ROUNDS=3 POSTGRES=1 by default)
set -euo pipefail
cd "$(dirname "$0")"
JOBS=${JOBS:-200000}
CONC=${CONC:-100}
ROUNDS=${ROUNDS:-3}
mkdir -p results

echo "== installing the peers (Redis from Debian; BullMQ, graphile-worker and pg-boss from npm) and building Redial's bench"
if ! command -v redis-server >/dev/null; then
  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
fi
[ -d node_modules/ioredis ] && [ -d node_modules/graphile-worker ] && [ -d node_modules/pg-boss ] \
  || npm install --no-audit --no-fund --silent --no-package-lock
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

start_redis() { # mode -> sets REDIS_PID, RPORT, RDIR
  RPORT=$(free_port)
  RDIR=$(mktemp -d)
  if [ "$1" = memory ]; then
    redis-server --port "$RPORT" --save '' --appendonly no --dir "$RDIR" --daemonize no >/dev/null &
  else
    redis-server --port "$RPORT" --save '' --appendonly yes --appendfsync everysec --dir "$RDIR" --daemonize no >/dev/null &
  fi
  REDIS_PID=$!
  sleep 0.5
}
stop_redis() {
  kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true; REDIS_PID=""
  rm -rf "$RDIR"
}
# Before each system's run: write back what the previous one left dirty (a build, an AOF file),
# so that nobody's fsyncs wait on someone else's data.
settle() { sync; sleep 1; }

rm -f results/*.json
if [ "${POSTGRES:-1}" != 0 ]; then
  eval "$(../../scripts/throwaway-postgres start --durable)"
  PGDIR=$REDIAL_TEST_PGDATA
  PG_URL=$DATABASE_URL
  unset DATABASE_URL
  echo "== PostgreSQL $(psql "$PG_URL" -Atc 'show server_version') for Redial (fsync and synchronous_commit on: every acknowledged write is durable)"
  echo "== on the same server: graphile-worker $(node -p 'require("./node_modules/graphile-worker/package.json").version'), pg-boss $(node -p 'require("./node_modules/pg-boss/package.json").version')"
fi
PG_PEERS="graphile-batched graphile-defaults pgboss"
echo "== BullMQ $(node -p 'require("./node_modules/bullmq/package.json").version') on Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')"
# Throughput (workloads 1-3) in ROUNDS rounds, Redial, its PostgreSQL peers and both BullMQ setups
# in turn within each round, so that each round's ratios compare runs made a few seconds apart on
# this noisy machine.
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round of $ROUNDS: Redial (embedded SQLite, synchronous=FULL: every acknowledged write is fsynced)"
  settle
  $BENCH --only enqueue,noop,http --jobs "$JOBS" --concurrency "$CONC" \
    --receiver-base "$BASE" --out "results/redial-round$round.json"
  if [ -n "$PGDIR" ]; then
    echo "== round $round of $ROUNDS: Redial (PostgreSQL; each workload in a fresh schema)"
    settle
    $BENCH --database-url "$PG_URL" --only enqueue,noop,http --jobs "$JOBS" --concurrency "$CONC" \
      --receiver-base "$BASE" --out "results/redial-pg-round$round.json"
    for peer in $PG_PEERS; do
      echo "== round $round of $ROUNDS: $peer (PostgreSQL; each workload in a fresh database)"
      settle
      node pgpeers.js "$PG_URL" "$JOBS" "$CONC" "$BASE" "$peer" > "results/$peer-round$round.json"
    done
  fi
  for mode in memory aof; do
    echo "== round $round of $ROUNDS: BullMQ, Redis $mode"
    settle
    start_redis "$mode"
    node bullmq.js "$RPORT" "$JOBS" "$CONC" "$BASE" throughput > "results/bullmq-$mode-round$round.json"
    stop_redis
  done
done

echo "== latency and retry scenarios: Redial (embedded SQLite)"
settle
$BENCH --only latency,retry --jobs "$JOBS" --concurrency "$CONC" \
  --receiver-base "$BASE" --out results/redial-rest.json
for mode in memory aof; do
  echo "== latency and retry scenarios: BullMQ, Redis $mode"
  settle
  start_redis "$mode"
  node bullmq.js "$RPORT" "$JOBS" "$CONC" "$BASE" rest > "results/bullmq-$mode-rest.json"
  stop_redis
done

if [ -n "$PGDIR" ]; then
  echo "== latency, retry and several-node scenarios: Redial (PostgreSQL)"
  settle
  $BENCH --database-url "$PG_URL" --only latency,retry,noop-nodes --jobs "$JOBS" \
    --concurrency "$CONC" --receiver-base "$BASE" --out results/redial-pg-rest.json
  ../../scripts/throwaway-postgres stop "$PGDIR"; PGDIR=""
fi

python3 - "$JOBS" "$CONC" "$ROUNDS" <<'PY'
import json, statistics, sys
jobs, conc, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def load(path):
    return {k: (v["value"] if isinstance(v, dict) else v) for k, v in json.load(open(path)).items()}
rest = load("results/redial-rest.json")
r_rounds = [load(f"results/redial-round{i}.json") for i in range(1, rounds + 1)]
peer_rest = {m: load(f"results/bullmq-{m}-rest.json") for m in ("memory", "aof")}
peer_rounds = {m: [load(f"results/bullmq-{m}-round{i}.json") for i in range(1, rounds + 1)] for m in ("memory", "aof")}
throughput = [
    ("enqueue, batches of 1000 (jobs/s)", "enqueue, batches of 1000 (durable)", "enqueue, batches of 1000"),
    (f"no-op, concurrency {conc} (jobs/s)", f"no-op jobs, concurrency {conc} (full path)", f"no-op jobs, concurrency {conc}"),
    (f"HTTP dispatch, concurrency {conc} (jobs/s)", f"HTTP dispatch to a loopback receiver, concurrency {conc}", f"HTTP dispatch, concurrency {conc}"),
]
others = [
    ("enqueue to first attempt p50, idle (ms)", "enqueue to first attempt p50, idle", "enqueue to first attempt p50, idle"),
    ("enqueue to first attempt p99, idle (ms)", "enqueue to first attempt p99, idle", "enqueue to first attempt p99, idle"),
    ("enqueue to first attempt p99, under load (ms)", "enqueue to first attempt p99, under load (no-op backlog draining)", "enqueue to first attempt p99, under load"),
    ("rate limit 100/s: wasted requests", "rate limit 100/s: wasted requests (429/503) for 1000 jobs", "rate limit 100/s: wasted requests (429/503) for 1000 jobs"),
    ("rate limit 100/s: dead-lettered", "rate limit 100/s: dead-lettered", "rate limit 100/s: dead-lettered"),
    ("rate limit 100/s: drain time (s)", "rate limit 100/s: drain time", "rate limit 100/s: drain time"),
    ("2 s outage: wasted requests", "2 s outage: wasted requests (429/503) for 1000 jobs", "2 s outage: wasted requests (429/503) for 1000 jobs"),
    ("2 s outage: dead-lettered", "2 s outage: dead-lettered", "2 s outage: dead-lettered"),
    ("2 s outage: drain time (s)", "2 s outage: drain time", "2 s outage: drain time"),
]
nan = float("nan")
def div(a, b):
    return a / b if (a is not None and b) else nan
out = {}
print()
print(f"Throughput: median of {rounds} rounds; ratio = median of the rounds' ratios [lowest-highest]")
print(f"{'workload':<44} {'Redial':>10} {'BullMQ mem':>11} {'ratio':>18} {'BullMQ AOF':>11} {'ratio':>18}")
for label, rk, pk in throughput:
    rv = [x.get(rk) for x in r_rounds]
    line = f"{label:<44} {statistics.median(rv):>10.1f}"
    entry = {"redial": rv}
    for m in ("memory", "aof"):
        pv = [x.get(pk) for x in peer_rounds[m]]
        ratios = [div(a, b) for a, b in zip(rv, pv)]
        med = statistics.median(ratios)
        line += f" {statistics.median(pv):>11.1f} {med:>6.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"
        entry[m] = {"bullmq": pv, "ratios": ratios, "median_ratio": med}
    out[label] = entry
    print(line)
print()
print(f"{'workload':<44} {'Redial':>10} {'BullMQ mem':>11} {'ratio':>7} {'BullMQ AOF':>11} {'ratio':>7}")
for label, rk, pk in others:
    rv = rest.get(rk)
    line = f"{label:<44} {rv if rv is not None else nan:>10.1f}"
    for m in ("memory", "aof"):
        pv = peer_rest[m].get(pk)
        line += f" {pv if pv is not None else nan:>11.1f} {div(rv, pv):>7.2f}"
        out.setdefault(label, {})[m] = {"redial": rv, "bullmq": pv, "ratio": div(rv, pv)}
    print(line)
try:
    pg_rounds = [load(f"results/redial-pg-round{i}.json") for i in range(1, rounds + 1)]
    pg_rest = load("results/redial-pg-rest.json")
except FileNotFoundError:
    pg_rounds = None
if pg_rounds:
    print()
    print(f"Redial on PostgreSQL. Throughput: median of {rounds} rounds; ratio = median of the rounds' ratios [lowest-highest]")
    print(f"{'workload':<44} {'Redial PG':>10} {'BullMQ mem':>11} {'ratio':>18} {'BullMQ AOF':>11} {'ratio':>18} {'PG/SQLite':>9}")
    for label, rk, pk in throughput:
        rv = [x.get(rk) for x in pg_rounds]
        line = f"{label:<44} {statistics.median(rv):>10.1f}"
        entry = out.setdefault(label, {})
        for m in ("memory", "aof"):
            pv = [x.get(pk) for x in peer_rounds[m]]
            ratios = [div(a, b) for a, b in zip(rv, pv)]
            med = statistics.median(ratios)
            line += f" {statistics.median(pv):>11.1f} {med:>6.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"
            entry[m + "_postgres"] = {"redial": rv, "bullmq": pv, "ratios": ratios, "median_ratio": med}
        sqlite = statistics.median([div(a, x.get(rk)) for a, x in zip(rv, r_rounds)])
        line += f" {sqlite:>9.2f}"
        print(line)
    print(f"{'workload':<44} {'Redial PG':>10} {'BullMQ mem':>11} {'ratio':>7} {'BullMQ AOF':>11} {'ratio':>7} {'PG/SQLite':>9}")
    for label, rk, pk in others:
        rv = pg_rest.get(rk)
        line = f"{label:<44} {rv if rv is not None else nan:>10.1f}"
        for m in ("memory", "aof"):
            pv = peer_rest[m].get(pk)
            line += f" {pv if pv is not None else nan:>11.1f} {div(rv, pv):>7.2f}"
            out.setdefault(label, {})[m + "_postgres"] = {"redial": rv, "bullmq": pv, "ratio": div(rv, pv)}
        line += f" {div(rv, rest.get(rk)):>9.2f}"
        print(line)
if pg_rounds:
    # Redial on PostgreSQL and its PostgreSQL peers (pgpeers.js), same server, same rounds.
    peers = [("graphile-batched", "gw batched"), ("graphile-defaults", "gw default"), ("pgboss", "pg-boss")]
    pp_rounds = {p: [load(f"results/{p}-round{i}.json") for i in range(1, rounds + 1)] for p, _ in peers}
    print()
    print(f"Redial and its PostgreSQL peers, same server. Throughput: median of {rounds} rounds; ratio = Redial / peer, median of the rounds' ratios [lowest-highest]")
    head = f"{'workload':<44} {'Redial PG':>10}"
    for _, name in peers:
        head += f" {name:>11} {'ratio':>18}"
    print(head)
    for label, rk, pk in throughput:
        rv = [x.get(rk) for x in pg_rounds]
        line = f"{label:<44} {statistics.median(rv):>10.1f}"
        entry = out.setdefault(label, {})
        for p, _ in peers:
            pv = [x.get(pk) for x in pp_rounds[p]]
            ratios = [div(a, b) for a, b in zip(rv, pv)]
            med = statistics.median(ratios)
            line += f" {statistics.median(pv):>11.1f} {med:>6.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"
            entry[p] = {"redial_postgres": rv, "peer": pv, "ratios": ratios, "median_ratio": med}
        print(line)
    # Redial reads the server's CPU on its no-op drain only (every `postgres` process on this machine).
    for label, pk in [("PG server CPU per job, enqueue (us)", "enqueue: PostgreSQL server CPU per job"),
                      ("PG server CPU per job, no-op drain (us)", "no-op: PostgreSQL server CPU per job"),
                      ("PG server CPU per job, HTTP dispatch (us)", "HTTP dispatch: PostgreSQL server CPU per job")]:
        mine = [v for v in (x.get(pk) for x in pg_rounds) if v is not None]
        cell = f"{statistics.median(mine):>10.1f}" if mine else f"{'':>10}"
        line = f"{label:<44} {cell}"
        for p, _ in peers:
            pv = [x.get(pk) for x in pp_rounds[p]]
            known = [v for v in pv if v is not None]
            med = statistics.median(known) if known else nan
            line += f" {med:>11.1f} {'':>18}"
            out.setdefault(label, {})[p] = pv
        print(line)
    print("gw batched: graphile-worker with localQueue.size 500, completeJobBatchDelay and failJobBatchDelay 0, maxPoolSize concurrency + 1;")
    print("gw default: graphile-worker with only its concurrency set; pg-boss: 4 workers of batchSize 250 polling every 0.5 s")
    print("(its least), which bounds its drain to 4 x 250 jobs per 0.5 s = 2,000 jobs/s. Server CPU: the cluster's processes, from /proc.")
json.dump(out, open("results/ratios.json", "w"), indent=2)
print("\nratio = Redial / BullMQ: above 1 is better for throughput; below 1 is better for latency, wasted requests and drain time.")
PY
