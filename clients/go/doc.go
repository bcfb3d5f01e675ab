// Package redial is the Go client of Redial, the durable job queue and outbound-HTTP dispatcher:
// a Client for its HTTP API (jobs, batches, waiting for a job, replay with changes, dead letters
// and their bulk operations, endpoints, queues, schedules, the event log and its live stream), and
// a WebhookVerifier for the receivers of its signed deliveries and completion callbacks. Standard
// library only; Go 1.19 or later.
//
//	client, err := redial.New(redial.Config{BaseURL: "http://127.0.0.1:8080"})
//	job, err := client.Enqueue(ctx, redial.JobInput{
//		Request: redial.RequestInput{Method: "POST", URL: "https://api.example.com/charges",
//			Body: map[string]any{"amount": 4200}},
//	})
//	done, err := client.WaitForJob(ctx, job.ID, time.Minute)
//
// The API's shapes (Job, JobInput, Endpoint, ...) are generated into types.go from the server's
// OpenAPI document by internal/gentypes. Every call takes a context, which bounds it, retries
// included. Connection errors, 429 and 503 are retried (Config.MaxRetries, honouring
// Retry-After); any other error answer is an *APIError with the API's code, and a call that never
// got an answer a *ConnectionError.
//
// The README (clients/go/README.md) has a two-minute start, run by the tests.
package redial

//go:generate go run ./internal/cmd/gentypes
