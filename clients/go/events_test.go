// Owns the event log's tests against a real `redial serve`: pages by kind, queue and cursor; the
// stream stopped and resumed after the last id read; a connection cut by a TCP proxy and reopened
// by the stream itself with Last-Event-ID; closing it while it waits; the errors that end it; the
// token. Every wait is on a condition (an event read, a job finished), bounded generously.

package redial

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	okJobs      = []string{"ev-ok-1", "ev-ok-2", "ev-ok-3"}
	refusedJobs = []string{"ev-refused-1", "ev-refused-2"}
)

// eventLog is a server of its own whose log starts with the events of okJobs (completed) and
// refusedJobs (dead), and the receivers they were sent to.
type eventLog struct {
	server    *server
	ok        *httptest.Server
	refusing  *httptest.Server
	client    *Client
	setupOnce sync.Once
	err       error
}

var theLog = &eventLog{}

func (l *eventLog) get(t *testing.T) *eventLog {
	t.Helper()
	l.setupOnce.Do(func() {
		if l.server, l.err = startServer("", nil); l.err != nil {
			return
		}
		atExit = append(atExit, l.server.stop)
		l.ok = httptest.NewServer(statusHandler(200))
		l.refusing = httptest.NewServer(statusHandler(400))
		atExit = append(atExit, l.ok.Close, l.refusing.Close)
		if l.client, l.err = New(Config{BaseURL: l.server.url}); l.err != nil {
			return
		}
		l.client.strict = true
		for _, id := range okJobs {
			if l.err = l.run(id, true); l.err != nil {
				return
			}
		}
		for _, id := range refusedJobs {
			if l.err = l.run(id, false); l.err != nil {
				return
			}
		}
	})
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l
}

// run enqueues a job that completes, or dies at once as permanent (a 400), and waits for it.
func (l *eventLog) run(id string, ok bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	target, want := l.ok.URL, JobStateCompleted
	if !ok {
		target, want = l.refusing.URL, JobStateDead
	}
	if _, err := l.client.Enqueue(ctx, JobInput{ID: id, Request: RequestInput{Method: "POST", URL: target + "/hook"}}); err != nil {
		return err
	}
	job, err := l.client.WaitForJob(ctx, id, wait)
	if err == nil && job.State != want {
		err = errors.New(id + " ended " + string(job.State) + ", not " + string(want))
	}
	return err
}

func (l *eventLog) finish(t *testing.T, id string, ok bool) {
	t.Helper()
	if err := l.run(id, ok); err != nil {
		t.Fatal(err)
	}
}

// everything is the whole log as a page of Events gives it now.
func (l *eventLog) everything(t *testing.T) []Event {
	t.Helper()
	page, err := l.client.Events(testContext(t), EventFilter{Limit: Ptr(1000)})
	if err != nil || page.More {
		t.Fatalf("%+v %v", page, err)
	}
	return page.Events
}

func ids(events []Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

func jobIDs(events []Event) []string {
	var out []string
	for _, e := range events {
		if id := deref(e.JobID); id != nil && strings.HasPrefix(id.(string), "ev-") {
			out = append(out, id.(string))
		}
	}
	sort.Strings(out)
	return out
}

// take reads the next n events of a stream; the stream's context bounds the wait.
func take(t *testing.T, s *EventStream, n int, what string) []Event {
	t.Helper()
	var out []Event
	for len(out) < n {
		if !s.Next() {
			t.Fatalf("the stream ended while waiting for %s (%d of %d): %v", what, len(out), n, s.Err())
		}
		out = append(out, s.Event())
	}
	return out
}

func TestEventsPageByKindQueueAndCursor(t *testing.T) {
	l, ctx := theLog.get(t), testContext(t)
	c := l.client
	page, err := c.Events(ctx, EventFilter{})
	if err != nil || page.From != nil || page.More || len(page.Events) < len(okJobs)+len(refusedJobs) {
		t.Fatalf("%+v %v", page, err)
	}
	// The fixture's jobs come first; other tests add to the log after them.
	fixture := page.Events[:len(okJobs)+len(refusedJobs)]
	var completed, dead []Event
	for _, e := range fixture {
		switch e.Type {
		case EventKindJobCompleted:
			completed = append(completed, e)
		case EventKindJobDead:
			dead = append(dead, e)
		}
	}
	if fmt.Sprint(jobIDs(completed)) != fmt.Sprint(okJobs) || fmt.Sprint(jobIDs(dead)) != fmt.Sprint(refusedJobs) {
		t.Fatalf("completed %v, dead %v", jobIDs(completed), jobIDs(dead))
	}
	for _, e := range dead {
		if deref(e.Category) != "permanent" || deref(e.Endpoint) != l.refusing.URL || deref(e.Queue) != "default" {
			t.Fatalf("%+v", e)
		}
	}
	seen := map[string]bool{}
	for _, id := range ids(page.Events) {
		if seen[id] {
			t.Fatalf("%s twice", id)
		}
		seen[id] = true
	}
	if page.NextCursor != page.Events[len(page.Events)-1].ID {
		t.Fatalf("next cursor %s", page.NextCursor)
	}

	onlyDead, err := c.Events(ctx, EventFilter{Kind: []EventKind{EventKindJobDead}, Limit: Ptr(len(dead))})
	if err != nil || !reflect.DeepEqual(ids(onlyDead.Events), ids(dead)) {
		t.Fatalf("%v %v", onlyDead, err)
	}
	both, err := c.Events(ctx, EventFilter{Kind: []EventKind{EventKindJobCompleted, EventKindJobDead}, Queue: []string{"default"},
		Limit: Ptr(len(fixture))})
	if err != nil || !reflect.DeepEqual(ids(both.Events), ids(fixture)) {
		t.Fatalf("%v %v", both, err)
	}
	if none, err := c.Events(ctx, EventFilter{Queue: []string{"callbacks"}}); err != nil || len(none.Events) != 0 {
		t.Fatalf("%v %v", none, err)
	}

	// Two at a time, each page read on from the one before.
	var paged, allCompleted []Event
	for _, e := range page.Events {
		if e.Type == EventKindJobCompleted {
			allCompleted = append(allCompleted, e)
		}
	}
	filter := EventFilter{Kind: []EventKind{EventKindJobCompleted}, Limit: Ptr(2)}
	for {
		next, err := c.Events(ctx, filter)
		if err != nil || deref(next.From) != deref(ptrOrNil(filter.After)) || len(next.Events) > 2 {
			t.Fatalf("%+v %v", next, err)
		}
		paged = append(paged, next.Events...)
		filter.After = next.NextCursor
		if !next.More {
			break
		}
	}
	if !reflect.DeepEqual(ids(paged), ids(allCompleted)) {
		t.Fatalf("paged %v, completed %v", ids(paged), ids(allCompleted))
	}
	if after, err := c.Events(ctx, EventFilter{After: page.NextCursor}); err != nil || len(after.Events) != 0 {
		t.Fatalf("%v %v", after, err)
	}
	_, err = c.Events(ctx, EventFilter{Kind: []EventKind{"job.finished"}})
	wantAPIError(t, err, 400, ErrorCodeInvalidEventKind)
}

// statusHandler answers every request with status.
func statusHandler(status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) })
}

func ptrOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func TestAStreamStoppedAndResumedAfterTheLastIDGetsTheLogOnce(t *testing.T) {
	l, ctx := theLog.get(t), testContext(t)
	everything := l.everything(t)
	if len(everything) < len(okJobs)+len(refusedJobs) {
		t.Fatalf("%d events", len(everything))
	}
	first := l.client.StreamEvents(ctx, EventStreamFilter{After: "0-0"})
	head := take(t, first, 2, "the first two events")
	first.Close()
	if first.Next() || first.Err() != nil {
		t.Fatalf("a closed stream reads on: %v", first.Err())
	}

	second := l.client.StreamEvents(ctx, EventStreamFilter{After: head[1].ID})
	defer second.Close()
	rest := take(t, second, len(everything)-2, "the rest of the log")
	if got := append(head, rest...); !reflect.DeepEqual(got, everything) {
		t.Fatalf("nothing missed, nothing twice, in the log's order:\n%v\n%v", ids(got), ids(everything))
	}

	liveID := unique("ev-live")
	l.finish(t, liveID, true)
	live := take(t, second, 1, "the event of a job finished while the stream is open")[0]
	if live.Type != EventKindJobCompleted || deref(live.JobID) != liveID {
		t.Fatalf("%+v", live)
	}
	if now := l.everything(t); !reflect.DeepEqual(now, append(everything, live)) {
		t.Fatalf("the page lists what the stream gave:\n%v\n%v", ids(now), ids(append(everything, live)))
	}
}

func TestABrokenConnectionIsReopenedWithLastEventID(t *testing.T) {
	l, ctx := theLog.get(t), testContext(t)
	p := newProxy(t, l.server.url)
	everything := l.everything(t)
	c := newClient(t, p.url)
	stream := c.StreamEvents(ctx, EventStreamFilter{After: "0-0"})
	earlier := take(t, stream, len(everything), "the log so far")
	if !reflect.DeepEqual(earlier, everything) || len(p.requestHeads()) != 1 {
		t.Fatalf("%v, %d connections", ids(earlier), len(p.requestHeads()))
	}

	p.cut()
	okID, refusedID := unique("ev-cut-ok"), unique("ev-cut-refused")
	l.finish(t, okID, true)
	l.finish(t, refusedID, false)
	afterCut := take(t, stream, 2, "the events of the jobs finished after the cut")
	if deref(afterCut[0].JobID) != okID || afterCut[0].Type != EventKindJobCompleted ||
		deref(afterCut[1].JobID) != refusedID || afterCut[1].Type != EventKindJobDead {
		t.Fatalf("%+v", afterCut)
	}
	heads := p.requestHeads()
	if len(heads) < 2 {
		t.Fatalf("the stream was not opened again: %d connections", len(heads))
	}
	if id, given := lastEventID(heads[0]); given {
		t.Fatalf("the first connection sent Last-Event-ID %s", id)
	}
	if id, _ := lastEventID(heads[1]); id != earlier[len(earlier)-1].ID {
		t.Fatalf("the second connection sent Last-Event-ID %q, not the last event's %s", id, earlier[len(earlier)-1].ID)
	}
	if now := l.everything(t); !reflect.DeepEqual(now, append(earlier, afterCut...)) {
		t.Fatalf("the union is the log: no gap, no repeat")
	}
	stream.Close()
	p.waitConnections(t, 0, "the stream's connection to close")
}

func TestASilentConnectionIsReopened(t *testing.T) {
	l, ctx := theLog.get(t), testContext(t)
	p := newProxy(t, l.server.url)
	everything := l.everything(t)
	c := newClient(t, p.url)
	// Silent this long, a connection is taken for dead (45 s outside tests, three keepalives).
	c.streamIdle = 500 * time.Millisecond
	stream := c.StreamEvents(ctx, EventStreamFilter{After: "0-0"})
	defer stream.Close()
	earlier := take(t, stream, len(everything), "the log so far")

	p.freeze()
	id := unique("ev-silent")
	l.finish(t, id, true)
	after := take(t, stream, 1, "the event of a job finished while the connection was silent")[0]
	if deref(after.JobID) != id {
		t.Fatalf("%+v", after)
	}
	heads := p.requestHeads()
	if len(heads) < 2 {
		t.Fatalf("the silent connection was not reopened: %d connections", len(heads))
	}
	if got, _ := lastEventID(heads[len(heads)-1]); got != earlier[len(earlier)-1].ID {
		t.Fatalf("the new connection sent Last-Event-ID %q, not %s", got, earlier[len(earlier)-1].ID)
	}
}

func TestCloseEndsAStreamThatWaits(t *testing.T) {
	l, ctx := theLog.get(t), testContext(t)
	p := newProxy(t, l.server.url)
	c := newClient(t, p.url)
	quiet := c.StreamEvents(ctx, EventStreamFilter{Kind: []EventKind{EventKindEndpointQuarantined}})
	next := make(chan bool)
	go func() { next <- quiet.Next() }()
	p.waitConnections(t, 1, "the stream to open")
	quiet.Close()
	select {
	case got := <-next:
		if got || quiet.Err() != nil {
			t.Fatalf("Next %v, Err %v", got, quiet.Err())
		}
	case <-time.After(wait):
		t.Fatal("Next still waits after Close")
	}
	p.waitConnections(t, 0, "the stream's connection to close")
	quiet.Close() // twice is safe
}

func TestTheContextEndsAStreamThatWaits(t *testing.T) {
	l := theLog.get(t)
	ctx, cancel := context.WithCancel(testContext(t))
	p := newProxy(t, l.server.url)
	quiet := newClient(t, p.url).StreamEvents(ctx, EventStreamFilter{Kind: []EventKind{EventKindEndpointQuarantined}})
	defer quiet.Close()
	next := make(chan bool)
	go func() { next <- quiet.Next() }()
	p.waitConnections(t, 1, "the stream to open")
	cancel()
	select {
	case got := <-next:
		if got || !errors.Is(quiet.Err(), context.Canceled) {
			t.Fatalf("Next %v, Err %v", got, quiet.Err())
		}
	case <-time.After(wait):
		t.Fatal("Next still waits after the context ended")
	}
}

func TestAnErrorAnswerEndsTheStreamAtOnceAndAMissingServerAfterTheRetries(t *testing.T) {
	l, ctx := theLog.get(t), testContext(t)
	p := newProxy(t, l.server.url)
	stream := newClient(t, p.url, Config{MaxRetries: 3}).StreamEvents(ctx, EventStreamFilter{Kind: []EventKind{"job.finished"}})
	if stream.Next() {
		t.Fatal("an event for a kind that is none")
	}
	wantAPIError(t, stream.Err(), 400, ErrorCodeInvalidEventKind)
	if n := len(p.requestHeads()); n != 1 {
		t.Fatalf("a 400 is retried: %d connections", n)
	}

	gone := newClient(t, "http://"+freePort(t), Config{MaxRetries: 1}).StreamEvents(ctx, EventStreamFilter{})
	if gone.Next() {
		t.Fatal("an event from no server")
	}
	var e *ConnectionError
	if !errors.As(gone.Err(), &e) {
		t.Fatalf("got %v, want a *ConnectionError", gone.Err())
	}
}

func TestTheStreamSendsTheToken(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	url := tokenServer.get(t).url
	t.Setenv("REDIAL_TOKEN", "")
	anonymous := newClient(t, url).StreamEvents(ctx, EventStreamFilter{After: "0-0"})
	if anonymous.Next() {
		t.Fatal("an event without the token")
	}
	wantAPIError(t, anonymous.Err(), 401, ErrorCodeUnauthorized)

	c := newClient(t, url, Config{Token: "secret"})
	stream := c.StreamEvents(ctx, EventStreamFilter{After: "0-0"})
	defer stream.Close()
	job, err := c.Enqueue(ctx, jobFor(r))
	if err != nil {
		t.Fatal(err)
	}
	// The server is shared with other tests: read on until this job's event.
	for {
		event := take(t, stream, 1, "the event of job "+job.ID)[0]
		if deref(event.JobID) == job.ID {
			if event.Type != EventKindJobCompleted {
				t.Fatalf("%+v", event)
			}
			break
		}
	}
}
