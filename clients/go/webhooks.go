// Owns verifying Redial's signed deliveries (Standard Webhooks) in a receiver: the secrets read
// once, the timestamp's tolerance, HMAC-SHA256 over "<id>.<timestamp>.<body>" compared in constant
// time, any of several signatures in the header against any of several secrets (a rotation). And
// signing, for tests. Reading a callback event's body is callbacks.go's.

package redial

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// SecretPrefix starts a signing secret as redial.toml writes it: whsec_ and base64.
	SecretPrefix = "whsec_"
	// DefaultTolerance is how far webhook-timestamp may be from now when
	// WebhookVerifier.Tolerance is 0.
	DefaultTolerance = 5 * time.Minute
)

// WebhookVerifier checks the signature headers of Redial's deliveries against a set of secrets.
// Make one with NewWebhookVerifier; it is safe for concurrent use.
type WebhookVerifier struct {
	keys [][]byte
	// Tolerance is how far webhook-timestamp may be from Now (DefaultTolerance when 0).
	Tolerance time.Duration
	// Now is the current time (time.Now when nil); tests set it.
	Now func() time.Time
}

// NewWebhookVerifier is a verifier for the given secrets (whsec_ and base64, as in
// redial.toml's signing_secrets; the prefix may be left out). During a rotation give the new
// secret and the old: a delivery signed with either verifies. It fails on a secret that is not
// base64, and without any.
func NewWebhookVerifier(secrets ...string) (*WebhookVerifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("redial: give at least one signing secret (whsec_...)")
	}
	v := &WebhookVerifier{}
	for i, secret := range secrets {
		key, err := secretKey(secret)
		if err != nil {
			return nil, fmt.Errorf("%w (secret %d)", err, i)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

func secretKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, errors.New("redial: a signing secret is whsec_ followed by base64, as in redial.toml")
	}
	return key, nil
}

// SignWebhook is the webhook-signature value ("v1,<base64>") Redial sends for this secret, id,
// timestamp (unix seconds) and body.
func SignWebhook(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body)), nil
}

func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	h.Write(body)
	return h.Sum(nil)
}

// header is a header's values joined with spaces, its name matched in any case (an http.Header
// written by hand may not be canonical).
func header(h http.Header, name string) string {
	values := h.Values(name)
	if len(values) == 0 {
		for key, v := range h {
			if strings.EqualFold(key, name) {
				values = append(values, v...)
			}
		}
	}
	return strings.Join(values, " ")
}

// Verify checks a delivery's webhook-id, webhook-timestamp and webhook-signature headers against
// the raw body (exactly as received: not parsed and written again), and returns the webhook-id:
// the job's idempotency key, the same on every attempt, to drop repeats by. It fails with a
// WebhookVerificationError when a header is missing, the timestamp is further than Tolerance from
// Now, or no signature matches a secret.
func (v *WebhookVerifier) Verify(h http.Header, body []byte) (string, error) {
	id, stamp, signatures := header(h, "webhook-id"), header(h, "webhook-timestamp"), header(h, "webhook-signature")
	for _, missing := range []struct{ name, value string }{
		{"webhook-id", id}, {"webhook-timestamp", stamp}, {"webhook-signature", signatures},
	} {
		if missing.value == "" {
			return "", &WebhookVerificationError{Reason: VerificationMissingHeader,
				Message: "missing " + missing.name + " header: is the queue configured with signing_secrets?"}
		}
	}
	timestamp, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil || strings.Trim(stamp, "0123456789") != "" {
		return "", &WebhookVerificationError{Reason: VerificationInvalidTimestamp,
			Message: "invalid webhook-timestamp: expected unix seconds"}
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tolerance := v.Tolerance
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	off := now().Unix() - timestamp
	if off < 0 {
		off = -off
	}
	if off > int64(tolerance/time.Second) {
		return "", &WebhookVerificationError{Reason: VerificationStaleTimestamp,
			Message: "stale webhook-timestamp: check this host's clock, or drop the replayed request"}
	}
	var given [][]byte
	for _, s := range strings.Fields(signatures) {
		if encoded := strings.TrimPrefix(s, "v1,"); encoded != s {
			if raw, err := base64.StdEncoding.DecodeString(encoded); err == nil {
				given = append(given, raw)
			}
		}
	}
	for _, key := range v.keys {
		expected := mac(key, id, timestamp, body)
		for _, candidate := range given {
			if hmac.Equal(expected, candidate) {
				return id, nil
			}
		}
	}
	return "", &WebhookVerificationError{Reason: VerificationNoMatchingSignature,
		Message: "no signature matches: check the signing secret"}
}
