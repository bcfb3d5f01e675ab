// Owns the schedule operations: list, read, create, create or replace, delete, pause and resume.

package redial

import (
	"context"
	"errors"
)

// Schedules are every schedule, by id (the server gives them a page at a time).
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	return every(ctx, c, "/v1/schedules", func(p *ScheduleList) ([]Schedule, *string) {
		return p.Schedules, p.NextCursor
	})
}

// Schedule is one schedule.
func (c *Client) Schedule(ctx context.Context, id string) (*Schedule, error) {
	p, err := path("/v1/schedules/", id, "")
	if err != nil {
		return nil, err
	}
	return sendFor[Schedule](ctx, c, call{method: "GET", path: p})
}

// CreateSchedule creates a schedule (schedule.ID is required); an id already there is a 409
// schedule_exists.
func (c *Client) CreateSchedule(ctx context.Context, schedule ScheduleInput) (*Schedule, error) {
	if schedule.ID == "" {
		return nil, errors.New("redial: give the schedule an ID (PutSchedule takes it apart)")
	}
	return sendFor[Schedule](ctx, c, call{method: "POST", path: "/v1/schedules", body: schedule, hasBody: true})
}

// PutSchedule creates the schedule of this id, or replaces it (keeping its pause).
func (c *Client) PutSchedule(ctx context.Context, id string, schedule ScheduleInput) (*Schedule, error) {
	p, err := path("/v1/schedules/", id, "")
	if err != nil {
		return nil, err
	}
	return sendFor[Schedule](ctx, c, call{method: "PUT", path: p, body: schedule, hasBody: true})
}

// DeleteSchedule deletes a schedule; the jobs it enqueued stay.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	p, err := path("/v1/schedules/", id, "")
	if err != nil {
		return err
	}
	return c.send(ctx, call{method: "DELETE", path: p}, nil)
}

// PauseSchedule stops a schedule from enqueueing until it is resumed.
func (c *Client) PauseSchedule(ctx context.Context, id string) (*Schedule, error) {
	p, err := path("/v1/schedules/", id, "/pause")
	if err != nil {
		return nil, err
	}
	return sendFor[Schedule](ctx, c, call{method: "POST", path: p})
}

// ResumeSchedule lets a paused schedule enqueue again.
func (c *Client) ResumeSchedule(ctx context.Context, id string) (*Schedule, error) {
	p, err := path("/v1/schedules/", id, "/resume")
	if err != nil {
		return nil, err
	}
	return sendFor[Schedule](ctx, c, call{method: "POST", path: p})
}
