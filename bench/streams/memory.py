"""Idle connections' memory (issue 55): the RSS of a fresh `redial serve` (embedded SQLite) before,
with N idle connections that each made one request to PATH (default: the event stream, which then
stays open), and 5 s after they closed.

Usage: python3 bench/streams/memory.py REDIAL_BINARY N [PATH]
   e.g. python3 bench/streams/memory.py target/release/redial 1000
        python3 bench/streams/memory.py target/release/redial 1000 /healthz   (keep-alive, idle)
"""
import socket, subprocess, sys, time, tempfile, os, re
bin_, n = sys.argv[1], int(sys.argv[2])
path = sys.argv[3] if len(sys.argv) > 3 else "/v1/events/stream"
d = tempfile.mkdtemp()
p = subprocess.Popen([bin_, "serve", "--data-dir", d, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
port = None
for line in p.stderr:
    m = re.search(r"127\.0\.0\.1:(\d+)", line)
    if m and "listening" in line:
        port = int(m.group(1)); break
def rss():
    with open(f"/proc/{p.pid}/status") as f:
        for l in f:
            if l.startswith("VmRSS"): return int(l.split()[1]) / 1024
time.sleep(2)
base = rss()
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
    socks.append(s)
for s in socks:
    s.settimeout(30)
    head = b""
    if "wait" in path: continue
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head[:80]
time.sleep(5)
held = rss()
for s in socks: s.close()
time.sleep(5)
after = rss()
print(f"{path}: {n} idle: RSS {base:.1f} MiB before, {held:.1f} MiB with them ({(held-base)*1024/n:.1f} KiB a stream), {after:.1f} MiB after they closed")
p.terminate(); p.wait()
