// Owns the tests' fixtures: real `redial serve` processes (REDIAL_BIN, a fresh data directory, a
// free port, stopped at the end), an HTTP receiver on 127.0.0.1 that records what Redial delivers
// and answers as a test sets it, a TCP proxy whose connections a test can cut, and clients that
// read every answer strictly. Every wait is on a condition, bounded by wait.

package redial

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// wait bounds every condition a test waits for: generous, since a slow machine is no failure.
const wait = 60 * time.Second

// signingSecret is the Standard Webhooks test vector's secret, also the servers' signing secret.
const signingSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// server is one `redial serve`.
type server struct {
	url  string
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	mu   sync.Mutex
	log  strings.Builder
}

func redialBin() (string, error) {
	bin := os.Getenv("REDIAL_BIN")
	if bin == "" {
		bin = filepath.Join("..", "..", "target", "debug", "redial")
	}
	bin, _ = filepath.Abs(bin)
	if info, err := os.Stat(bin); err != nil || info.IsDir() {
		return "", fmt.Errorf("no redial binary at %s: build it (cargo build) or set REDIAL_BIN", bin)
	}
	return bin, nil
}

// startServer starts `redial serve` on 127.0.0.1:0 with a fresh data directory and the given
// configuration file (when not empty) and environment, and waits until it listens. Its flags are
// --allow-private-networks and --config (the file's path), or args instead when not nil, where
// redial.toml stands for the file's path. The caller stops it.
func startServer(config string, args []string, env ...string) (*server, error) {
	bin, err := redialBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redial-go-")
	if err != nil {
		return nil, err
	}
	argv := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")}
	path := filepath.Join(dir, "redial.toml")
	if config != "" {
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			return nil, err
		}
	}
	if args == nil {
		args = []string{"--allow-private-networks"}
		if config != "" {
			args = append(args, "--config", "redial.toml")
		}
	}
	for _, arg := range args {
		if arg == "redial.toml" {
			arg = path
		}
		argv = append(argv, arg)
	}
	cmd := exec.Command(bin, argv...)
	for _, kv := range os.Environ() {
		name := kv[:strings.IndexByte(kv+"=", '=')]
		switch name {
		case "REDIAL_TOKEN", "REDIAL_CONFIG", "REDIAL_DATABASE_URL", "REDIAL_SERVER", "REDIAL_LOG":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "REDIAL_LOG=warn")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("could not start %s: %w", bin, err)
	}
	listening := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stderr)
		lines.Buffer(make([]byte, 64*1024), 1<<20)
		for lines.Scan() {
			line := lines.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if _, rest, found := strings.Cut(line, "redial listening on "); found {
				select {
				case listening <- strings.Fields(rest)[0]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(s.done)
	}()
	select {
	case s.url = <-listening:
		return s, nil
	case <-s.done:
	case <-time.After(wait):
	}
	s.stop()
	return nil, fmt.Errorf("redial serve did not start:\n%s", s.logs())
}

func (s *server) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop ends the server (SIGTERM, then SIGKILL after 15 s) and removes its data; twice is safe.
func (s *server) stop() {
	select {
	case <-s.done:
	default:
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	}
	os.RemoveAll(s.dir)
}

// shared is a server started by the first test that needs it and stopped by TestMain.
type shared struct {
	config string
	env    []string
	once   sync.Once
	s      *server
	err    error
}

var (
	plainServer    = &shared{}
	tokenServer    = &shared{env: []string{"REDIAL_TOKEN=secret"}}
	signingServer  = &shared{config: "[queues.events]\nsigning_secrets = [\"" + signingSecret + "\"]\n"}
	callbackServer = &shared{config: "[queues.callbacks]\nsigning_secrets = [\"" + signingSecret + "\"]\n"}
	sharedServers  = []*shared{plainServer, tokenServer, signingServer, callbackServer}
)

func (sh *shared) get(t *testing.T) *server {
	t.Helper()
	sh.once.Do(func() { sh.s, sh.err = startServer(sh.config, nil, sh.env...) })
	if sh.err != nil {
		t.Fatal(sh.err)
	}
	return sh.s
}

// ownServer is a server of the test's own, stopped when it ends.
func ownServer(t *testing.T, config string) *server {
	t.Helper()
	s, err := startServer(config, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

// atExit holds what TestMain undoes after the tests, last first: fixtures shared by several tests.
var atExit []func()

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(atExit) - 1; i >= 0; i-- {
		atExit[i]()
	}
	for _, sh := range sharedServers {
		if sh.s != nil {
			sh.s.stop()
		}
	}
	os.Exit(code)
}

// newClient is a client of the server at url that reads every answer strictly: a field the
// server sends and types.go lacks fails the test that reads it.
func newClient(t *testing.T, url string, config ...Config) *Client {
	t.Helper()
	cfg := Config{}
	if len(config) > 0 {
		cfg = config[0]
	}
	cfg.BaseURL = url
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.strict = true
	return c
}

// testContext bounds a test's calls.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	t.Cleanup(cancel)
	return ctx
}

// received is one request a receiver got.
type received struct {
	method, path string
	header       http.Header
	body         []byte
}

type scripted struct {
	status int
	header map[string]string
}

// receiver is an HTTP server on 127.0.0.1:0 that records every request and answers status (or,
// first, the answers of script, in order).
type receiver struct {
	origin   string
	srv      *httptest.Server
	mu       sync.Mutex
	status   int
	script   []scripted
	requests []received
	arrived  chan received
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{status: 200, arrived: make(chan received, 10000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		got := received{method: req.Method, path: req.URL.RequestURI(), header: req.Header.Clone(), body: body}
		r.mu.Lock()
		r.requests = append(r.requests, got)
		answer := scripted{status: r.status}
		if len(r.script) > 0 {
			answer, r.script = r.script[0], r.script[1:]
		}
		r.mu.Unlock()
		payload := `{"ok":true}`
		if answer.status >= 300 {
			payload = `{"error":{"code":"stub","message":"stub"}}`
		}
		for k, v := range answer.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(answer.status)
		io.WriteString(w, payload)
		r.arrived <- got
	}))
	r.origin = r.srv.URL
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setStatus(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

func (r *receiver) setScript(script ...scripted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = script
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.requests...)
}

// next is the next request to arrive (in arrival order), waited for within wait.
func (r *receiver) next(t *testing.T, what string) received {
	t.Helper()
	select {
	case got := <-r.arrived:
		return got
	case <-time.After(wait):
		t.Fatalf("timed out after %s waiting for %s", wait, what)
		return received{}
	}
}

// proxy is a TCP proxy on 127.0.0.1:0 to a server, forwarding bytes as they are. heads holds
// what each connection's client sent first (the request head), in the order they came; cut
// breaks every open connection, as a network failure would.
type proxy struct {
	url      string
	target   string
	listener net.Listener
	mu       sync.Mutex
	heads    []string
	frozen   map[net.Conn]bool // connections whose bytes from the server are dropped
	open     map[net.Conn]bool
	carrying map[net.Conn]bool // client connections that sent a request
	changed  chan struct{}     // a connection opened or closed
}

func newProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{url: "http://" + l.Addr().String(), target: strings.TrimPrefix(target, "http://"),
		listener: l, frozen: map[net.Conn]bool{}, open: map[net.Conn]bool{}, carrying: map[net.Conn]bool{}, changed: make(chan struct{}, 1000)}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		upstream, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.open[client], p.open[upstream] = true, true
		p.mu.Unlock()
		go p.pump(client, upstream, true)
		go p.pump(upstream, client, false)
	}
}

func (p *proxy) pump(src, dst net.Conn, fromClient bool) {
	index := -1
	buf := make([]byte, 64*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromClient {
				p.mu.Lock()
				if index < 0 {
					index = len(p.heads)
					p.heads = append(p.heads, "")
					p.carrying[src] = true
					p.signal()
				}
				if !strings.Contains(p.heads[index], "\r\n\r\n") {
					p.heads[index] += string(buf[:n])
				}
				p.mu.Unlock()
			}
			p.mu.Lock()
			frozen := p.frozen[src]
			p.mu.Unlock()
			if frozen {
				continue
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.mu.Lock()
	for _, c := range []net.Conn{src, dst} {
		delete(p.open, c)
		delete(p.carrying, c)
		c.Close()
	}
	p.signal()
	p.mu.Unlock()
}

func (p *proxy) signal() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// connections is how many connections that carried a request are open now.
func (p *proxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.carrying)
}

func (p *proxy) requestHeads() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.heads...)
}

// waitConnections waits until n connections that carried a request are open.
func (p *proxy) waitConnections(t *testing.T, n int, what string) {
	t.Helper()
	deadline := time.After(wait)
	for p.connections() != n {
		select {
		case <-p.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s: %d connections open, not %d", what, p.connections(), n)
		}
	}
}

// freeze keeps every open connection open but silent: what the server sends is dropped, as a
// network that lost the way back would.
func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.open {
		p.frozen[c] = true
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.open {
		c.Close()
	}
}

func (p *proxy) close() {
	p.listener.Close()
	p.cut()
}

// lastEventID is the Last-Event-ID a request head carries, and whether it carries one.
func lastEventID(head string) (string, bool) {
	for _, line := range strings.Split(head, "\r\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "last-event-id") {
			return strings.TrimSpace(value), true
		}
	}
	return "", false
}

// jobFor is a job that POSTs {"n":1} to the receiver's /hook.
func jobFor(r *receiver) JobInput {
	return JobInput{Request: RequestInput{Method: "POST", URL: r.origin + "/hook", Body: map[string]int{"n": 1}}}
}

// finish waits for a job to finish and checks the state it ended in.
func finish(ctx context.Context, t *testing.T, c *Client, id string, want JobState) *Job {
	t.Helper()
	job, err := c.WaitForJob(ctx, id, wait)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != want {
		t.Fatalf("job %s is %s, not %s (last reason %v)", id, job.State, want, deref(job.LastReason))
	}
	return job
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// eventually polls check until it holds, for what the API offers no way to wait on (a bulk
// operation's end); bounded by wait.
func eventually(t *testing.T, what string, check func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ok, err := check()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", wait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
