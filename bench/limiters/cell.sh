#!/usr/bin/env bash
# One cell of the limiter matrix, from outside: a fresh `redial serve` (embedded SQLite, its
# defaults) and a receiver.py limiter on loopback; JOBS GET jobs enqueued at once through the API
# (batches of 500); the drain is timed from the first enqueue to every job completed or dead
# (at most 180 s). Prints one line: drain, refused (answers 429 or 503), done, and the endpoint's
# forecast 2 s after the enqueue (remaining seconds, and what held it then).
# Usage: bench/limiters/cell.sh REDIAL_BINARY JOBS RATE BURST MODE   (MODE: see receiver.py;
#        late:S starts the receiver S seconds late, connection refused until then)
set -u
bin=$1; jobs=$2; rate=$3; burst=$4; mode=$5
here="$(cd "$(dirname "$0")" && pwd)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
d=$(mktemp -d); port=$(free_port); api=$(free_port)
if [[ $mode == late:* ]]; then
  (sleep "${mode#late:}"; exec python3 "$here/receiver.py" "$port" 1 1 ok) & rpid=$!
else
  python3 "$here/receiver.py" "$port" "$rate" "$burst" "$mode" & rpid=$!
fi
"$bin" serve --data-dir "$d" --listen "127.0.0.1:$api" --allow-private-networks >"$d/log" 2>&1 & spid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$api/readyz" >/dev/null && break; sleep 0.1; done
python3 - "$api" "$port" "$jobs" <<'PY'
import json, sys, time, urllib.parse, urllib.request
api, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = f"http://127.0.0.1:{api}"
jobs = [{"request": {"method": "GET", "url": f"http://127.0.0.1:{port}/x/{i}"}} for i in range(n)]
t0 = time.monotonic()
for k in range(0, n, 500):
    req = urllib.request.Request(f"{base}/v1/jobs/batch", data=json.dumps({"jobs": jobs[k:k + 500]}).encode(),
                                 headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()
forecast = None
while True:
    s = json.load(urllib.request.urlopen(f"{base}/v1/stats"))
    done = sum(c["count"] for c in s["queues"] if c["state"] in ("completed", "dead") and c["queue"] == "default")
    el = time.monotonic() - t0
    if forecast is None and el >= 2.0:
        try:
            name = urllib.parse.quote(f"http://127.0.0.1:{port}", safe="")
            e = json.load(urllib.request.urlopen(f"{base}/v1/endpoints/{name}"))
            forecast = (e.get("forecast") or {}).get("drain_seconds"), e.get("holding")
            forecast = (round(el, 1), forecast[0], forecast[1])
        except Exception as x:
            forecast = (round(el, 1), None, f"no forecast: {x}")
    if done >= n or el > 180:
        break
    time.sleep(0.05)
try:
    st = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats"))
except Exception:
    st = {}
refused = sum(v[1] for v in st.values())
f_at, f_left, f_why = forecast or (None, None, None)
f_total = None if f_left is None else round(f_at + f_left, 1)
print(json.dumps({"drain": round(el, 1), "refused": refused, "done": done, "jobs": n,
                  "forecast_total": f_total, "held_by": f_why}))
PY
kill "$spid" "$rpid" 2>/dev/null
pkill -f "receiver.py $port " 2>/dev/null
wait "$spid" 2>/dev/null
rm -rf "$d"
