// Owns the retry policy's cases (pure: time and jitter given), and the client's retries against a
// stub HTTP server standing in for redial (a real socket, no mocks): connection errors, 429 and
// 503 retried honouring Retry-After, other answers never, bounded by MaxRetries. The waits are
// recorded instead of slept, so nothing here depends on the clock.

package redial

import (
	"context"
	"errors"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	for _, c := range []struct {
		value string
		wait  time.Duration
		given bool
	}{
		{"0", 0, true},
		{"2", 2 * time.Second, true},
		{" 1.5 ", 1500 * time.Millisecond, true},
		{"-3", 0, true},
		{"120", 120 * time.Second, true}, // the error tells it as it is; the client clamps its own wait
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{"Thursday, 03-Dec-26 15:00:10 GMT", 10 * time.Second, true}, // RFC 850
		{"Thu Dec  3 15:00:05 2026", 5 * time.Second, true},          // asctime
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"soon", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
	} {
		wait, given := parseRetryAfter(c.value, now)
		if wait != c.wait || given != c.given {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", c.value, wait, given, c.wait, c.given)
		}
	}
}

func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		retry  int
		jitter float64
		wait   time.Duration
	}{
		{0, 0, 125 * time.Millisecond},
		{0, 1, 250 * time.Millisecond},
		{1, 0, 250 * time.Millisecond},
		{3, 1, 2 * time.Second},
		{4, 1, 4 * time.Second},
		{5, 1, 5 * time.Second}, // the cap
		{5, 0, 2500 * time.Millisecond},
		{100, 1, 5 * time.Second},
	} {
		if got := backoff(c.retry, c.jitter); got != c.wait {
			t.Errorf("backoff(%d, %v) = %v, want %v", c.retry, c.jitter, got, c.wait)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	with := func(retryAfter string) http.Header {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return h
	}
	for _, c := range []struct {
		status     int
		retryAfter string
		wait       time.Duration
		again      bool
	}{
		{429, "7", 7 * time.Second, true},
		{503, "0", 0, true},
		{429, "3600", MaxRetryAfter, true},      // clamped
		{503, "", 500 * time.Millisecond, true}, // the backoff of retry 1
		{503, "whenever", 500 * time.Millisecond, true},
		{500, "1", 0, false},
		{502, "", 0, false},
		{400, "1", 0, false},
		{409, "", 0, false},
		{200, "1", 0, false},
	} {
		wait, again := retryDelay(c.status, with(c.retryAfter), 1, now, 1)
		if wait != c.wait || again != c.again {
			t.Errorf("retryDelay(%d, %q) = %v, %v; want %v, %v", c.status, c.retryAfter, wait, again, c.wait, c.again)
		}
	}
}

// stubClient is a client of the receiver that records its waits instead of sleeping them.
func stubClient(t *testing.T, url string, maxRetries int) (*Client, *[]time.Duration) {
	c, err := New(Config{BaseURL: url, MaxRetries: maxRetries})
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	c.jitter = func() float64 { return 1 }
	c.now = func() time.Time { return now }
	return c, &waits
}

func apiError(t *testing.T, err error) *APIError {
	t.Helper()
	var e *APIError
	if !errors.As(err, &e) {
		t.Fatalf("got %v (%T), want an *APIError", err, err)
	}
	return e
}

func TestA503ThenA429AreRetried(t *testing.T) {
	r := newReceiver(t)
	r.setScript(scripted{503, map[string]string{"Retry-After": "0"}}, scripted{429, map[string]string{"Retry-After": "2"}})
	c, waits := stubClient(t, r.origin, 3)
	if _, err := c.Stats(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if r.count() != 3 || !reflect.DeepEqual(*waits, []time.Duration{0, 2 * time.Second}) {
		t.Fatalf("%d requests, waits %v", r.count(), *waits)
	}
}

func TestRetriesAreBounded(t *testing.T) {
	r := newReceiver(t)
	r.setStatus(503)
	c, waits := stubClient(t, r.origin, 2)
	e := apiError(t, func() error { _, err := c.Stats(testContext(t)); return err }())
	if e.Status != 503 || e.Code != "stub" || e.RetryAfter != nil || r.count() != 3 {
		t.Fatalf("%+v after %d requests", e, r.count())
	}
	// Without Retry-After: the backoff, doubling.
	if !reflect.DeepEqual(*waits, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}) {
		t.Fatalf("waits %v", *waits)
	}
}

func TestTheLastRetryAfterIsTheErrors(t *testing.T) {
	r := newReceiver(t)
	r.setScript(scripted{429, map[string]string{"Retry-After": "7"}}, scripted{429, map[string]string{"Retry-After": "7"}})
	c, waits := stubClient(t, r.origin, 1)
	e := apiError(t, func() error { _, err := c.Stats(testContext(t)); return err }())
	if e.Status != 429 || e.RetryAfter == nil || *e.RetryAfter != 7*time.Second {
		t.Fatalf("%+v", e)
	}
	if !reflect.DeepEqual(*waits, []time.Duration{7 * time.Second}) {
		t.Fatalf("waits %v", *waits)
	}
}

func TestNoRetriesWhenNegative(t *testing.T) {
	r := newReceiver(t)
	r.setStatus(503)
	c, _ := stubClient(t, r.origin, -1)
	apiError(t, func() error { _, err := c.Stats(testContext(t)); return err }())
	if r.count() != 1 {
		t.Fatalf("%d requests", r.count())
	}
}

func TestOtherErrorsAreNeverRetried(t *testing.T) {
	for _, status := range []int{400, 401, 404, 409, 422, 500, 502} {
		r := newReceiver(t)
		r.setStatus(status)
		c, _ := stubClient(t, r.origin, 3)
		_, err := c.Enqueue(testContext(t), JobInput{Request: RequestInput{Method: "GET", URL: "http://example.com"}})
		if e := apiError(t, err); e.Status != status || e.Code != "stub" || r.count() != 1 {
			t.Fatalf("%d: %+v after %d requests", status, e, r.count())
		}
	}
}

func TestARetriedEnqueueKeepsItsGeneratedID(t *testing.T) {
	r := newReceiver(t)
	r.setScript(scripted{503, map[string]string{"Retry-After": "0"}})
	c, _ := stubClient(t, r.origin, 3)
	if _, err := c.Enqueue(testContext(t), JobInput{Request: RequestInput{Method: "GET", URL: "http://example.com"}}); err != nil {
		t.Fatal(err)
	}
	got := r.all()
	if len(got) != 2 || string(got[0].body) != string(got[1].body) || !strings.Contains(string(got[0].body), `"id":"`) {
		t.Fatalf("bodies: %q", got)
	}
	for _, req := range got {
		if req.header.Get("Content-Type") != "application/json" || !strings.HasPrefix(req.header.Get("User-Agent"), "redial-client-go/") {
			t.Fatalf("headers: %v", req.header)
		}
	}
}

func TestAnAnswerThatIsNoJSONIsAnError(t *testing.T) {
	stub := newReceiver(t)
	c, _ := stubClient(t, stub.origin, 3)
	// The receiver answers {"ok":true} to every path: a strict client refuses it as a Stats.
	c.strict = true
	e := apiError(t, func() error { _, err := c.Stats(testContext(t)); return err }())
	if e.Code != ErrorCodeInvalidResponse || !strings.Contains(e.Message, `unknown field "ok"`) {
		t.Fatalf("%+v", e)
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestAConnectionErrorAfterTheRetries(t *testing.T) {
	c, waits := stubClient(t, "http://"+freePort(t), 2)
	_, err := c.Stats(testContext(t))
	var e *ConnectionError
	if !errors.As(err, &e) || !strings.Contains(e.Error(), "could not reach") {
		t.Fatalf("got %v (%T), want a *ConnectionError", err, err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("the cause is not kept: %v", err)
	}
	if len(*waits) != 2 {
		t.Fatalf("waits %v", *waits)
	}
}

func TestARequestThatOutlastsTheTimeoutIsAConnectionError(t *testing.T) {
	release := make(chan struct{})
	silent := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release })}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go silent.Serve(l)
	t.Cleanup(func() { close(release); silent.Close() })
	c, err := New(Config{BaseURL: "http://" + l.Addr().String(), Timeout: 100 * time.Millisecond, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stats(testContext(t))
	var e *ConnectionError
	if !errors.As(err, &e) {
		t.Fatalf("got %v (%T), want a *ConnectionError", err, err)
	}
}

func TestTheContextEndsTheRetries(t *testing.T) {
	r := newReceiver(t)
	r.setStatus(503)
	c, err := New(Config{BaseURL: r.origin, MaxRetries: 5})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.sleep = func(context.Context, time.Duration) error { cancel(); return ctx.Err() }
	if _, err := c.Stats(ctx); !errors.Is(err, context.Canceled) || r.count() != 1 {
		t.Fatalf("got %v after %d requests", err, r.count())
	}
}

func TestTheEventStreamRetriesA503AndRefusesWhatIsNoEventStream(t *testing.T) {
	r := newReceiver(t)
	r.setScript(scripted{503, map[string]string{"Retry-After": "0"}})
	c, _ := stubClient(t, r.origin, 1)
	stream := c.StreamEvents(testContext(t), EventStreamFilter{After: "0-0"})
	defer stream.Close()
	if stream.Next() {
		t.Fatal("an event from a stub")
	}
	e := apiError(t, stream.Err())
	if e.Code != ErrorCodeInvalidResponse || !strings.Contains(e.Message, "not text/event-stream") {
		t.Fatalf("%+v", e)
	}
	got := r.all()
	if len(got) != 2 {
		t.Fatalf("%d requests", len(got))
	}
	for _, req := range got {
		if req.path != "/v1/events/stream?after=0-0" || req.header.Get("Accept") != "text/event-stream" {
			t.Fatalf("%s %v", req.path, req.header)
		}
	}
}

func TestBaseURLs(t *testing.T) {
	t.Setenv("REDIAL_SERVER", "")
	for _, c := range [][2]string{
		{"", DefaultBaseURL},
		{"localhost:8080", "http://localhost:8080"},
		{"https://redial.example.com/", "https://redial.example.com"},
		{"http://127.0.0.1:9/prefix/", "http://127.0.0.1:9/prefix"},
	} {
		client, err := New(Config{BaseURL: c[0]})
		if err != nil || client.BaseURL() != c[1] {
			t.Errorf("New(%q): %v, %v", c[0], client, err)
		}
	}
	for _, bad := range []string{"ftp://example.com", "http://", "http://a b", "http://x/?q=1"} {
		if _, err := New(Config{BaseURL: bad}); err == nil {
			t.Errorf("New(%q) is no error", bad)
		}
	}
	t.Setenv("REDIAL_SERVER", "127.0.0.1:7")
	if client, _ := New(Config{}); client.BaseURL() != "http://127.0.0.1:7" {
		t.Errorf("REDIAL_SERVER is not read: %s", client.BaseURL())
	}
}
