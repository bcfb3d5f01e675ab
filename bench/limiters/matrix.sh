#!/usr/bin/env bash
# The limiter matrix from outside (issue 54), two Redial binaries side by side, cell by cell
# (each cell runs both, one after the other), and beside them what `redial simulate` (the second
# binary's) predicts for the same limiter: a markdown table of drain / ideal, refused / jobs and
# the forecast taken 2 s after the enqueue, and whether the model agrees with the second binary
# (drain and refused within 15%, or 10 requests). Release binaries:
#   cargo build --release -p redial && cp target/release/redial /tmp/redial-new
#   bench/limiters/matrix.sh /tmp/redial-old /tmp/redial-new
# About twelve minutes. Needs python3 and curl.
set -u
old=$1; new=$2
here="$(cd "$(dirname "$0")" && pwd)"
# name | jobs rate burst mode | ideal drain (s) | the workload's endpoint for `redial simulate`
cells=(
  "nginx limit_req 50/s burst 10, bare 503s|1000 50 10 bare503|19.8|limit = { kind = \"token_bucket\", rate = \"50/s\", burst = 10, status = 503 }"
  "leaky bucket 50/s burst 10, bare 429s|1000 50 10 bare|19.8|limit = { kind = \"token_bucket\", rate = \"50/s\", burst = 10 }"
  "leaky bucket 50/s burst 10, Retry-After rounded up to 1 s|600 50 10 ra1|11.8|limit = { kind = \"token_bucket\", rate = \"50/s\", burst = 10, retry_after = true }"
  "token bucket 50/s burst 50, Retry-After rounded up to 1 s|600 50 50 ra1|11.0|limit = { kind = \"token_bucket\", rate = \"50/s\", burst = 50, retry_after = true }"
  "fixed windows 50/s, Retry-After in whole seconds|1000 50 1 fw1|20.0|limit = { kind = \"fixed_window\", limit = 50, window = \"1s\", retry_after = true, whole_seconds = true }"
  "fixed windows 50/s, draft-6 RateLimit headers and Retry-After|1000 50 1 fwq|20.0|limit = { kind = \"fixed_window\", limit = 50, window = \"1s\", retry_after = true, quota_headers = true, whole_seconds = true }"
  "sliding log 50/s, bare 429s|600 50 1 sl|12.0|limit = { kind = \"sliding_log\", limit = 50, window = \"1s\" }"
  "sliding log 50/s, quota headers with the reset in epoch seconds (flask-limiter)|600 50 1 slq|12.0|limit = { kind = \"sliding_log\", limit = 50, window = \"1s\", retry_after = true, quota_headers = true, whole_seconds = true }"
  "random bare 503s on half the first calls (no limit)|1000 1 1 rand503once:0.5|-|[[endpoint.failure]]
answer = \"503\"
ratio = 0.5
repeat = \"once\""
  "8 s of bare 503s, then 200s|300 1 1 down503:8|8.0|[[endpoint.outage]]
from = \"0s\"
until = \"8s\"
answer = \"503\""
  "8 s of connection refused, then 200s|300 1 1 late:8|8.0|[[endpoint.outage]]
from = \"0s\"
until = \"8s\"
answer = \"connection_refused\""
)
echo "| cell | $(basename "$old"): drain, refused, forecast at 2 s | $(basename "$new"): drain, refused, forecast at 2 s | simulated: drain, refused | model agrees | ideal |"
echo "| --- | --- | --- | --- | --- | --- |"
for cell in "${cells[@]}"; do
  IFS='|' read -r name args ideal workload <<< "$cell"
  # The workload's last field may span lines: take it from the cell whole.
  workload="${cell#*|*|*|}"
  row="| $name |"
  outs=()
  for bin in "$old" "$new"; do
    # shellcheck disable=SC2086
    out=$("$here/cell.sh" "$bin" $args | tail -n 1)
    outs+=("$out")
    row="$row $(python3 -c 'import json,sys
o=json.loads(sys.argv[1]); ideal=sys.argv[2]
ratio = "" if ideal == "-" else " (%.2fx)" % (o["drain"] / float(ideal))
f = "-" if o["forecast_total"] is None else "%.1f s" % o["forecast_total"]
done = "" if o["done"] == o["jobs"] else ", %d of %d done" % (o["done"], o["jobs"])
print("%.1f s%s, %d (%.1f%%)%s, %s |" % (o["drain"], ratio, o["refused"], 100.0 * o["refused"] / o["jobs"], done, f))' "$out" "$ideal")"
  done
  jobs=${args%% *}
  w=$(mktemp)
  printf '[[endpoint]]\nname = "x"\njobs = %s\nmethod = "GET"\nlatency = "1ms"\n%s\n' "$jobs" "$workload" > "$w"
  sim=$("$new" simulate --workload "$w" --seed 7 --json 2>&1)
  rm -f "$w"
  row="$row $(python3 -c 'import json,sys
try:
    e = json.loads(sys.argv[1])["runs"][0]["endpoints"][0]
except Exception as x:
    print("simulate failed: %s | - |" % str(x)[:60]); sys.exit()
real = json.loads(sys.argv[2])
d = (e["drain_ms"] or 0) / 1000.0
near = lambda a, b, slack: abs(a - b) <= max(0.15 * max(a, b), slack)
ok = near(d, real["drain"], 0) and near(e["refused"], real["refused"], 10)
print("%.1f s, %d | %s |" % (d, e["refused"], "yes" if ok else "no"))' "$sim" "${outs[1]}")"
  echo "$row $ideal s |"
done
