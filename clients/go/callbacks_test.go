// Owns the callback tests: bodies signed with the vector's secret and read with ParseCallback
// (text and base64 responses, none at all, bad signatures, bodies that are no callback event),
// CallbackHandler's answers, and a real callback from `redial serve` for a finished job, received
// by CallbackHandler.

package redial

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

const callbackID = "callback~completed~7.0~charge-1"

var callbackAt = time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)

const completedEvent = `{"type": "job.completed", "timestamp": "2026-12-03T14:59:58.123Z",
 "data": {"id": "charge-1", "queue": "payments", "endpoint": "https://api.example.com",
  "group": null, "tags": ["invoice"], "idempotency_key": "charge-1",
  "state": "completed", "category": null, "reason": "200 OK",
  "attempts": 1, "unknown_attempts": 0, "deferrals": 0, "stalls": 0, "replays": 0, "runs": 2,
  "created_at": "2026-12-03T14:59:50Z", "finished_at": "2026-12-03T14:59:58.123Z",
  "response": {"status": 200, "headers": {"content-type": "application/json"},
   "body": "{\"charged\":true}", "body_encoding": "text",
   "content_type": "application/json", "truncated": false},
  "error": null, "added_by_a_newer_server": 1}}`

// signed is the headers Redial would send with body, signed with secret at callbackAt.
func signed(t *testing.T, secret, body string) http.Header {
	t.Helper()
	signature, err := SignWebhook(secret, callbackID, callbackAt.Unix(), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{"Webhook-Id": {callbackID}, "Webhook-Timestamp": {strconv.FormatInt(callbackAt.Unix(), 10)},
		"Webhook-Signature": {signature}}
}

// edited is the completed event with its fields replaced: a path of keys (data.response) and a
// JSON value.
func edited(t *testing.T, changes map[string]string) string {
	t.Helper()
	var event map[string]any
	if err := json.Unmarshal([]byte(completedEvent), &event); err != nil {
		t.Fatal(err)
	}
	for at, value := range changes {
		keys := strings.Split(at, ".")
		object := event
		for _, k := range keys[:len(keys)-1] {
			object = object[k].(map[string]any)
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			t.Fatal(err)
		}
		object[keys[len(keys)-1]] = v
	}
	out, _ := json.Marshal(event)
	return string(out)
}

func TestACompletedEventReadsTypedWithTheWebhookID(t *testing.T) {
	v := verifierAt(t, callbackAt, signingSecret)
	got, err := v.ParseCallback(signed(t, signingSecret, completedEvent), []byte(completedEvent))
	if err != nil {
		t.Fatal(err)
	}
	e, data := got.Event, got.Event.Data
	if got.ID != callbackID || e.Type != EventKindJobCompleted || !e.Timestamp.Equal(time.Date(2026, 12, 3, 14, 59, 58, 123e6, time.UTC)) {
		t.Fatalf("%+v", got)
	}
	if data.ID != "charge-1" || data.Queue != "payments" || data.State != JobStateCompleted || data.Category != nil ||
		data.Group != nil || deref(data.Reason) != "200 OK" || data.Runs != 2 || data.Attempts != 1 || len(data.Tags) != 1 ||
		data.FinishedAt == nil || data.Error != nil {
		t.Fatalf("%+v", data)
	}
	body, err := data.Response.Bytes()
	if err != nil || string(body) != `{"charged":true}` || data.Response.Status != 200 ||
		data.Response.Headers["content-type"] != "application/json" || deref(data.Response.ContentType) != "application/json" {
		t.Fatalf("%+v %q %v", data.Response, body, err)
	}
	// A rotated secret reads the same.
	rotated := verifierAt(t, callbackAt, wrongSecret, signingSecret)
	if again, err := rotated.ParseCallback(signed(t, signingSecret, completedEvent), []byte(completedEvent)); err != nil || again.ID != callbackID {
		t.Fatal(err)
	}
}

func TestABase64ResponseBodyDecodesToBytes(t *testing.T) {
	raw := []byte{0xff, 0x00, 0xfe, 0x80}
	body := edited(t, map[string]string{
		"type": `"job.dead"`, "data.state": `"dead"`, "data.category": `"permanent"`, "data.reason": `"400 Bad Request"`,
		"data.response": `{"status": 400, "headers": {}, "body": "` + base64.StdEncoding.EncodeToString(raw) +
			`", "body_encoding": "base64", "content_type": "application/octet-stream", "truncated": true}`,
	})
	got, err := verifierAt(t, callbackAt, signingSecret).ParseCallback(signed(t, signingSecret, body), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	response := got.Event.Data.Response
	decoded, err := response.Bytes()
	if got.Event.Type != EventKindJobDead || deref(got.Event.Data.Category) != DeadCategoryPermanent ||
		!response.Truncated || err != nil || !bytes.Equal(decoded, raw) {
		t.Fatalf("%+v %v %v", got.Event, decoded, err)
	}
}

func TestNoResponseCarriesTheTransportError(t *testing.T) {
	body := edited(t, map[string]string{"type": `"job.dead"`, "data.state": `"dead"`,
		"data.category": `"transient_exhausted"`, "data.response": "null", "data.error": `"connect"`})
	got, err := verifierAt(t, callbackAt, signingSecret).ParseCallback(signed(t, signingSecret, body), []byte(body))
	if err != nil || got.Event.Data.Response != nil || deref(got.Event.Data.Error) != "connect" {
		t.Fatalf("%+v %v", got, err)
	}
	none := &CallbackResponse{Status: 204, BodyEncoding: "text"}
	if b, err := none.Bytes(); b != nil || err != nil {
		t.Fatalf("%q %v", b, err)
	}
}

func TestABadSignatureIsRefusedBeforeTheBodyIsRead(t *testing.T) {
	header := signed(t, signingSecret, completedEvent)
	for _, c := range []struct {
		secret, body string
		at           time.Time
		header       http.Header
		want         VerificationFailure
	}{
		{wrongSecret, completedEvent, callbackAt, header, VerificationNoMatchingSignature},
		{signingSecret, strings.Replace(completedEvent, "charge-1", "charge-2", 1), callbackAt, header, VerificationNoMatchingSignature},
		{signingSecret, completedEvent, callbackAt.Add(301 * time.Second), header, VerificationStaleTimestamp},
		// Not JSON, and unsigned: the signature's failure is the one reported.
		{signingSecret, "not json", callbackAt, http.Header{}, VerificationMissingHeader},
	} {
		_, err := verifierAt(t, c.at, c.secret).ParseCallback(c.header, []byte(c.body))
		if got := failure(t, err); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
	}
}

func TestASignedBodyThatIsNoCallbackEvent(t *testing.T) {
	for _, c := range []struct{ body, message string }{
		{`{"order": 42}`, "not a callback event"},
		{"not json", "not JSON"},
		{"[1, 2]", "not a callback event"},
		{"null", "not a callback event"},
		{edited(t, map[string]string{"type": `"invoice.paid"`}), "not a callback event"},
		{`{"type": "job.completed", "timestamp": "2026-12-03T15:00:00Z"}`, "lacks"},
		{edited(t, map[string]string{"data.id": "7"}), "lacks"},
		{edited(t, map[string]string{"data.state": `"dead"`}), `data.state is "dead"`},
		{edited(t, map[string]string{"data.response": `{"status": 200}`}), "body_encoding"},
		{edited(t, map[string]string{"data.response": `{"status": "200", "body_encoding": "text"}`}), "body_encoding"},
		{edited(t, map[string]string{"timestamp": `"yesterday"`}), "could not be read"},
	} {
		_, err := verifierAt(t, callbackAt, signingSecret).ParseCallback(signed(t, signingSecret, c.body), []byte(c.body))
		var e *CallbackParseError
		if !errors.As(err, &e) || !strings.Contains(e.Message, c.message) {
			t.Errorf("%s: got %v, want a *CallbackParseError with %q", c.body, err, c.message)
		}
	}
}

func TestCallbackHandlerAnswers(t *testing.T) {
	v := verifierAt(t, callbackAt, signingSecret)
	var handled []VerifiedCallback
	fail := false
	h := v.CallbackHandler(func(ctx context.Context, cb VerifiedCallback) error {
		handled = append(handled, cb)
		if fail {
			return errors.New("the database is down")
		}
		return nil
	})
	serve := func(method, body string, header http.Header) int {
		req := httptest.NewRequest(method, "/done", strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	good := signed(t, signingSecret, completedEvent)
	notEvent := `{"order": 42}`
	for _, c := range []struct {
		name, method, body string
		header             http.Header
		fail               bool
		status, handled    int
	}{
		{"an event", "POST", completedEvent, good, false, 204, 1},
		{"a tampered body", "POST", strings.Replace(completedEvent, "200 OK", "201 Created", 1), good, false, 401, 0},
		{"unsigned", "POST", completedEvent, http.Header{}, false, 401, 0},
		{"no callback event", "POST", notEvent, signed(t, signingSecret, notEvent), false, 400, 0},
		{"a failing handler", "POST", completedEvent, good, true, 500, 1},
		{"a GET", "GET", "", good, false, 405, 0},
	} {
		handled, fail = nil, c.fail
		if got := serve(c.method, c.body, c.header); got != c.status || len(handled) != c.handled {
			t.Errorf("%s: %d, handled %d; want %d, %d", c.name, got, len(handled), c.status, c.handled)
		}
	}
}

func TestARealCallbackIsReceived(t *testing.T) {
	ctx := testContext(t)
	r := newReceiver(t)
	v, err := NewWebhookVerifier(signingSecret)
	if err != nil {
		t.Fatal(err)
	}
	type delivery struct{ callback VerifiedCallback }
	delivered := make(chan delivery, 10)
	handler := v.CallbackHandler(func(ctx context.Context, cb VerifiedCallback) error {
		delivered <- delivery{callback: cb}
		return nil
	})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer app-secret" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, req)
	}))
	defer app.Close()

	c := newClient(t, callbackServer.get(t).url)
	job, err := c.Enqueue(ctx, JobInput{
		Tags:     []string{"invoice"},
		Request:  RequestInput{Method: "POST", URL: r.origin + "/charge", Body: map[string]int{"amount": 4200}},
		Callback: &CallbackInput{URL: app.URL + "/done", On: []CallbackOn{CallbackOnCompleted}, Headers: map[string]string{"authorization": "Bearer app-secret"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got delivery
	select {
	case got = <-delivered:
	case <-time.After(wait):
		t.Fatal("timed out waiting for the callback")
	}
	finished := finish(ctx, t, c, job.ID, JobStateCompleted)
	if finished.Callback == nil || len(finished.Callback.On) != 1 || finished.Callback.On[0] != CallbackOnCompleted {
		t.Fatalf("the job's callback: %+v", finished.Callback)
	}
	cb := got.callback
	if finished.CallbackDelivery == nil || cb.ID != *finished.CallbackDelivery {
		t.Fatalf("webhook-id %q, the job's delivery %v", cb.ID, deref(finished.CallbackDelivery))
	}
	data := cb.Event.Data
	if cb.Event.Type != EventKindJobCompleted || data.ID != job.ID || data.State != JobStateCompleted ||
		len(data.Tags) != 1 || data.Tags[0] != "invoice" || data.Attempts != 0 || data.Runs != 1 {
		t.Fatalf("%+v", cb.Event)
	}
	body, err := data.Response.Bytes()
	if data.Response == nil || data.Response.Status != 200 || deref(data.Response.ContentType) != "application/json" ||
		string(body) != `{"ok":true}` || err != nil {
		t.Fatalf("%+v %q", data.Response, body)
	}
	// The delivery is a job of its own, in the callbacks queue, and it completed.
	sent := finish(ctx, t, c, cb.ID, JobStateCompleted)
	if sent.Queue != "callbacks" || deref(sent.CallbackFor) != job.ID {
		t.Fatalf("the delivery: %+v", sent)
	}
}
