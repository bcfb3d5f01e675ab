// Owns the signature tests: the Standard Webhooks test vector (the one the other clients and the
// server check), rotation, several signatures, staleness, missing and malformed headers, and a real
// signed delivery from `redial serve`.

package redial

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The Standard Webhooks test vector.
const (
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

var wrongSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("not the secret, not at all!!!!!"))

func vectorHeader(signature string) http.Header {
	return http.Header{
		"Webhook-Id":        {vectorID},
		"Webhook-Timestamp": {"1614265330"},
		"Webhook-Signature": {signature},
	}
}

// verifierAt is a verifier of the secrets whose clock reads at.
func verifierAt(t *testing.T, at time.Time, secrets ...string) *WebhookVerifier {
	t.Helper()
	v, err := NewWebhookVerifier(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = func() time.Time { return at }
	return v
}

func failure(t *testing.T, err error) VerificationFailure {
	t.Helper()
	var e *WebhookVerificationError
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want a *WebhookVerificationError", err)
	}
	return e.Reason
}

var vectorAt = time.Unix(vectorTimestamp, 0)

func TestTheSpecsVectorSignsAndVerifies(t *testing.T) {
	signature, err := SignWebhook(signingSecret, vectorID, vectorTimestamp, []byte(vectorBody))
	if err != nil || signature != vectorSignature {
		t.Fatalf("SignWebhook = %q, %v; want %q", signature, err, vectorSignature)
	}
	id, err := verifierAt(t, vectorAt, signingSecret).Verify(vectorHeader(vectorSignature), []byte(vectorBody))
	if err != nil || id != vectorID {
		t.Fatalf("Verify = %q, %v", id, err)
	}
	// Without the whsec_ prefix, and with header names in any case (a header map written by hand).
	lower := http.Header{"webhook-id": {vectorID}, "WEBHOOK-TIMESTAMP": {"1614265330"}, "webhook-Signature": {vectorSignature}}
	if _, err := verifierAt(t, vectorAt.Add(299*time.Second), strings.TrimPrefix(signingSecret, SecretPrefix)).Verify(lower, []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
}

func TestAnyOfSeveralSecretsAndSignaturesMayMatch(t *testing.T) {
	other, err := SignWebhook(wrongSecret, vectorID, vectorTimestamp, []byte(vectorBody))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(vectorBody)
	for _, c := range []struct {
		secrets []string
		header  http.Header
	}{
		{[]string{wrongSecret, signingSecret}, vectorHeader(vectorSignature)}, // a rotation
		{[]string{signingSecret}, vectorHeader(other + " " + vectorSignature)},
		{[]string{wrongSecret}, vectorHeader(other + " " + vectorSignature)},
		{[]string{signingSecret}, vectorHeader("v2,abc " + vectorSignature)}, // other versions are skipped
		{[]string{signingSecret}, http.Header{ // the signature in two header lines
			"Webhook-Id": {vectorID}, "Webhook-Timestamp": {"1614265330"}, "Webhook-Signature": {other, vectorSignature}}},
	} {
		if _, err := verifierAt(t, vectorAt, c.secrets...).Verify(c.header, body); err != nil {
			t.Errorf("%v %v: %v", c.secrets, c.header, err)
		}
	}
}

func TestVerificationFailures(t *testing.T) {
	body := []byte(vectorBody)
	otherID := vectorHeader(vectorSignature)
	otherID.Set("Webhook-Id", "msg_other")
	badTimestamp := func(value string) http.Header {
		h := vectorHeader(vectorSignature)
		h.Set("Webhook-Timestamp", value)
		return h
	}
	without := func(name string) http.Header {
		h := vectorHeader(vectorSignature)
		h.Del(name)
		return h
	}
	for _, c := range []struct {
		name   string
		secret string
		at     time.Time
		header http.Header
		body   string
		want   VerificationFailure
	}{
		{"a wrong secret", wrongSecret, vectorAt, vectorHeader(vectorSignature), vectorBody, VerificationNoMatchingSignature},
		{"a changed body", signingSecret, vectorAt, vectorHeader(vectorSignature), vectorBody + " ", VerificationNoMatchingSignature},
		{"a changed id", signingSecret, vectorAt, otherID, vectorBody, VerificationNoMatchingSignature},
		{"a cut signature", signingSecret, vectorAt, vectorHeader("v1,g0hM9SsE"), vectorBody, VerificationNoMatchingSignature},
		{"no v1 signature", signingSecret, vectorAt, vectorHeader("g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), vectorBody, VerificationNoMatchingSignature},
		{"301 s late", signingSecret, vectorAt.Add(301 * time.Second), vectorHeader(vectorSignature), vectorBody, VerificationStaleTimestamp},
		{"301 s early", signingSecret, vectorAt.Add(-301 * time.Second), vectorHeader(vectorSignature), vectorBody, VerificationStaleTimestamp},
		{"this clock", signingSecret, time.Now(), vectorHeader(vectorSignature), vectorBody, VerificationStaleTimestamp},
		{"a malformed timestamp", signingSecret, vectorAt, badTimestamp("12abc"), vectorBody, VerificationInvalidTimestamp},
		{"a signed timestamp", signingSecret, vectorAt, badTimestamp("+1614265330"), vectorBody, VerificationInvalidTimestamp},
		{"no webhook-id", signingSecret, vectorAt, without("Webhook-Id"), vectorBody, VerificationMissingHeader},
		{"no webhook-timestamp", signingSecret, vectorAt, without("Webhook-Timestamp"), vectorBody, VerificationMissingHeader},
		{"no webhook-signature", signingSecret, vectorAt, without("Webhook-Signature"), vectorBody, VerificationMissingHeader},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := verifierAt(t, c.at, c.secret).Verify(c.header, []byte(c.body))
			if got := failure(t, err); got != c.want {
				t.Fatalf("got %s (%v), want %s", got, err, c.want)
			}
		})
	}
	// The tolerance: 300 s by default, either way; another when given.
	if _, err := verifierAt(t, vectorAt.Add(300*time.Second), signingSecret).Verify(vectorHeader(vectorSignature), body); err != nil {
		t.Fatal(err)
	}
	v := verifierAt(t, vectorAt.Add(-301*time.Second), signingSecret)
	v.Tolerance = 10 * time.Minute
	if _, err := v.Verify(vectorHeader(vectorSignature), body); err != nil {
		t.Fatal(err)
	}
	if err := (&WebhookVerificationError{Reason: VerificationMissingHeader, Message: "x"}); !strings.HasPrefix(err.Error(), "redial: ") {
		t.Fatal(err)
	}
}

func TestSecretsAreReadOnce(t *testing.T) {
	for _, bad := range [][]string{nil, {"whsec_not base64!"}, {signingSecret, "whsec_"}, {""}} {
		if _, err := NewWebhookVerifier(bad...); err == nil {
			t.Errorf("NewWebhookVerifier(%q) is no error", bad)
		}
	}
	if _, err := SignWebhook("whsec_???", "id", 1, nil); err == nil {
		t.Error("SignWebhook signs with a secret that is not base64")
	}
}

func TestARealDeliveryVerifies(t *testing.T) {
	ctx := testContext(t)
	r := newReceiver(t)
	c := newClient(t, signingServer.get(t).url)
	job, err := c.Enqueue(ctx, JobInput{Queue: "events", Request: RequestInput{
		Method: "POST", URL: r.origin + "/events", Body: map[string]any{"event": "invoice.paid", "amount": 4200}}})
	if err != nil {
		t.Fatal(err)
	}
	delivered := r.next(t, "the signed delivery")
	finish(ctx, t, c, job.ID, JobStateCompleted)
	var sent map[string]any
	if err := json.Unmarshal(delivered.body, &sent); err != nil || !reflect.DeepEqual(sent, map[string]any{"event": "invoice.paid", "amount": 4200.0}) {
		t.Fatalf("body %s", delivered.body)
	}
	if job.IdempotencyKey == nil || delivered.header.Get("webhook-id") != *job.IdempotencyKey {
		t.Fatalf("webhook-id %q, idempotency key %v", delivered.header.Get("webhook-id"), deref(job.IdempotencyKey))
	}
	v, err := NewWebhookVerifier(signingSecret)
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Verify(delivered.header, delivered.body)
	if err != nil || id != *job.IdempotencyKey {
		t.Fatalf("Verify = %q, %v", id, err)
	}
	rotated, _ := NewWebhookVerifier(wrongSecret, signingSecret)
	if _, err := rotated.Verify(delivered.header, delivered.body); err != nil {
		t.Fatal(err)
	}
	wrong, _ := NewWebhookVerifier(wrongSecret)
	if _, err := wrong.Verify(delivered.header, delivered.body); failure(t, err) != VerificationNoMatchingSignature {
		t.Fatal(err)
	}
}

func TestAnUnsignedQueueSendsNoSignature(t *testing.T) {
	ctx := testContext(t)
	r := newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	job, err := c.Enqueue(ctx, jobFor(r))
	if err != nil {
		t.Fatal(err)
	}
	delivered := r.next(t, "the delivery")
	finish(ctx, t, c, job.ID, JobStateCompleted)
	v, _ := NewWebhookVerifier(signingSecret)
	if _, err := v.Verify(delivered.header, delivered.body); failure(t, err) != VerificationMissingHeader {
		t.Fatal(err)
	}
}
