"""Issue 55's two attacks by a token holder on a default `redial serve` (embedded SQLite): 1,000
`?wait=60s` requests plus 60 POSTs whose bodies never finish, then 1,100 such POSTs alone; while
each holds, 50 rounds of `GET /healthz` and `GET /v1/stats` from another client, each on a new
connection: how many answered 200, and their latency.

Usage: ulimit -n 8192; python3 bench/hostile/attack.py REDIAL_BINARY
"""
import socket, subprocess, tempfile, time, re, json, urllib.request, sys, threading
bin_=sys.argv[1]
d = tempfile.mkdtemp()
p = subprocess.Popen([bin_,"serve","--data-dir",d,"--listen","127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
for line in p.stderr:
    m = re.search(r"127\.0\.0\.1:(\d+)", line)
    if m: port=int(m.group(1)); break
threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
base=f"http://127.0.0.1:{port}"
req=urllib.request.Request(base+"/v1/jobs", data=json.dumps({"id":"never","run_at":"2099-01-01T00:00:00Z","request":{"method":"GET","url":"http://127.0.0.1:9/x"}}).encode(), headers={"content-type":"application/json"})
urllib.request.urlopen(req).read()
def probe(path):
    t=time.monotonic()
    s=socket.create_connection(("127.0.0.1",port)); s.settimeout(30)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    line=b""
    try:
        while b"\r\n" not in line:
            c=s.recv(100)
            if not c: break
            line+=c
    except Exception as e:
        return None, str(e)
    s.close()
    return (time.monotonic()-t)*1000, line.split(b"\r\n")[0].decode()
def run(name):
    lat=[]; bad=[]
    for i in range(50):
        for path in ("/healthz","/v1/stats"):
            ms,st=probe(path)
            if ms is None or "200" not in st: bad.append(st)
            else: lat.append(ms)
        time.sleep(0.05)
    lat.sort()
    print(f"{name}: {len(lat)} of 100 answered 200; p50 {lat[len(lat)//2]:.1f} ms, max {lat[-1]:.1f} ms; failures {bad[:3]}")
socks=[]
for i in range(1000):
    s=socket.create_connection(("127.0.0.1",port)); s.sendall(f"GET /v1/jobs/never?wait=60s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()); socks.append(s)
for i in range(60):
    s=socket.create_connection(("127.0.0.1",port)); s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); socks.append(s)
time.sleep(2)
run("1,000 waits + 60 slow bodies")
for s in socks: s.close()
socks=[]
time.sleep(2)
for i in range(1100):
    s=socket.create_connection(("127.0.0.1",port)); s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); socks.append(s)
time.sleep(2)
run("1,100 slow bodies")
p.terminate()
