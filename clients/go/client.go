// Owns the Client: its configuration, sending one API call with its retries (connection errors,
// 429 and 503; retry.go decides how long to wait), and reading the answer into the operation's
// result or a typed error. Each operation (jobs.go, deadletters.go, endpoints.go, schedules.go,
// events.go) only builds its call; none sends a request or reads an error on its own.

package redial

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

const (
	// DefaultBaseURL is the server a Client talks to when neither Config.BaseURL nor
	// $REDIAL_SERVER says otherwise.
	DefaultBaseURL = "http://127.0.0.1:8080"
	// DefaultTimeout bounds each request when Config.Timeout is 0.
	DefaultTimeout = 10 * time.Second
	// Version is this client's version, sent in its User-Agent.
	Version   = "0.1.0"
	userAgent = "redial-client-go/" + Version
	// The longest an error answer's body is quoted in an APIError's message.
	quotedBody = 500
)

// Config says which server a Client talks to and how. The zero Config talks to $REDIAL_SERVER
// (else DefaultBaseURL) with $REDIAL_TOKEN.
type Config struct {
	// BaseURL is the server's URL, such as http://127.0.0.1:8080; "localhost:8080" without a
	// scheme means http://. Empty: $REDIAL_SERVER, then DefaultBaseURL.
	BaseURL string
	// Token is sent as the bearer token. Empty: $REDIAL_TOKEN (none when that is empty too).
	Token string
	// Timeout bounds each HTTP request to the server (DefaultTimeout when 0); a call that waits on
	// the server (GetJobAfter) is given its wait on top. The context bounds the whole call,
	// retries included.
	Timeout time.Duration
	// MaxRetries is how many times a call is tried again after a connection error, a 429 or a 503
	// (DefaultMaxRetries when 0; none when negative). No other error is retried.
	MaxRetries int
	// HTTPClient sends the requests (a client of its own when nil). Its Timeout, if any, bounds
	// event streams too: leave it 0.
	HTTPClient *http.Client
}

// Client talks to one Redial server. It is safe for concurrent use.
type Client struct {
	baseURL    string
	token      string
	timeout    time.Duration
	maxRetries int
	http       *http.Client

	// What the client waits with and on: replaced by the package's tests, so that retries are
	// checked without waiting.
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func() float64

	// streamIdle is how long an event stream may stay silent before it is reopened (streamIdle,
	// the constant); the package's tests shorten it.
	streamIdle time.Duration

	// strict makes every answer read with DisallowUnknownFields: the package's tests set it, so
	// that a field the server sends and types.go lacks fails them.
	strict bool
}

// New is a Client for the server Config names. It fails only on a base URL that is no http or
// https URL.
func New(config Config) (*Client, error) {
	base, err := resolveBaseURL(config.BaseURL)
	if err != nil {
		return nil, err
	}
	token := config.Token
	if token == "" {
		token = os.Getenv("REDIAL_TOKEN")
	}
	timeout := config.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	retries := config.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	httpClient := config.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	random := rand.New(rand.NewSource(time.Now().UnixNano()))
	var randomMu sync.Mutex
	return &Client{
		baseURL: base, token: token, timeout: timeout, maxRetries: retries, http: httpClient,
		now:        time.Now,
		sleep:      sleepContext,
		streamIdle: streamIdle,
		jitter: func() float64 {
			randomMu.Lock()
			defer randomMu.Unlock()
			return random.Float64()
		},
	}, nil
}

// BaseURL is the server's URL this client talks to, without a trailing slash.
func (c *Client) BaseURL() string { return c.baseURL }

func resolveBaseURL(given string) (string, error) {
	base := strings.TrimSpace(given)
	if base == "" {
		base = strings.TrimSpace(os.Getenv("REDIAL_SERVER"))
	}
	if base == "" {
		base = DefaultBaseURL
	}
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	base = strings.TrimRight(base, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("redial: %q is no server URL: give one such as http://127.0.0.1:8080 (Config.BaseURL or REDIAL_SERVER)", given)
	}
	return base, nil
}

func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Ptr is a pointer to v: for the optional numbers, booleans and times of the API's inputs, such
// as JobInput{Priority: redial.Ptr(5)}.
func Ptr[T any](v T) *T { return &v }

// call is one API call, before it is sent.
type call struct {
	method string
	path   string // with its segments escaped (segment)
	query  url.Values
	body   any
	// hasBody: body is sent as JSON (a nil body too, as null).
	hasBody bool
	// timeout bounds the request instead of the client's, when not 0.
	timeout time.Duration
}

// segment is a path segment, percent-encoded: an endpoint's name is a URL (https%3A%2F%2F...).
func segment(value string) (string, error) {
	if value == "" {
		return "", errors.New("redial: give a non-empty id or name")
	}
	var b strings.Builder
	for i := 0; i < len(value); i++ {
		ch := value[i]
		if 'A' <= ch && ch <= 'Z' || 'a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || strings.IndexByte("-._~", ch) >= 0 {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String(), nil
}

// path is prefix, value escaped as one segment, and suffix: path("/v1/jobs/", id, "/replay").
func path(prefix, value, suffix string) (string, error) {
	s, err := segment(value)
	if err != nil {
		return "", err
	}
	return prefix + s + suffix, nil
}

// answer is an HTTP answer with its body still open. close releases it; timer cancels the request
// when it fires (a bound on the head, the body, or a stream's silence).
type answer struct {
	resp   *http.Response
	cancel context.CancelFunc
	timer  *time.Timer
}

func (a *answer) close() {
	a.timer.Stop()
	a.resp.Body.Close()
	a.cancel()
}

// open sends a call once, with the given extra headers; the answer's body is left open.
func (c *Client) open(ctx context.Context, cl call, payload []byte, header http.Header) (*answer, error) {
	target := c.baseURL + cl.path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	reqCtx, cancel := context.WithCancel(ctx)
	var body io.Reader
	if cl.hasBody {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(reqCtx, cl.method, target, body)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("redial: %s %s: %w", cl.method, cl.path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if cl.hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for name, values := range header {
		req.Header[name] = values
	}
	timeout := c.timeout
	if cl.timeout > 0 {
		timeout = cl.timeout
	}
	timer := time.AfterFunc(timeout, cancel)
	resp, err := c.http.Do(req)
	if err != nil {
		timer.Stop()
		cancel()
		return nil, err
	}
	return &answer{resp: resp, cancel: cancel, timer: timer}, nil
}

// do sends a call until its answer is not to be retried: a connection error (or a body cut
// short), a 429 or a 503 is tried again up to MaxRetries times. A 2xx answer's body is read into
// content, or with stream left open in the answer for the caller to read and close; any other
// answer's body is read, and the answer closed.
func (c *Client) do(ctx context.Context, cl call, stream bool) (*answer, []byte, error) {
	var payload []byte
	if cl.hasBody {
		var err error
		if payload, err = json.Marshal(cl.body); err != nil {
			return nil, nil, fmt.Errorf("redial: %s %s: the body is not JSON: %w", cl.method, cl.path, err)
		}
	}
	for retry := 0; ; retry++ {
		a, err := c.open(ctx, cl, payload, nil)
		var content []byte
		ok := err == nil && a.resp.StatusCode >= 200 && a.resp.StatusCode <= 299
		if err == nil && !(stream && ok) {
			content, err = io.ReadAll(a.resp.Body)
			a.close()
		}
		if err != nil {
			var failed *url.Error
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			} else if !errors.As(err, &failed) && a == nil {
				return nil, nil, err // the request could not be made: no failure of the connection
			}
			if retry >= c.maxRetries {
				return nil, nil, &ConnectionError{BaseURL: c.baseURL, Err: err}
			}
			if err := c.sleep(ctx, backoff(retry, c.jitter())); err != nil {
				return nil, nil, err
			}
			continue
		}
		if delay, again := retryDelay(a.resp.StatusCode, a.resp.Header, retry, c.now(), c.jitter()); again && retry < c.maxRetries {
			if err := c.sleep(ctx, delay); err != nil {
				return nil, nil, err
			}
			continue
		}
		return a, content, nil
	}
}

// sendFor makes a call and is its 2xx answer read as a T (nil with the error otherwise).
func sendFor[T any](ctx context.Context, c *Client, cl call) (*T, error) {
	var out T
	if err := c.send(ctx, cl, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// send makes a call and reads a 2xx answer's JSON into out (when out is not nil), or returns the
// typed error of any other answer.
func (c *Client) send(ctx context.Context, cl call, out any) error {
	a, content, err := c.do(ctx, cl, false)
	if err != nil {
		return err
	}
	return c.result(a.resp, content, out)
}

// result is what a whole answer means: out filled from a 2xx, or the typed error of another.
func (c *Client) result(resp *http.Response, content []byte, out any) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return c.errorFrom(resp.StatusCode, resp.Header, content)
	}
	if out == nil || len(bytes.TrimSpace(content)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(content))
	if c.strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(out); err != nil {
		return &APIError{Status: resp.StatusCode, Code: ErrorCodeInvalidResponse,
			Message: fmt.Sprintf("the server's answer could not be read (%v): check that the base URL points at a redial server of this client's version (%s)", err, APIVersion)}
	}
	return nil
}

// errorFrom is the typed error of an error answer.
func (c *Client) errorFrom(status int, header http.Header, content []byte) *APIError {
	e := &APIError{Status: status, Code: ErrorCodeHTTPError, Message: fmt.Sprintf("the server answered %d", status)}
	var body Error
	if err := json.Unmarshal(content, &body); err == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	} else if text := strings.TrimSpace(string(content)); text != "" {
		if len(text) > quotedBody {
			text = text[:quotedBody]
		}
		e.Message += ": " + strings.ToValidUTF8(text, "\uFFFD")
	}
	if after, given := parseRetryAfter(header.Get("Retry-After"), c.now()); given {
		e.RetryAfter = &after
	}
	return e
}
