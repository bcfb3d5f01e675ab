// Owns observing and steering what the jobs run against: the counts (Stats) and alerts,
// endpoints (their protection state, pause and resume, the breaker, replaying an outage's dead
// letters), and queues (pause and resume, ordering keys).

package redial

import (
	"context"
	"errors"
	"net/url"
)

// pageSize is how many endpoints or schedules a page of Endpoints or Schedules asks for: the
// server's most.
const pageSize = "500"

// every reads a list that pages by cursor (endpoints, schedules) to its end.
func every[P any, T any](ctx context.Context, c *Client, route string, items func(*P) ([]T, *string)) ([]T, error) {
	var out []T
	cursor := ""
	for {
		q := url.Values{"limit": {pageSize}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		page, err := sendFor[P](ctx, c, call{method: "GET", path: route, query: q})
		if err != nil {
			return nil, err
		}
		list, next := items(page)
		out = append(out, list...)
		if next == nil || *next == "" {
			return out, nil
		}
		cursor = *next
	}
}

// Stats are the counts of jobs per queue, state and category, and per endpoint and state.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	return sendFor[Stats](ctx, c, call{method: "GET", path: "/v1/stats"})
}

// Alerts are every alert rule: firing or not, since when, the value measured and the threshold.
func (c *Client) Alerts(ctx context.Context) ([]Alert, error) {
	list, err := sendFor[AlertList](ctx, c, call{method: "GET", path: "/v1/alerts"})
	if err != nil {
		return nil, err
	}
	return list.Alerts, nil
}

// Endpoints are every endpoint, by name (the server gives them a page at a time).
func (c *Client) Endpoints(ctx context.Context) ([]Endpoint, error) {
	return every(ctx, c, "/v1/endpoints", func(p *EndpointList) ([]Endpoint, *string) {
		return p.Endpoints, p.NextCursor
	})
}

// Endpoint is one endpoint's protection state, with its backlog's forecast.
func (c *Client) Endpoint(ctx context.Context, name string) (*Endpoint, error) {
	p, err := path("/v1/endpoints/", name, "")
	if err != nil {
		return nil, err
	}
	return sendFor[Endpoint](ctx, c, call{method: "GET", path: p})
}

func checkPause(pause PauseInput) error {
	if pause.For != "" && pause.Until != nil {
		return errors.New("redial: give a pause either For (a duration such as \"30m\") or Until (an instant), not both")
	}
	return nil
}

// PauseEndpoint holds every job of an endpoint, on every node, until pause.Until, for pause.For
// (a duration such as "30m"), or, with neither, until it is resumed. An endpoint Redial does not
// know yet (no job named it) is a 404 not_found, unless create is true: then it is paused before
// its first job.
func (c *Client) PauseEndpoint(ctx context.Context, name string, pause PauseInput, create bool) (*Endpoint, error) {
	if err := checkPause(pause); err != nil {
		return nil, err
	}
	p, err := path("/v1/endpoints/", name, "/pause")
	if err != nil {
		return nil, err
	}
	cl := call{method: "POST", path: p, body: pause, hasBody: true}
	if create {
		cl.query = url.Values{"create": {"true"}}
	}
	return sendFor[Endpoint](ctx, c, cl)
}

func (c *Client) endpointAction(ctx context.Context, name, action string) (*Endpoint, error) {
	p, err := path("/v1/endpoints/", name, "/"+action)
	if err != nil {
		return nil, err
	}
	return sendFor[Endpoint](ctx, c, call{method: "POST", path: p})
}

// ResumeEndpoint ends an endpoint's pause, by hand or by its answers.
func (c *Client) ResumeEndpoint(ctx context.Context, name string) (*Endpoint, error) {
	return c.endpointAction(ctx, name, "resume")
}

// ResetBreaker closes an endpoint's circuit breaker with an empty window.
func (c *Client) ResetBreaker(ctx context.Context, name string) (*Endpoint, error) {
	return c.endpointAction(ctx, name, "reset-breaker")
}

// ReplayOutage replays the endpoint's dead letters that died since its last outage began (a 422
// invalid_state when it has none on record).
func (c *Client) ReplayOutage(ctx context.Context, name string) (*OutageReplay, error) {
	p, err := path("/v1/endpoints/", name, "/replay-outage")
	if err != nil {
		return nil, err
	}
	return sendFor[OutageReplay](ctx, c, call{method: "POST", path: p})
}

// Queues are the configured queues, their group limits, ordering_on_dead and hand pauses.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	list, err := sendFor[QueueList](ctx, c, call{method: "GET", path: "/v1/queues"})
	if err != nil {
		return nil, err
	}
	return list.Queues, nil
}

// PauseQueue stops a queue's jobs from being leased (those running finish), as PauseEndpoint
// says for how long.
func (c *Client) PauseQueue(ctx context.Context, name string, pause PauseInput) (*Queue, error) {
	if err := checkPause(pause); err != nil {
		return nil, err
	}
	p, err := path("/v1/queues/", name, "/pause")
	if err != nil {
		return nil, err
	}
	return sendFor[Queue](ctx, c, call{method: "POST", path: p, body: pause, hasBody: true})
}

// ResumeQueue ends a queue's pause.
func (c *Client) ResumeQueue(ctx context.Context, name string) (*Queue, error) {
	p, err := path("/v1/queues/", name, "/resume")
	if err != nil {
		return nil, err
	}
	return sendFor[Queue](ctx, c, call{method: "POST", path: p})
}

// OrderingKeys is a page of the queue's ordering keys with a line (in an order of its own, stable
// from page to page): each key's head (the job that goes first), how many of its jobs wait behind
// it and why the next one waits. Blocked lists only the keys whose head is dead; read on with
// Cursor set to the page's NextCursor. An unknown queue is a 404 not_found.
func (c *Client) OrderingKeys(ctx context.Context, queue string, filter OrderingKeysFilter) (*OrderingKeys, error) {
	p, err := path("/v1/queues/", queue, "/ordering-keys")
	if err != nil {
		return nil, err
	}
	return sendFor[OrderingKeys](ctx, c, call{method: "GET", path: p, query: filter.query()})
}
