// Owns reading a Server-Sent Events body into messages, as the HTML standard's event stream
// interpretation does: lines ending in CRLF, LF or CR (a CRLF may be split between two chunks), a
// leading byte order mark dropped, comment lines starting with a colon, a data field on several
// lines, and the last event id kept from one message to the next. Pure: the stream (events.go)
// feeds it the bytes of one connection; it knows nothing of HTTP or reconnecting.

package redial

import (
	"bytes"
	"strconv"
	"strings"
	"time"
)

// sseMessage is one dispatched message.
type sseMessage struct {
	id    string // the last event id the stream set, at this message: what a reconnect sends
	event string // the event field, "message" when none was given
	data  string // the data lines joined with "\n"
}

var byteOrderMark = []byte{0xEF, 0xBB, 0xBF}

// sseParser turns the bytes of one event stream, chunk by chunk, into messages.
type sseParser struct {
	head    []byte // the stream's first bytes, while they may still be a byte order mark
	started bool   // the first bytes were checked for a byte order mark
	partial []byte // a line begun in an earlier chunk
	skipLF  bool   // the previous chunk ended in CR: a leading LF belongs to it
	data    []string
	event   string
	lastID  string
	// retry is the reconnection time the stream asked for (a retry field), when hasRetry.
	retry    time.Duration
	hasRetry bool
}

// feed reads a chunk and returns the messages it completed.
func (p *sseParser) feed(chunk []byte) []sseMessage {
	if !p.started {
		p.head = append(p.head, chunk...)
		if len(p.head) < len(byteOrderMark) && bytes.HasPrefix(byteOrderMark, p.head) {
			return nil
		}
		chunk = bytes.TrimPrefix(p.head, byteOrderMark)
		p.head, p.started = nil, true
	}
	if len(chunk) == 0 {
		return nil
	}
	if p.skipLF {
		p.skipLF = false
		if chunk[0] == '\n' {
			chunk = chunk[1:]
		}
	}
	var out []sseMessage
	start := 0
	for i := 0; i < len(chunk); i++ {
		ch := chunk[i]
		if ch != '\r' && ch != '\n' {
			continue
		}
		line := string(p.partial) + string(chunk[start:i])
		p.partial = p.partial[:0]
		if ch == '\r' {
			if i+1 == len(chunk) {
				p.skipLF = true
			} else if chunk[i+1] == '\n' {
				i++
			}
		}
		start = i + 1
		if m, ok := p.line(strings.ToValidUTF8(line, "\uFFFD")); ok {
			out = append(out, m)
		}
	}
	p.partial = append(p.partial, chunk[start:]...)
	return out
}

func (p *sseParser) line(line string) (sseMessage, bool) {
	if line == "" {
		return p.dispatch()
	}
	if line[0] == ':' {
		return sseMessage{}, false
	}
	field, value := line, ""
	if colon := strings.IndexByte(line, ':'); colon >= 0 {
		field, value = line[:colon], strings.TrimPrefix(line[colon+1:], " ")
	}
	// A field other than these four is ignored.
	switch field {
	case "event":
		p.event = value
	case "data":
		p.data = append(p.data, value)
	case "id":
		if !strings.ContainsRune(value, 0) {
			p.lastID = value
		}
	case "retry":
		if value != "" && strings.Trim(value, "0123456789") == "" {
			if ms, err := strconv.ParseInt(value, 10, 64); err == nil && ms < int64(1<<62)/int64(time.Millisecond) {
				p.retry, p.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
	return sseMessage{}, false
}

func (p *sseParser) dispatch() (sseMessage, bool) {
	data, event := p.data, p.event
	p.data, p.event = nil, ""
	if data == nil {
		return sseMessage{}, false
	}
	if event == "" {
		event = "message"
	}
	return sseMessage{id: p.lastID, event: event, data: strings.Join(data, "\n")}, true
}
