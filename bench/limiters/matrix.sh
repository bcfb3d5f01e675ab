#!/usr/bin/env bash
# The limiter matrix from outside (issue 54), two Redial binaries side by side, cell by cell
# (each cell runs both, one after the other): a markdown table of drain / ideal, refused / jobs
# and the forecast taken 2 s after the enqueue, for each. Release binaries:
#   cargo build --release -p redial && cp target/release/redial /tmp/redial-new
#   bench/limiters/matrix.sh /tmp/redial-old /tmp/redial-new
# About ten minutes. Needs python3 and curl.
set -u
old=$1; new=$2
here="$(cd "$(dirname "$0")" && pwd)"
# name | jobs rate burst mode | ideal drain (s)
cells=(
  "nginx limit_req 50/s burst 10, bare 503s|1000 50 10 bare503|19.8"
  "leaky bucket 50/s burst 10, bare 429s|1000 50 10 bare|19.8"
  "leaky bucket 50/s burst 10, Retry-After rounded up to 1 s|600 50 10 ra1|11.8"
  "token bucket 50/s burst 50, Retry-After rounded up to 1 s|600 50 50 ra1|11.0"
  "fixed windows 50/s, Retry-After in whole seconds|1000 50 1 fw1|20.0"
  "fixed windows 50/s, draft-6 RateLimit headers and Retry-After|1000 50 1 fwq|20.0"
  "random bare 503s on half the first calls (no limit)|1000 1 1 rand503once:0.5|-"
  "8 s of bare 503s, then 200s|300 1 1 down503:8|8.0"
  "8 s of connection refused, then 200s|300 1 1 late:8|8.0"
)
echo "| cell | $(basename "$old"): drain, refused, forecast at 2 s | $(basename "$new"): drain, refused, forecast at 2 s | ideal |"
echo "| --- | --- | --- | --- |"
for cell in "${cells[@]}"; do
  IFS='|' read -r name args ideal <<< "$cell"
  row="| $name |"
  for bin in "$old" "$new"; do
    # shellcheck disable=SC2086
    out=$("$here/cell.sh" "$bin" $args | tail -n 1)
    row="$row $(python3 -c 'import json,sys
o=json.loads(sys.argv[1]); ideal=sys.argv[2]
ratio = "" if ideal == "-" else " (%.2fx)" % (o["drain"] / float(ideal))
f = "-" if o["forecast_total"] is None else "%.1f s" % o["forecast_total"]
done = "" if o["done"] == o["jobs"] else ", %d of %d done" % (o["done"], o["jobs"])
print("%.1f s%s, %d (%.1f%%)%s, %s |" % (o["drain"], ratio, o["refused"], 100.0 * o["refused"] / o["jobs"], done, f))' "$out" "$ideal")"
  done
  echo "$row $ideal s |"
done
