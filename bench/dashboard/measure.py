#!/usr/bin/env python3
"""What one refresh of each dashboard page costs the server with a large store: 900,000 scheduled
jobs and 100,000 dead letters in a fresh SQLite database, then each page's API calls timed
(median of 10, sequential, on loopback).

Usage: bench/dashboard/measure.py [path-to-redial]   (default target/release/redial)
"""
import json, os, shutil, socket, statistics, subprocess, sys, tempfile, threading, time, urllib.parse, urllib.request

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/redial"
SCHEDULED = int(os.environ.get("SCHEDULED", 900_000))
DEAD = int(os.environ.get("DEAD", 100_000))
BATCH = 1000

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read() or b"null")

def main():
    tmp = tempfile.mkdtemp()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDIAL_")}
    env["REDIAL_LOG"] = "warn"
    server = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", tmp + "/data"],
                              env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                call(base, "GET", "/healthz"); break
            except Exception:
                time.sleep(0.05)
        started = time.time()
        n = 0
        while n < SCHEDULED:
            jobs = [{"id": f"s{n + i}", "run_at": "2999-01-01T00:00:00Z",
                     "request": {"method": "POST", "url": f"https://api{(n + i) % 50}.example.com/x"}}
                    for i in range(BATCH)]
            call(base, "POST", "/v1/jobs/batch", {"jobs": jobs}); n += BATCH
        n = 0
        while n < DEAD:
            # Refused by the network policy: dead at once, as `permanent`.
            jobs = [{"id": f"d{n + i}", "request": {"method": "POST", "url": f"http://127.0.0.{1 + (n + i) % 20}:9/x"}}
                    for i in range(BATCH)]
            call(base, "POST", "/v1/jobs/batch", {"jobs": jobs}); n += BATCH
        while call(base, "GET", "/v1/dead-letters/groups")["total"] < DEAD:
            time.sleep(0.5)
        print(f"loaded {SCHEDULED:,} scheduled and {DEAD:,} dead in {time.time() - started:.0f} s", flush=True)
        if os.environ.get("KEEP"):
            print(f"serving at {base} (pid {server.pid}) until killed", flush=True)
            server.wait()
        causes = call(base, "GET", "/v1/dead-letters/patterns")
        cause = causes["patterns"][0]["pattern"]
        print(f"{causes['count']} reason patterns; the largest, {cause!r}, stands for "
              f"{causes['patterns'][0]['reasons']} reasons", flush=True)
        pages = {
            "overview": ["/v1/stats", "/v1/alerts", "/v1/queues", "/v1/series"],
            "dead letters (triage)": ["/v1/dead-letters/groups"],
            "dead letters, one group": ["/v1/dead-letters/groups?category=permanent&endpoint=http%3A%2F%2F127.0.0.1%3A9"],
            "dead letters, created in a time range": ["/v1/dead-letters/groups?since=2000-01-01T00:00:00Z"],
            "dead letters by cause (reason patterns)": ["/v1/dead-letters/patterns"],
            "dead letters, one cause": ["/v1/dead-letters/groups?pattern=" + urllib.parse.quote(cause)],
            "jobs (one cause, first page)": ["/v1/jobs?limit=50&pattern=" + urllib.parse.quote(cause)],
            "jobs (dead, first page)": ["/v1/jobs?state=dead&limit=50"],
            "jobs (all, first page)": ["/v1/jobs?limit=50"],
            "endpoints": ["/v1/endpoints"],
        }
        for page, paths in pages.items():
            times = []
            for _ in range(10):
                t = time.perf_counter()
                for p in paths:
                    call(base, "GET", p)
                times.append((time.perf_counter() - t) * 1000)
            print(f"{page}: median {statistics.median(times):.1f} ms, max {max(times):.1f} ms")
        # Does a dashboard polling the overview hold up writes? One enqueue at a time, timed,
        # first alone, then while another thread reads /v1/stats back to back.
        def enqueue_ms(tag):
            times = []
            for i in range(30):
                t = time.perf_counter()
                call(base, "POST", "/v1/jobs", {"id": f"{tag}{i}", "run_at": "2999-01-01T00:00:00Z",
                                                "request": {"method": "POST", "url": "https://api.example.com/y"}})
                times.append((time.perf_counter() - t) * 1000)
            return statistics.median(times), max(times)
        alone = enqueue_ms("alone")
        stop = threading.Event()
        def poll():
            while not stop.is_set():
                call(base, "GET", "/v1/stats")
        poller = threading.Thread(target=poll); poller.start()
        time.sleep(1)
        busy = enqueue_ms("busy")
        stop.set(); poller.join()
        print(f"one enqueue: median {alone[0]:.1f} ms (max {alone[1]:.1f}) alone, "
              f"{busy[0]:.1f} ms (max {busy[1]:.1f}) while the overview is read back to back")
        # Last: what opening the store costs at this size (the counts start from a scan of every job).
        server.terminate(); server.wait()
        t = time.perf_counter()
        server = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", tmp + "/data"],
                                  env=env, stderr=subprocess.DEVNULL)
        for _ in range(2000):
            try:
                call(base, "GET", "/healthz"); break
            except Exception:
                time.sleep(0.01)
        print(f"restart until /healthz answers: {(time.perf_counter() - t) * 1000:.0f} ms")
    finally:
        server.terminate(); server.wait()
        shutil.rmtree(tmp, ignore_errors=True)

main()
