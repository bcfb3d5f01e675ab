// Owns the Server-Sent Events parser's cases: one check and one line per case. The chunks are fed
// one by one, as a connection delivers them, so a line end or a UTF-8 character split between two
// chunks is a case of its own. The parser is pure; the stream against a real server is in
// events_test.go.

package redial

import (
	"reflect"
	"testing"
	"time"
)

func TestSSEParser(t *testing.T) {
	const M = "message"
	type msg = [3]string // id, event, data
	for _, c := range []struct {
		name   string
		chunks []string
		want   []msg
	}{
		// line ends
		{"LF", []string{"id: 1\nevent: job.dead\ndata: {}\n\n"}, []msg{{"1", "job.dead", "{}"}}},
		{"CRLF", []string{"id: 1\r\nevent: job.dead\r\ndata: {}\r\n\r\n"}, []msg{{"1", "job.dead", "{}"}}},
		{"CR", []string{"id: 1\revent: job.dead\rdata: {}\r\r"}, []msg{{"1", "job.dead", "{}"}}},
		{"CRLF split", []string{"data: a\r", "\n", "\r", "\ndata: b\r\n\r\n"}, []msg{{"", M, "a"}, {"", M, "b"}}},
		{"CR then CR", []string{"data: a\r", "\r"}, []msg{{"", M, "a"}}},
		{"CR, empty chunk, LF", []string{"data: a\r", "", "\n\r\n"}, []msg{{"", M, "a"}}},
		{"mixed", []string{"data: a\n\r\n\rdata: b\n\n"}, []msg{{"", M, "a"}, {"", M, "b"}}},
		// fields
		{"split anywhere", []string{"da", `ta: {"a"`, ":1}\n", "\n"}, []msg{{"", M, `{"a":1}`}}},
		{"multi-line data", []string{"data: one\ndata: two\ndata:\ndata\n\n"}, []msg{{"", M, "one\ntwo\n\n"}}},
		{"comments", []string{": keepalive\n\n", ":\n", "data: x\n: between\n\n"}, []msg{{"", M, "x"}}},
		{"one space dropped", []string{"data:x\n\n", "data:  y\n\n"}, []msg{{"", M, "x"}, {"", M, " y"}}},
		{"no colon", []string{"event\ndata: x\n\n"}, []msg{{"", M, "x"}}},
		{"unknown fields", []string{"foo: bar\nDATA: no\ndata: x\n\n"}, []msg{{"", M, "x"}}},
		{"colon in value", []string{"data: a: b\n\n"}, []msg{{"", M, "a: b"}}},
		{"UTF-8 split", []string{"data: \xc3", "\xa9t\xc3\xa9\n\n"}, []msg{{"", M, "\u00e9t\u00e9"}}},
		{"invalid UTF-8 replaced", []string{"data: a\xffb\n\n"}, []msg{{"", M, "a\uFFFDb"}}},
		// dispatch
		{"event without data", []string{"event: job.dead\n\ndata: x\n\n"}, []msg{{"", M, "x"}}},
		{"id without data", []string{"id: 7\n\ndata: x\n\n"}, []msg{{"7", M, "x"}}},
		{"cut event", []string{"data: x\n"}, nil},
		{"cut line", []string{"data: x"}, nil},
		{"blank lines", []string{"\n\n\n"}, nil},
		// the last event id
		{"id carries over", []string{"id: 0-1\ndata: a\n\ndata: b\n\n"}, []msg{{"0-1", M, "a"}, {"0-1", M, "b"}}},
		{"NUL id ignored", []string{"id: 0-1\ndata: a\n\nid: 0-\x002\ndata: b\n\n"}, []msg{{"0-1", M, "a"}, {"0-1", M, "b"}}},
		{"empty id clears", []string{"id: 0-1\ndata: a\n\nid\ndata: b\n\n"}, []msg{{"0-1", M, "a"}, {"", M, "b"}}},
		// the byte order mark
		{"BOM dropped", []string{"\xef\xbb\xbfdata: x\n\n"}, []msg{{"", M, "x"}}},
		{"BOM split", []string{"\xef\xbb", "\xbfdata: x\n\n"}, []msg{{"", M, "x"}}},
		{"one BOM only", []string{"\xef\xbb\xbf", "\xef\xbb\xbfdata: x\n\n"}, nil},
		{"short first chunk", []string{"d", "ata: x\n\n"}, []msg{{"", M, "x"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &sseParser{}
			var got []msg
			for _, chunk := range c.chunks {
				for _, m := range p.feed([]byte(chunk)) {
					got = append(got, msg{m.id, m.event, m.data})
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestSSERetryField(t *testing.T) {
	for _, c := range []struct {
		line  string
		retry time.Duration
		given bool
	}{
		{"retry: 1500", 1500 * time.Millisecond, true},
		{"retry: 0", 0, true},
		{"retry: 15s", 0, false},
		{"retry: \xd9\xa3", 0, false},
		{"retry:", 0, false},
		{"retry: 99999999999999999999", 0, false},
	} {
		p := &sseParser{}
		p.feed([]byte(c.line + "\n\n"))
		if p.retry != c.retry || p.hasRetry != c.given {
			t.Errorf("%q: got %v %v, want %v %v", c.line, p.retry, p.hasRetry, c.retry, c.given)
		}
	}
}
