// Owns the job operations: enqueue (one, or a batch), read, wait for, list (a page, or every page
// through an iterator), replay (as it was, or with changes, previewed first), dismiss and cancel.

package redial

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// MaxWait is the longest one waiting request (GetJobAfter) may wait: the server's bound.
const MaxWait = 60 * time.Second

// NoBody, as a ReplayPatch's Body, replays the job without a body (an absent Body keeps it).
var NoBody = json.RawMessage("null")

// Finished is whether a job in this state is done: completed, dead or cancelled.
func (s JobState) Finished() bool {
	return s == JobStateCompleted || s == JobStateDead || s == JobStateCancelled
}

// newID is a random UUID (version 4).
func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redial: no random bytes for a job id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// withID is the job with an id, generated when it has none, so that a retry after a lost answer
// is deduplicated by the server instead of enqueued twice.
func withID(job JobInput) (JobInput, error) {
	if job.Request.Method == "" || job.Request.URL == "" {
		return job, errors.New("redial: give the job a Request with at least a Method and a URL")
	}
	if job.ID == "" {
		id, err := newID()
		if err != nil {
			return job, err
		}
		job.ID = id
	}
	return job, nil
}

// Enqueue adds a job. A job without an ID is given one (a random UUID) before it is first sent,
// so that retrying it is safe. Enqueueing an id that exists with the same request answers the
// existing job with Deduplicated true; with a different request, an APIError 409 conflict.
func (c *Client) Enqueue(ctx context.Context, job JobInput) (*Job, error) {
	job, err := withID(job)
	if err != nil {
		return nil, err
	}
	return sendFor[Job](ctx, c, call{method: "POST", path: "/v1/jobs", body: job, hasBody: true})
}

// EnqueueBatch adds jobs atomically: all of them or none. Each job without an ID is given one.
func (c *Client) EnqueueBatch(ctx context.Context, jobs []JobInput) (*BatchResult, error) {
	input := BatchInput{Jobs: make([]JobInput, len(jobs))}
	for i, job := range jobs {
		var err error
		if input.Jobs[i], err = withID(job); err != nil {
			return nil, fmt.Errorf("%w (job %d)", err, i)
		}
	}
	return sendFor[BatchResult](ctx, c, call{method: "POST", path: "/v1/jobs/batch", body: input, hasBody: true})
}

// GetJob is a job with its attempt log.
func (c *Client) GetJob(ctx context.Context, id string) (*Job, error) {
	p, err := path("/v1/jobs/", id, "")
	if err != nil {
		return nil, err
	}
	return sendFor[Job](ctx, c, call{method: "GET", path: p})
}

// GetJobAfter is the job once it has finished (completed, dead or cancelled), or as it stands
// when wait ends (at most MaxWait): one request, answered when the job changes.
func (c *Client) GetJobAfter(ctx context.Context, id string, wait time.Duration) (*Job, error) {
	p, err := path("/v1/jobs/", id, "")
	if err != nil {
		return nil, err
	}
	if wait < 0 {
		wait = 0
	}
	if wait > MaxWait {
		wait = MaxWait
	}
	// The request lasts as long as the wait, and then some.
	timeout := c.timeout
	if timeout < 5*time.Second {
		timeout = 5 * time.Second
	}
	q := url.Values{"wait": {fmt.Sprintf("%dms", wait.Milliseconds())}}
	return sendFor[Job](ctx, c, call{method: "GET", path: p, query: q, timeout: wait + timeout})
}

// WaitForJob waits up to timeout for the job to finish, in waits of at most MaxWait, and returns
// it as it stands then: finished, unless the time ran out (check job.State.Finished()).
func (c *Client) WaitForJob(ctx context.Context, id string, timeout time.Duration) (*Job, error) {
	end := c.now().Add(timeout)
	for {
		left := end.Sub(c.now())
		if left < 0 {
			left = 0
		}
		job, err := c.GetJobAfter(ctx, id, left)
		if err != nil || job.State.Finished() || left <= MaxWait {
			return job, err
		}
	}
}

// ListJobsPage is one page of the jobs the filter matches, oldest first, from cursor (the
// previous page's NextCursor; "" for the first).
func (c *Client) ListJobsPage(ctx context.Context, filter JobFilter, cursor string) (*JobPage, error) {
	q := filter.query()
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return sendFor[JobPage](ctx, c, call{method: "GET", path: "/v1/jobs", query: q})
}

// ListJobs iterates every job the filter matches, a page (of filter.Limit jobs) at a time:
//
//	jobs := client.ListJobs(ctx, redial.JobFilter{State: redial.JobStateDead})
//	for jobs.Next() {
//		job := jobs.Job()
//	}
//	if err := jobs.Err(); err != nil { ... }
func (c *Client) ListJobs(ctx context.Context, filter JobFilter) *JobIterator {
	return &JobIterator{client: c, ctx: ctx, filter: filter}
}

// JobIterator reads the jobs of a listing page by page; see ListJobs.
type JobIterator struct {
	client *Client
	ctx    context.Context
	filter JobFilter
	cursor string
	page   []Job
	job    Job
	err    error
	last   bool // the page read last had no next cursor
}

// Next moves to the next job, reading the next page when this one is done; false at the end of
// the listing or on an error (see Err).
func (it *JobIterator) Next() bool {
	for len(it.page) == 0 {
		if it.err != nil || it.last {
			return false
		}
		page, err := it.client.ListJobsPage(it.ctx, it.filter, it.cursor)
		if err != nil {
			it.err = err
			return false
		}
		it.page = page.Jobs
		if page.NextCursor == nil || *page.NextCursor == "" {
			it.last = true
		} else {
			it.cursor = *page.NextCursor
		}
	}
	it.job, it.page = it.page[0], it.page[1:]
	return true
}

// Job is the job Next moved to.
func (it *JobIterator) Job() Job { return it.job }

// Err is the error that ended the listing, nil when it ran to its end.
func (it *JobIterator) Err() error { return it.err }

// jobCall is a POST to one of a job's routes, with changes as its body when not nil.
func jobCall(id, action string, changes *ReplayInput) (call, error) {
	p, err := path("/v1/jobs/", id, "/"+action)
	cl := call{method: "POST", path: p}
	if changes != nil {
		cl.body, cl.hasBody = changes, true
	}
	return cl, err
}

// Replay puts a dead job back to run, as it was (same request, same idempotency key).
func (c *Client) Replay(ctx context.Context, id string) (*Job, error) {
	cl, err := jobCall(id, "replay", nil)
	if err != nil {
		return nil, err
	}
	return sendFor[Job](ctx, c, cl)
}

// ReplayWith replays a dead job with changes: its request or routing patched (url or
// url_prefix, headers, body, timeout, policy, queue, endpoint), and its idempotency key kept
// (ReplayKeyKeep, the default) or renewed (ReplayKeyRenew). changes.DryRun is not sent:
// PreviewReplay previews.
func (c *Client) ReplayWith(ctx context.Context, id string, changes ReplayInput) (*Job, error) {
	changes.DryRun = nil
	cl, err := jobCall(id, "replay", &changes)
	if err != nil {
		return nil, err
	}
	return sendFor[Job](ctx, c, cl)
}

// PreviewReplay is what ReplayWith(id, changes) would do; it changes nothing.
func (c *Client) PreviewReplay(ctx context.Context, id string, changes ReplayInput) (*ReplayPreview, error) {
	changes.DryRun = Ptr(true)
	cl, err := jobCall(id, "replay", &changes)
	if err != nil {
		return nil, err
	}
	return sendFor[ReplayPreview](ctx, c, cl)
}

// Dismiss removes a dead job from the dead letters.
func (c *Client) Dismiss(ctx context.Context, id string) (*Dismissed, error) {
	cl, err := jobCall(id, "dismiss", nil)
	if err != nil {
		return nil, err
	}
	return sendFor[Dismissed](ctx, c, cl)
}

// Cancel cancels a job that has not finished.
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	cl, err := jobCall(id, "cancel", nil)
	if err != nil {
		return nil, err
	}
	return sendFor[Job](ctx, c, cl)
}
