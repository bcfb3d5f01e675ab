#!/usr/bin/env python3
"""Endpoint controls and lists at many endpoints (issue 36, part 4), through `redial serve`.

Starts the given binary on a fresh SQLite file, enqueues one job (due in a year, so nothing is
sent) to each of N distinct endpoints, then times, over loopback: pause + resume of one endpoint
(ROUNDS times each, median), GET /v1/endpoints/{name}, and the first page of GET /v1/endpoints
(its size too). Several binaries alternate, round by round, so that their figures compare runs
made seconds apart on this noisy machine.

Usage: bench/controls/run.py [--endpoints 6000] [--rounds 5] BINARY [BINARY...]
"""
import argparse, http.client, json, os, socket, statistics, subprocess, sys, tempfile, time
from datetime import datetime, timedelta, timezone


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json"} if data is not None else {}
    t = time.perf_counter()
    c.request(method, path, body=data, headers=headers)
    r = c.getresponse()
    raw = r.read()
    took = time.perf_counter() - t
    c.close()
    return r.status, raw, took


class Server:
    def __init__(self, binary, endpoints):
        self.dir = tempfile.TemporaryDirectory()
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "serve", "--data-dir", self.dir.name, "--listen", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                if call(self.port, "GET", "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        run_at = (datetime.now(timezone.utc) + timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for start in range(0, endpoints, 1000):
            jobs = [{"request": {"method": "POST", "url": f"https://e{i}.example.com/x"}, "run_at": run_at}
                    for i in range(start, min(start + 1000, endpoints))]
            status, raw, _ = call(self.port, "POST", "/v1/jobs/batch", {"jobs": jobs})
            assert status in (200, 201), raw[:300]

    def measure(self, rounds):
        name = "https%3A%2F%2Fe17.example.com"
        pause, resume, show = [], [], []
        for _ in range(rounds):
            s, raw, t = call(self.port, "POST", f"/v1/endpoints/{name}/pause", {"reason": "bench"})
            assert s == 200, raw[:300]
            pause.append(t)
            s, raw, t = call(self.port, "POST", f"/v1/endpoints/{name}/resume")
            assert s == 200, raw[:300]
            resume.append(t)
            s, raw, t = call(self.port, "GET", f"/v1/endpoints/{name}")
            assert s == 200, raw[:300]
            show.append(t)
        s, raw, t = call(self.port, "GET", "/v1/endpoints")
        assert s == 200, raw[:300]
        return {"pause_ms": statistics.median(pause) * 1000, "resume_ms": statistics.median(resume) * 1000,
                "show_ms": statistics.median(show) * 1000, "list_ms": t * 1000, "list_bytes": len(raw)}

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.dir.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", type=int, default=6000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=50, help="controls timed per round")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    results = {b: [] for b in a.binaries}
    for r in range(a.rounds):
        for b in a.binaries:
            srv = Server(b, a.endpoints)
            try:
                results[b].append(srv.measure(a.calls))
            finally:
                srv.stop()
    print(f"{a.endpoints} endpoints, {a.rounds} rounds of {a.calls} calls; median of the rounds' medians")
    for b, rs in results.items():
        med = {k: statistics.median(x[k] for x in rs) for k in rs[0]}
        print(f"{b}: pause {med['pause_ms']:.2f} ms, resume {med['resume_ms']:.2f} ms, "
              f"show {med['show_ms']:.2f} ms, list {med['list_ms']:.1f} ms / {med['list_bytes'] / 1e6:.2f} MB")


if __name__ == "__main__":
    sys.exit(main())
