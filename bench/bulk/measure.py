#!/usr/bin/env python3
"""Dispatch while 100,000 dead letters are replayed: a fresh SQLite store with DEAD dead letters
in queue `default`, then JOBS jobs enqueued in queue `b` and dispatched, once alone and once while
a bulk replay of every dead letter of `default` runs. Jobs are refused by the network policy
(no HTTP: what is measured is the store's share), so each run of `b` is its jobs leased,
attempted and recorded. Prints `b`'s rate and its longest stall (the longest time its dead count
did not move, read every 20 ms) in each run, and the replay's duration.

Usage: bench/bulk/measure.py [path-to-redial]   (default target/release/redial)
"""
import json, os, shutil, socket, subprocess, sys, tempfile, threading, time, urllib.request

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/redial"
DEAD = int(os.environ.get("DEAD", 100_000))
JOBS = int(os.environ.get("JOBS", 20_000))
BATCH = 1000

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read() or b"null")

def dead(base, queue):
    return call(base, "GET", f"/v1/dead-letters/groups?queue={queue}")["total"]

def enqueue(base, queue, prefix, n):
    i = 0
    while i < n:
        jobs = [{"id": f"{prefix}{i + k}", "queue": queue,
                 "request": {"method": "POST", "url": f"http://127.0.0.{1 + (i + k) % 20}:9/x"}}
                for k in range(min(BATCH, n - i))]
        call(base, "POST", "/v1/jobs/batch", {"jobs": jobs}); i += len(jobs)

def run_b(base, tag, during=None):
    """Enqueues JOBS in `b` and waits until every one is dead; returns (rate, longest stall)."""
    before = dead(base, "b")
    enqueue(base, "b", tag, JOBS)
    started = time.perf_counter()
    if during:
        during()
    last, moved, stall = before, started, 0.0
    while True:
        n = dead(base, "b")
        now = time.perf_counter()
        if n != last:
            stall = max(stall, now - moved); last, moved = n, now
        if n >= before + JOBS:
            return JOBS / (now - started), stall
        time.sleep(0.02)

def main():
    tmp = tempfile.mkdtemp()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with open(tmp + "/redial.toml", "w") as f:
        f.write("[queues.default]\nconcurrency = 32\n\n[queues.b]\nconcurrency = 32\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDIAL_")}
    env["REDIAL_LOG"] = "warn"
    server = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", tmp + "/data",
                               "--config", tmp + "/redial.toml"], env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                call(base, "GET", "/healthz"); break
            except Exception:
                time.sleep(0.05)
        enqueue(base, "default", "d", DEAD)
        while dead(base, "default") < DEAD:
            time.sleep(0.5)
        rate, stall = run_b(base, "alone", None)
        print(f"queue b alone: {rate:,.0f} jobs/s, longest stall {stall * 1000:.0f} ms", flush=True)
        replay = {}
        def start_replay():
            def go():
                t = time.perf_counter()
                out = call(base, "POST", "/v1/dead-letters/replay", {"queue": "default"})
                replay["s"], replay["n"] = time.perf_counter() - t, out["affected"]
            replay["thread"] = threading.Thread(target=go); replay["thread"].start()
        rate, stall = run_b(base, "busy", start_replay)
        replay["thread"].join()
        print(f"queue b while {replay['n']:,} dead letters are replayed: {rate:,.0f} jobs/s, "
              f"longest stall {stall * 1000:.0f} ms; the replay took {replay['s']:.1f} s", flush=True)
    finally:
        server.terminate(); server.wait()
        shutil.rmtree(tmp, ignore_errors=True)

main()
