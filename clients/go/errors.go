// Owns the client's typed errors: what the API refused (APIError), what never reached it
// (ConnectionError), a delivery that failed verification (WebhookVerificationError), and a verified
// delivery that is not a callback event (CallbackParseError). Match them with errors.As.

package redial

import (
	"fmt"
	"time"
)

// Codes the client gives an APIError itself, for answers that carry no code of the API's.
const (
	// ErrorCodeHTTPError: an error answer whose body is not the API's {"error": {...}} (a proxy's
	// page, say); Message holds the start of the body.
	ErrorCodeHTTPError ErrorCode = "http_error"
	// ErrorCodeInvalidResponse: a 2xx answer that could not be read as the operation's result.
	ErrorCodeInvalidResponse ErrorCode = "invalid_response"
)

// APIError is the server's error answer: its HTTP status and the body's code and message.
//
// Code is machine-readable and stable, one of ErrorCodeValues (a newer server's code reads as
// it is), or ErrorCodeHTTPError / ErrorCodeInvalidResponse for an answer that carries none.
// Message says what was wrong and what to do. RetryAfter is the answer's Retry-After, when it
// gave one (seconds or an HTTP date; never negative).
type APIError struct {
	Status     int
	Code       ErrorCode
	Message    string
	RetryAfter *time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("redial: %d %s: %s", e.Status, e.Code, e.Message)
}

// ConnectionError is a call that got no answer at all (refused, reset, timed out), even after
// the client's retries.
type ConnectionError struct {
	BaseURL string
	Err     error
}

func (e *ConnectionError) Error() string {
	return fmt.Sprintf("redial: could not reach %s (%v): check that the server runs and that "+
		"Config.BaseURL (or REDIAL_SERVER) points at it", e.BaseURL, e.Err)
}

func (e *ConnectionError) Unwrap() error { return e.Err }

// VerificationFailure says why a delivery failed verification.
type VerificationFailure string

// The reasons a delivery fails verification.
const (
	// A webhook-id, webhook-timestamp or webhook-signature header is missing: the sender signs
	// nothing (no signing_secrets), or this is no delivery of Redial's.
	VerificationMissingHeader VerificationFailure = "missing_header"
	// webhook-timestamp is not unix seconds.
	VerificationInvalidTimestamp VerificationFailure = "invalid_timestamp"
	// webhook-timestamp is further from now than the tolerance: a replayed request, or a clock off.
	VerificationStaleTimestamp VerificationFailure = "stale_timestamp"
	// No v1 signature matches any of the secrets: a wrong secret, or a changed body.
	VerificationNoMatchingSignature VerificationFailure = "no_matching_signature"
)

// WebhookVerificationError is a delivery whose signature headers are missing, stale, or match
// none of the secrets: answer 401 and do not act on it.
type WebhookVerificationError struct {
	Reason  VerificationFailure
	Message string
}

func (e *WebhookVerificationError) Error() string { return "redial: " + e.Message }

// CallbackParseError is a verified delivery whose body is not a callback event (a job's own
// delivery sent to the callback URL, say): answer 400 and do not act on it.
type CallbackParseError struct {
	Message string
}

func (e *CallbackParseError) Error() string { return "redial: " + e.Message }
