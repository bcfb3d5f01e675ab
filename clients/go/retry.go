// Owns the retry decision, pure: which answers are tried again, after how long (the server's
// Retry-After, as seconds or an HTTP date, clamped; else a jittered backoff). It takes the time and
// the jitter as arguments; the client owns the clock, the random source and the sleeping.

package redial

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// DefaultMaxRetries is how many times a call is tried again after a connection error, a 429 or
	// a 503, when Config.MaxRetries is 0.
	DefaultMaxRetries = 3
	// MaxRetryAfter is the longest the client waits on a Retry-After before trying again.
	MaxRetryAfter = 60 * time.Second
	// Without a Retry-After the client waits backoffBase, doubled per retry up to backoffCap, times
	// a jitter factor between 0.5 and 1.
	backoffBase = 250 * time.Millisecond
	backoffCap  = 5 * time.Second
)

// parseRetryAfter reads a Retry-After value: seconds (a decimal fraction too), or an HTTP date,
// from now. False when there is none, or it is neither. Never negative.
func parseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if seconds, err := strconv.ParseFloat(value, 64); err == nil {
		if math.IsNaN(seconds) || math.IsInf(seconds, 0) {
			return 0, false
		}
		if seconds <= 0 {
			return 0, true
		}
		if seconds > float64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(seconds * float64(time.Second)), true
	}
	at, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	if wait := at.Sub(now); wait > 0 {
		return wait, true
	}
	return 0, true
}

// backoff is the wait before retry number retry (0 for the first) when the server gave no
// Retry-After; jitter is uniform in [0, 1).
func backoff(retry int, jitter float64) time.Duration {
	wait := backoffCap
	if retry < 16 {
		if doubled := backoffBase << uint(retry); doubled < backoffCap {
			wait = doubled
		}
	}
	return time.Duration((0.5 + 0.5*jitter) * float64(wait))
}

// retryDelay is the wait before trying an answer again, and false when it is not to be retried:
// only 429 and 503 are, after their Retry-After (at most MaxRetryAfter) or a backoff.
func retryDelay(status int, header http.Header, retry int, now time.Time, jitter float64) (time.Duration, bool) {
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return 0, false
	}
	after, given := parseRetryAfter(header.Get("Retry-After"), now)
	if !given {
		return backoff(retry, jitter), true
	}
	if after > MaxRetryAfter {
		after = MaxRetryAfter
	}
	return after, true
}
