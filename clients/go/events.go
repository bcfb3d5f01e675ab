// Owns the event log: a page of it (Events), and following it live (StreamEvents) across
// connections: what an answer or a failure means (read on, reconnect after a pause, or give up),
// and the state carried from one connection to the next, above all the id of the last event
// handed out, which a reconnect sends as Last-Event-ID so that the caller misses nothing and gets
// nothing twice. Reading the bytes into messages is sse.go's.

package redial

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// streamIdle is how long an open stream may stay silent before it is taken for dead and reopened:
// the server writes a comment every 15 s on a quiet stream, so three missed ones mean the
// connection is gone.
const streamIdle = 45 * time.Second

// Events is a page of the event log (jobs completed, dead, cancelled, replayed; endpoints paused,
// resumed, quarantined, recovered, breakers opened and closed) in the log's order: after
// filter.After (an event's id or a page's NextCursor; from the oldest event kept without it).
func (c *Client) Events(ctx context.Context, filter EventFilter) (*EventPage, error) {
	return sendFor[EventPage](ctx, c, call{method: "GET", path: "/v1/events", query: filter.query()})
}

// StreamEvents follows the event log live (Server-Sent Events): after filter.After (an event's
// id), or from now on without it. Read it as a bufio.Scanner:
//
//	stream := client.StreamEvents(ctx, redial.EventStreamFilter{Kind: []redial.EventKind{redial.EventKindJobDead}})
//	defer stream.Close()
//	for stream.Next() {
//		event := stream.Event()
//	}
//	if err := stream.Err(); err != nil { ... }
//
// A connection that drops (or stays silent 45 s, while the server writes a comment every 15 s) is
// reopened by itself after a short jittered pause (0.25 s doubling while reconnecting fails, at
// most 5 s, or what the server asked for), with Last-Event-ID set to the last event handed out:
// nothing is missed or repeated while the log keeps the events. Only the first connection gives
// up, after the client's retries, as a ConnectionError, so that a wrong base URL fails rather
// than waits; an error answer other than 429 and 503 (a bad kind, a wrong token) ends the stream
// with its APIError. Without After, a reconnect before the first event starts from its own now.
func (c *Client) StreamEvents(ctx context.Context, filter EventStreamFilter) *EventStream {
	ctx, cancel := context.WithCancel(ctx)
	return &EventStream{
		client: c, ctx: ctx, cancel: cancel, query: filter.query(), closed: make(chan struct{}),
		buf: make([]byte, 32*1024),
	}
}

// EventStream is the event log followed live; see StreamEvents. Next, Event and Err belong to
// one goroutine; Close may be called from any, also while Next waits.
type EventStream struct {
	client *Client
	ctx    context.Context
	cancel context.CancelFunc
	query  url.Values

	closeOnce sync.Once
	closed    chan struct{}
	mu        sync.Mutex // guards conn, which Close closes
	conn      *answer

	parser  *sseParser
	buf     []byte
	pending []sseEvent // parsed from what was read, not handed out yet
	event   Event
	err     error
	done    bool

	opens      int            // connections tried
	last       string         // the id of the last event handed out
	fruitless  int            // connections in a row that handed out nothing: the pause grows with it
	everOpen   bool           // until a stream opened, failures give up as any call does
	retry      *time.Duration // the pause the server asked for (a retry field)
	retryAfter *time.Duration // the pause a 429 or 503 asked for, once
}

type sseEvent struct {
	id    string
	event Event
}

// Next waits for the next event; false when the stream ended (see Err), was closed, or its
// context is done.
func (s *EventStream) Next() bool {
	if s.isClosed() {
		s.done, s.pending = true, nil
		return false
	}
	for len(s.pending) == 0 {
		if s.err != nil || s.done || s.isClosed() {
			return false
		}
		s.mu.Lock()
		conn := s.conn
		s.mu.Unlock()
		if conn != nil {
			s.read(conn)
			continue
		}
		if s.opens > 0 {
			if err := s.client.sleep(s.ctx, s.pause()); err != nil {
				s.stop(err)
				continue
			}
		}
		s.opens++
		s.connect()
	}
	next := s.pending[0]
	s.pending = s.pending[1:]
	s.event, s.last, s.fruitless = next.event, next.id, 0
	return true
}

// Event is the event Next moved to.
func (s *EventStream) Event() Event { return s.event }

// Err is what ended the stream: nil when it was closed (or the server asked it not to
// reconnect), the context's error when that ended it, an APIError or a ConnectionError.
func (s *EventStream) Err() error { return s.err }

// Close ends the stream and its connection; Next then returns false. Closing twice is safe.
func (s *EventStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	s.cancel()
	s.mu.Lock()
	if s.conn != nil {
		s.conn.close()
		s.conn = nil
	}
	s.mu.Unlock()
	return nil
}

func (s *EventStream) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// stop ends the stream on err, unless the caller closed it (then without an error).
func (s *EventStream) stop(err error) {
	if s.isClosed() {
		s.done = true
		return
	}
	if s.ctx.Err() != nil {
		err = s.ctx.Err()
	}
	s.err = err
}

// drop closes a connection that ended.
func (s *EventStream) drop(conn *answer) {
	s.mu.Lock()
	if s.conn == conn {
		s.conn = nil
	}
	s.mu.Unlock()
	conn.close()
}

// connect opens a connection; on failure it decides whether a later one is tried.
func (s *EventStream) connect() {
	header := http.Header{"Accept": {"text/event-stream"}}
	if s.last != "" {
		header.Set("Last-Event-ID", s.last)
	}
	conn, err := s.client.open(s.ctx, call{method: "GET", path: "/v1/events/stream", query: s.query}, nil, header)
	if err != nil {
		if s.ctx.Err() != nil {
			s.stop(s.ctx.Err())
		} else if s.givesUp() {
			s.stop(&ConnectionError{BaseURL: s.client.baseURL, Err: err})
		}
		return
	}
	resp := conn.resp
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		content, _ := io.ReadAll(resp.Body)
		conn.close()
		delay, again := retryDelay(resp.StatusCode, resp.Header, s.fruitless, s.client.now(), s.client.jitter())
		if !again || s.givesUp() {
			s.stop(s.client.errorFrom(resp.StatusCode, resp.Header, content))
			return
		}
		s.retryAfter = &delay
		return
	}
	if resp.StatusCode == http.StatusNoContent {
		// The standard's way to ask a client not to reconnect (redial does not send it).
		conn.close()
		s.done = true
		return
	}
	contentType := resp.Header.Get("Content-Type")
	if media, _, _ := mime.ParseMediaType(contentType); media != "text/event-stream" {
		conn.close()
		if contentType == "" {
			contentType = "no content type"
		}
		s.stop(&APIError{Status: resp.StatusCode, Code: ErrorCodeInvalidResponse,
			Message: fmt.Sprintf("the event stream answered %s, not text/event-stream: check that the base URL points at a redial server", contentType)})
		return
	}
	s.everOpen = true
	s.parser = &sseParser{}
	conn.timer.Reset(s.client.streamIdle)
	s.mu.Lock()
	closed := s.isClosed()
	if !closed {
		s.conn = conn
	}
	s.mu.Unlock()
	if closed {
		conn.close()
	}
}

// read reads what the connection has; when it ends, the next Next reconnects.
func (s *EventStream) read(conn *answer) {
	n, err := conn.resp.Body.Read(s.buf)
	if n > 0 {
		conn.timer.Reset(s.client.streamIdle)
		for _, m := range s.parser.feed(s.buf[:n]) {
			event, err := s.take(m)
			if err != nil {
				s.drop(conn)
				s.stop(err)
				return
			}
			s.pending = append(s.pending, event)
		}
	}
	if err == nil {
		return
	}
	s.drop(conn)
	if s.isClosed() || s.ctx.Err() != nil {
		s.stop(s.ctx.Err())
		return
	}
	if s.parser.hasRetry {
		retry := s.parser.retry
		s.retry = &retry
	}
}

// take is the event a message carries, with the id a reconnect starts after.
func (s *EventStream) take(m sseMessage) (sseEvent, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(m.data)))
	if s.client.strict {
		dec.DisallowUnknownFields()
	}
	var event Event
	if err := dec.Decode(&event); err != nil {
		return sseEvent{}, &APIError{Status: http.StatusOK, Code: ErrorCodeInvalidResponse,
			Message: fmt.Sprintf("an event's data could not be read (%v): check that the base URL points at a redial server", err)}
	}
	id := m.id
	if id == "" {
		id = event.ID
	}
	if id == "" {
		id = s.last
	}
	return sseEvent{id: id, event: event}, nil
}

// pause is the wait before the next connection.
func (s *EventStream) pause() time.Duration {
	var delay time.Duration
	switch {
	case s.retryAfter != nil:
		delay, s.retryAfter = *s.retryAfter, nil
	case s.retry != nil:
		delay = *s.retry
	default:
		delay = backoff(s.fruitless, s.client.jitter())
	}
	s.fruitless++
	return delay
}

func (s *EventStream) givesUp() bool {
	return !s.everOpen && s.fruitless >= s.client.maxRetries
}
