// Owns the dead-letter operations: bulk replay (as they were, or with changes, previewed first)
// and dismiss by filter, waited for or started as operations to follow; the operations
// themselves; the dead letters grouped by queue, category and endpoint, or by the pattern of
// their reason; and the export of a filter's dead letters as NDJSON.

package redial

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// errNoCriterion refuses a bulk action without a filter before it is sent.
var errNoCriterion = errors.New("redial: give a dead-letter filter (Queue, Category, Endpoint, Since, " +
	"Until, Pattern) or All: redial.Ptr(true)")

// hasCriterion is whether a filter says which dead letters (a patch, a key or dry_run do not).
func hasCriterion(f DeadLetterFilter) bool {
	return f.Queue != "" || f.Category != "" || f.Endpoint != "" || f.Since != nil || f.Until != nil ||
		f.Pattern != "" || (f.All != nil && *f.All)
}

// bulk is a POST of a filter to /v1/dead-letters/{action}, with wait and dry_run as the
// operation needs them (the caller's are not sent).
func bulk(action string, filter DeadLetterFilter, wait, dryRun bool) (call, error) {
	if !hasCriterion(filter) {
		return call{}, errNoCriterion
	}
	filter.Wait, filter.DryRun = nil, nil
	if !wait {
		filter.Wait = Ptr(false)
	}
	if dryRun {
		filter.DryRun = Ptr(true)
	}
	return call{method: "POST", path: "/v1/dead-letters/" + action, body: filter, hasBody: true}, nil
}

// ReplayDeadLetters replays every dead letter the filter matches, a chunk at a time, and answers
// when it is done: how many were affected, the operation that did it and how it ended. With
// filter.Patch (and Key), they are replayed with changes, job by job (Matched and Skipped say
// how many matched and were not for the patch).
func (c *Client) ReplayDeadLetters(ctx context.Context, filter DeadLetterFilter) (*Affected, error) {
	cl, err := bulk("replay", filter, true, false)
	if err != nil {
		return nil, err
	}
	return sendFor[Affected](ctx, c, cl)
}

// StartReplayDeadLetters starts replaying what the filter matches and answers at once with the
// operation, to follow with Operation (or stop with CancelOperation). Not with a patch.
func (c *Client) StartReplayDeadLetters(ctx context.Context, filter DeadLetterFilter) (*Operation, error) {
	if filter.Patch != nil {
		return nil, errors.New("redial: a replay with changes cannot be started in the background: use ReplayDeadLetters")
	}
	cl, err := bulk("replay", filter, false, false)
	if err != nil {
		return nil, err
	}
	return sendFor[Operation](ctx, c, cl)
}

// PreviewDeadLetters is what ReplayDeadLetters(filter) would do with the filter's patch: how
// many it would replay and skip, and the first few before and after. It changes nothing.
func (c *Client) PreviewDeadLetters(ctx context.Context, filter DeadLetterFilter) (*ReplayPreview, error) {
	cl, err := bulk("replay", filter, true, true)
	if err != nil {
		return nil, err
	}
	return sendFor[ReplayPreview](ctx, c, cl)
}

// DismissDeadLetters removes every dead letter the filter matches, and answers when it is done.
func (c *Client) DismissDeadLetters(ctx context.Context, filter DeadLetterFilter) (*Affected, error) {
	if filter.Patch != nil || filter.Key != "" {
		return nil, errors.New("redial: a dismiss takes no Patch or Key")
	}
	cl, err := bulk("dismiss", filter, true, false)
	if err != nil {
		return nil, err
	}
	return sendFor[Affected](ctx, c, cl)
}

// StartDismissDeadLetters starts dismissing what the filter matches and answers at once with the
// operation.
func (c *Client) StartDismissDeadLetters(ctx context.Context, filter DeadLetterFilter) (*Operation, error) {
	if filter.Patch != nil || filter.Key != "" {
		return nil, errors.New("redial: a dismiss takes no Patch or Key")
	}
	cl, err := bulk("dismiss", filter, false, false)
	if err != nil {
		return nil, err
	}
	return sendFor[Operation](ctx, c, cl)
}

// Operation is a bulk replay's or dismiss's progress (Done of Total) and state, on the node that
// runs it.
func (c *Client) Operation(ctx context.Context, id string) (*Operation, error) {
	p, err := path("/v1/operations/", id, "")
	if err != nil {
		return nil, err
	}
	return sendFor[Operation](ctx, c, call{method: "GET", path: p})
}

// Operations are the bulk operations of the node that answers, newest first: those running and
// the last 100 finished.
func (c *Client) Operations(ctx context.Context) ([]Operation, error) {
	list, err := sendFor[OperationList](ctx, c, call{method: "GET", path: "/v1/operations"})
	if err != nil {
		return nil, err
	}
	return list.Operations, nil
}

// CancelOperation stops a running bulk operation before its next chunk.
func (c *Client) CancelOperation(ctx context.Context, id string) (*Operation, error) {
	p, err := path("/v1/operations/", id, "/cancel")
	if err != nil {
		return nil, err
	}
	return sendFor[Operation](ctx, c, call{method: "POST", path: p})
}

// DeadLetterGroups are the dead letters the filter matches grouped by queue, category and
// endpoint, largest first.
func (c *Client) DeadLetterGroups(ctx context.Context, filter DeadGroupsFilter) (*DeadGroups, error) {
	return sendFor[DeadGroups](ctx, c, call{method: "GET", path: "/v1/dead-letters/groups", query: filter.query()})
}

// DeadLetterPatterns are the dead letters the filter matches grouped by the pattern of their
// reason (numbers, ids and times masked), largest first. A pattern is a filter of
// DeadLetterGroups, ListJobs and the bulk replay and dismiss.
func (c *Client) DeadLetterPatterns(ctx context.Context, filter DeadPatternsFilter) (*DeadPatterns, error) {
	return sendFor[DeadPatterns](ctx, c, call{method: "GET", path: "/v1/dead-letters/patterns", query: filter.query()})
}

// ExportDeadLetters writes every dead letter the filter matches (the zero filter: every one) to
// w as NDJSON, oldest first: a job a line, as Enqueue takes it, with its request as sent (secrets
// included: keep the output as you keep credentials) and under "dead" what became of it. It
// returns the bytes written. The call's timeout bounds the answer's start, not its length: ctx
// bounds the rest.
func (c *Client) ExportDeadLetters(ctx context.Context, filter DeadLetterFilter, w io.Writer) (int64, error) {
	filter.Wait, filter.DryRun = nil, nil
	a, content, err := c.do(ctx, call{method: "POST", path: "/v1/dead-letters/export", body: filter, hasBody: true}, true)
	if err != nil {
		return 0, err
	}
	if a.resp.StatusCode < 200 || a.resp.StatusCode > 299 {
		return 0, c.errorFrom(a.resp.StatusCode, a.resp.Header, content)
	}
	defer a.close()
	a.timer.Stop()
	n, err := io.Copy(w, a.resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		return n, fmt.Errorf("redial: the export broke off after %d bytes: %w", n, err)
	}
	return n, nil
}
