"""Test fixtures: real `redial serve` processes (plain, with a token, with signing secrets),
HTTP receivers on 127.0.0.1 that record what Redial delivers to them, a TCP proxy whose
connections a test can cut, and reading a generator within a bound."""

from __future__ import annotations

import http.server
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest

HERE = Path(__file__).resolve().parent
DEFAULT_BIN = HERE.parent.parent.parent / "target" / "debug" / "redial"
WAIT = 60.0  # generous bound for every condition polled
SIGNING_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def wait_for(check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Poll `check` until it returns something truthy, and return it; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class Server:
    """One `redial serve` on a free port with a fresh data directory. `flags` replaces the default
    flags (`--allow-private-networks`, and `--config` with `config`), as a README gives them: the
    word `redial.toml` in them names the file `config` is written to."""

    def __init__(self, env: dict[str, str] | None = None, config: str | None = None,
                 flags: list[str] | None = None) -> None:
        binary = os.environ.get("REDIAL_BIN") or str(DEFAULT_BIN)
        if not os.path.exists(binary):
            pytest.fail(f"no redial binary at {binary}: build it or set REDIAL_BIN")
        self.dir = tempfile.mkdtemp(prefix="redial-py-")
        args = [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.dir]
        path = os.path.join(self.dir, "redial.toml")
        if config is not None:
            Path(path).write_text(config)
        if flags is not None:
            args += [path if flag == "redial.toml" else flag for flag in flags]
        else:
            args.append("--allow-private-networks")
            if config is not None:
                args += ["--config", path]
        full_env = {k: v for k, v in os.environ.items()
                    if k not in ("REDIAL_TOKEN", "REDIAL_CONFIG", "REDIAL_DATABASE_URL")}
        full_env["REDIAL_LOG"] = "warn"
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, env=full_env, stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        ready = threading.Event()
        self.url = ""

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.append(line)
                if not ready.is_set() and "redial listening on " in line:
                    self.url = line.split("redial listening on ", 1)[1].split()[0]
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(WAIT) or not self.url:
            self.stop()
            pytest.fail("redial serve did not start:\n" + "".join(self.log))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def token_server() -> Iterator[Server]:
    s = Server(env={"REDIAL_TOKEN": "secret"})
    yield s
    s.stop()


@pytest.fixture(scope="session")
def signing_server() -> Iterator[Server]:
    s = Server(config=f'[queues.events]\nsigning_secrets = ["{SIGNING_SECRET}"]\n')
    yield s
    s.stop()


class Receiver:
    """An HTTP server on 127.0.0.1:0 answering `status` (changeable) and recording requests.
    `script`, when not empty, gives the answers (status, headers) of the next requests first."""

    def __init__(self) -> None:
        self.status = 200
        self.script: list[tuple[int, dict[str, str]]] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with outer.lock:
                    outer.requests.append({
                        "method": self.command, "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    })
                    status, headers = outer.script.pop(0) if outer.script else (outer.status, {})
                payload = b'{"ok":true}' if status < 300 else b'{"error":{"code":"stub","message":"stub"}}'
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


class Proxy:
    """A TCP proxy on 127.0.0.1:0 to a server, forwarding bytes as they are. `heads` holds what
    each connection's client sent first (the request head), in the order they came; `cut()`
    breaks every open connection, as a network failure would."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").rstrip("/").rsplit(":", 1)
        self._target = (host, int(port))
        self.heads: list[str] = []
        self._open: set[socket.socket] = set()
        self._carrying: set[socket.socket] = set()  # client sockets that sent a request
        self.lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            with self.lock:
                self._open |= {client, upstream}
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        index: int | None = None
        try:
            while data := src.recv(65536):
                if from_client:
                    with self.lock:
                        if index is None:
                            index = len(self.heads)
                            self.heads.append("")
                            self._carrying.add(src)
                        if "\r\n\r\n" not in self.heads[index]:
                            self.heads[index] += data.decode("latin-1")
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with self.lock:
                    self._open.discard(s)
                    self._carrying.discard(s)
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def connections(self) -> int:
        """Connections open now that carried a request."""
        with self.lock:
            return len(self._carrying)

    def cut(self) -> None:
        with self.lock:
            sockets = list(self._open)
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._listener.close()
        self.cut()


@pytest.fixture
def proxy(server: Server) -> Iterator[Proxy]:
    p = Proxy(server.url)
    yield p
    p.close()


T = TypeVar("T")


def take(it: Iterator[T], n: int, what: str, timeout: float = WAIT) -> list[T]:
    """The next `n` items of `it`, read in a thread so that a stream that stays silent fails the
    test after `timeout` s instead of hanging it; the iterator stays open for more."""
    out: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while len(out) < n:
                out.append(next(it))
        except BaseException as e:  # StopIteration too: reported below
            failure.append(e)
        finally:
            done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(timeout):
        raise AssertionError(f"timed out after {timeout}s waiting for {what}: got {len(out)} of {n}")
    if failure:
        if isinstance(failure[0], StopIteration):
            raise AssertionError(f"the stream ended while waiting for {what}: got {len(out)} of {n}")
        raise failure[0]
    return out
