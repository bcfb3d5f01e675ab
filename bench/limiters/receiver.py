"""Limiters and outages as real counterparts speak, for bench/limiters/cell.sh: a plain
standard-library HTTP server on 127.0.0.1, one process per cell, so that Redial is measured
from outside as users run it (`redial serve`, the API, real HTTP over loopback).

Usage: receiver.py PORT RATE BURST MODE

MODE:
  ra1        token bucket (GCRA) of RATE a second holding BURST; a refusal is a 429 with
             Retry-After in whole seconds until room comes back, rounded up (1 for 20 ms)
  bare       the same bucket, bare 429s (nginx limit_req with limit_req_status 429, HAProxy)
  bare503    the same bucket, bare 503s (nginx limit_req as shipped)
  fw1        fixed windows of RATE a second from the first request; 429 with Retry-After in
             whole seconds to the window's end, rounded up (express-rate-limit)
  fwq        the same, with draft-6 RateLimit-Limit/-Remaining/-Reset on every answer
  sl         a sliding log (moving window) of RATE a second: a request goes when fewer than
             RATE went in the second before it; bare 429s (a framework limiter, headers off)
  slq        the same, with X-RateLimit-Limit/-Remaining/-Reset (epoch seconds, the oldest
             request's expiry rounded up, as Python's flask-limiter says it) on every answer and
             Retry-After (whole seconds, truncated) on a 429
  rand503:P  no limit; each request gets a bare 503 with probability P
  rand503once:P  the same, on a path's first request only (its retry succeeds)
  down503:S  bare 503s for S seconds after the receiver started, then 200s
  ok         200s

GET /stats answers {second: [accepted, refused]} since the first request.
"""

import json
import math
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, RATE, BURST, MODE = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
START = time.monotonic()
lock = threading.Lock()
state = {"tat": 0.0, "t0": None}
log = []  # a sliding log's accepted requests, epoch seconds, oldest first
per_second = {}
seen_paths = set()


def count(now, ok):
    if state["t0"] is None:
        state["t0"] = now
    second = str(int(now - state["t0"]))
    per_second.setdefault(second, [0, 0])[0 if ok else 1] += 1


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, headers=()):
        body = b"ok" if status == 200 else b""
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/stats":
            body = json.dumps(per_second).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        now = time.monotonic()
        if MODE == "ok":
            with lock:
                count(now, True)
            return self.answer(200)
        if MODE.startswith("down503:"):
            down = now - START < float(MODE.split(":")[1])
            with lock:
                count(now, not down)
            return self.answer(503 if down else 200)
        if MODE.startswith("rand503"):
            p = float(MODE.split(":")[1])
            with lock:
                first = self.path not in seen_paths
                seen_paths.add(self.path)
                fail = random.random() < p and (first or not MODE.startswith("rand503once"))
                count(now, not fail)
            return self.answer(503 if fail else 200)
        if MODE in ("fw1", "fwq"):
            with lock:
                count(now, True)  # corrected below when refused
                elapsed = now - state["t0"]
                second = str(int(elapsed))
                ok = per_second[second][0] <= int(RATE)
                if not ok:
                    per_second[second][0] -= 1
                    per_second[second][1] += 1
                left = max(0, int(RATE) - per_second[second][0])
            reset = max(1, math.ceil(int(elapsed) + 1 - elapsed))
            headers = []
            if MODE == "fwq":
                headers += [("ratelimit-limit", str(int(RATE))), ("ratelimit-remaining", str(left)),
                            ("ratelimit-reset", str(reset))]
            if not ok:
                headers.append(("retry-after", str(reset)))
            return self.answer(200 if ok else 429, headers)
        if MODE in ("sl", "slq"):
            wall = time.time()
            with lock:
                while log and log[0] <= wall - 1.0:
                    log.pop(0)
                ok = len(log) < int(RATE)
                if ok:
                    log.append(wall)
                count(now, ok)
                left = int(RATE) - len(log)
                reset = int(log[0] + 1.0) + 1 if log else int(wall) + 1
            headers = []
            if MODE == "slq":
                headers += [("x-ratelimit-limit", str(int(RATE))), ("x-ratelimit-remaining", str(left)),
                            ("x-ratelimit-reset", str(reset))]
                if not ok:
                    headers.append(("retry-after", str(max(0, int(reset - wall)))))
            return self.answer(200 if ok else 429, headers)
        with lock:
            interval = 1.0 / RATE
            earliest = state["tat"] - interval * (BURST - 1)
            ok = earliest <= now
            if ok:
                state["tat"] = max(state["tat"], now) + interval
            count(now, ok)
        if ok:
            return self.answer(200)
        if MODE == "bare503":
            return self.answer(503)
        if MODE == "ra1":
            return self.answer(429, [("retry-after", str(max(1, math.ceil(earliest - now))))])
        return self.answer(429)


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
