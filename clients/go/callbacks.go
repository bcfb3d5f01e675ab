// Owns reading a completion callback in its receiver: the signature checked first
// (WebhookVerifier.Verify), then the body checked to be a callback event before it is handed
// out; and an http.Handler that does both and answers as Redial expects. The callback event is
// written here by hand: the API document does not describe it (the Python and TypeScript clients
// write it by hand too).

package redial

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// CallbackEvent is the JSON body Redial POSTs to a job's callback URL.
type CallbackEvent struct {
	// Type is EventKindJobCompleted, EventKindJobDead or EventKindJobCancelled.
	Type EventKind `json:"type"`
	// Timestamp is when the job finished.
	Timestamp time.Time   `json:"timestamp"`
	Data      CallbackJob `json:"data"`
}

// CallbackJob is the finished job a callback event tells of. Attempts counts failed attempts, as
// a Job's does; Runs every attempt. Error is the last attempt's transport error kind when it got
// no response.
type CallbackJob struct {
	ID              string            `json:"id"`
	Queue           string            `json:"queue"`
	Endpoint        string            `json:"endpoint"`
	Group           *string           `json:"group"`
	Tags            []string          `json:"tags"`
	IdempotencyKey  *string           `json:"idempotency_key"`
	State           JobState          `json:"state"`
	Category        *DeadCategory     `json:"category"`
	Reason          *string           `json:"reason"`
	Attempts        int               `json:"attempts"`
	UnknownAttempts int               `json:"unknown_attempts"`
	Deferrals       int               `json:"deferrals"`
	Stalls          int               `json:"stalls"`
	Replays         int               `json:"replays"`
	Runs            int               `json:"runs"`
	CreatedAt       time.Time         `json:"created_at"`
	FinishedAt      *time.Time        `json:"finished_at"`
	Response        *CallbackResponse `json:"response"`
	Error           *string           `json:"error"`
}

// CallbackResponse is the final response in a callback event. Body is text, or base64 when the
// body was not UTF-8 (BodyEncoding "base64"); Bytes decodes it. Headers that are secrets are left
// out; Truncated says the body was cut at the size Redial keeps.
type CallbackResponse struct {
	Status       int               `json:"status"`
	Headers      map[string]string `json:"headers"`
	Body         *string           `json:"body"`
	BodyEncoding string            `json:"body_encoding"`
	ContentType  *string           `json:"content_type"`
	Truncated    bool              `json:"truncated"`
}

// Bytes is the response body as it was sent (base64 decoded), nil when none was kept.
func (r *CallbackResponse) Bytes() ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if r.BodyEncoding == "base64" {
		return base64.StdEncoding.DecodeString(*r.Body)
	}
	return []byte(*r.Body), nil
}

// VerifiedCallback is a callback that verified: ID is the webhook-id, the same on every attempt
// of one event (act once per ID), and Event the body.
type VerifiedCallback struct {
	ID    string
	Event CallbackEvent
}

// ParseCallback verifies a callback delivery as Verify does, then reads its body as a
// CallbackEvent. It fails with a WebhookVerificationError when the signature does not verify
// (answer 401), and a CallbackParseError when a verified body is not a callback event (answer
// 400).
func (v *WebhookVerifier) ParseCallback(h http.Header, body []byte) (*VerifiedCallback, error) {
	id, err := v.Verify(h, body)
	if err != nil {
		return nil, err
	}
	event, err := parseCallbackEvent(body)
	if err != nil {
		return nil, err
	}
	return &VerifiedCallback{ID: id, Event: event}, nil
}

// parseCallbackEvent checks the fields a handler acts on; other fields pass as the server wrote
// them, so that a newer server's additions still read.
func parseCallbackEvent(body []byte) (CallbackEvent, error) {
	var shape struct {
		Type      any `json:"type"`
		Timestamp any `json:"timestamp"`
		Data      *struct {
			ID       any             `json:"id"`
			Queue    any             `json:"queue"`
			State    any             `json:"state"`
			Response json.RawMessage `json:"response"`
		} `json:"data"`
	}
	if !json.Valid(body) {
		return CallbackEvent{}, &CallbackParseError{"the body is not JSON: give this URL only as a job's callback url"}
	}
	notEvent := &CallbackParseError{"the body is not a callback event (type job.completed, job.dead or job.cancelled): give this URL only as a job's callback url"}
	var object map[string]json.RawMessage
	if json.Unmarshal(body, &object) != nil || object == nil || json.Unmarshal(body, &shape) != nil {
		return CallbackEvent{}, notEvent
	}
	kind, _ := shape.Type.(string)
	if kind != string(EventKindJobCompleted) && kind != string(EventKindJobDead) && kind != string(EventKindJobCancelled) {
		return CallbackEvent{}, notEvent
	}
	_, stamped := shape.Timestamp.(string)
	if !stamped || shape.Data == nil || !isString(shape.Data.ID) || !isString(shape.Data.Queue) {
		return CallbackEvent{}, &CallbackParseError{fmt.Sprintf("the %s event lacks timestamp, data.id or data.queue", kind)}
	}
	if state, _ := shape.Data.State.(string); state != strings.TrimPrefix(kind, "job.") {
		got, _ := json.Marshal(shape.Data.State)
		return CallbackEvent{}, &CallbackParseError{fmt.Sprintf("the %s event's data.state is %s", kind, got)}
	}
	if r := shape.Data.Response; len(r) > 0 && string(r) != "null" {
		var response struct {
			Status       *int   `json:"status"`
			BodyEncoding string `json:"body_encoding"`
		}
		if json.Unmarshal(r, &response) != nil || response.Status == nil ||
			(response.BodyEncoding != "text" && response.BodyEncoding != "base64") {
			return CallbackEvent{}, &CallbackParseError{fmt.Sprintf("the %s event's data.response has no status or body_encoding", kind)}
		}
	}
	var event CallbackEvent
	if err := json.Unmarshal(body, &event); err != nil {
		return CallbackEvent{}, &CallbackParseError{fmt.Sprintf("the %s event could not be read: %v", kind, err)}
	}
	return event, nil
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// maxCallbackBody bounds the body CallbackHandler reads: an event with the largest response body
// Redial keeps is far smaller.
const maxCallbackBody = 16 << 20

// CallbackHandler is an http.Handler for a callback URL: it reads the raw body, verifies and
// parses it (ParseCallback), and calls handle. It answers 204 when handle returns nil, 500 when
// it returns an error (Redial retries the delivery), 401 for a signature that does not verify,
// 400 for a body that is no callback event, 405 for a method other than POST. Redial may deliver
// one event more than once: act once per VerifiedCallback.ID.
func (v *WebhookVerifier) CallbackHandler(handle func(ctx context.Context, callback VerifiedCallback) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a callback event", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCallbackBody))
		if err != nil {
			http.Error(w, "the body could not be read", http.StatusBadRequest)
			return
		}
		callback, err := v.ParseCallback(r.Header, body)
		var unverified *WebhookVerificationError
		switch {
		case errors.As(err, &unverified):
			http.Error(w, unverified.Message, http.StatusUnauthorized)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := handle(r.Context(), *callback); err != nil {
			http.Error(w, "the callback could not be handled", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
