// Owns the client's operations against a real `redial serve`: enqueue, deduplication, conflicts,
// batches, jobs that ran, waiting, listing across pages, ordering keys, dead letters (patterns,
// groups, bulk replay and dismiss, waited for or started, export), replay with changes, dismiss
// and cancel, tokens, endpoint and queue pauses, schedules. Every client reads the answers
// strictly (newClient), so each call also checks types.go against what the server sends.

package redial

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// unique is a name no other test uses.
func unique(prefix string) string {
	id, err := newID()
	if err != nil {
		panic(err)
	}
	return prefix + "-" + id
}

func wantAPIError(t *testing.T, err error, status int, code ErrorCode) *APIError {
	t.Helper()
	e := apiError(t, err)
	if e.Status != status || e.Code != code || e.Message == "" {
		t.Fatalf("got %d %s (%q), want %d %s", e.Status, e.Code, e.Message, status, code)
	}
	return e
}

var later = time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)

func TestEnqueueAndTheSameIDDeduplicates(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	job := jobFor(r)
	job.ID = unique("dedup")
	first, err := c.Enqueue(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Enqueue(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != job.ID || deref(first.Deduplicated) != false || again.ID != job.ID || deref(again.Deduplicated) != true {
		t.Fatalf("%s %v, %s %v", first.ID, deref(first.Deduplicated), again.ID, deref(again.Deduplicated))
	}
}

func TestEnqueueWithoutAnIDGeneratesOne(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	created, err := c.Enqueue(ctx, jobFor(r))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(created.ID) {
		t.Fatalf("id %q is no UUID v4", created.ID)
	}
	if _, err := c.Enqueue(ctx, JobInput{}); err == nil || !strings.Contains(err.Error(), "Method and a URL") {
		t.Fatalf("a job without a request: %v", err)
	}
}

func TestAConflictingRequestIsA409(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	job := jobFor(r)
	job.ID = unique("conflict")
	if _, err := c.Enqueue(ctx, job); err != nil {
		t.Fatal(err)
	}
	job.Request.Body = map[string]int{"n": 2}
	_, err := c.Enqueue(ctx, job)
	wantAPIError(t, err, 409, ErrorCodeConflict)
}

func TestAJobKeepsItsGroupAndABadGroupIsA422(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	job := jobFor(r)
	job.Group = "tenant-42"
	created, err := c.Enqueue(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	shown, err := c.GetJob(ctx, created.ID)
	if err != nil || deref(created.Group) != "tenant-42" || deref(shown.Group) != "tenant-42" {
		t.Fatalf("%v %v %v", deref(created.Group), deref(shown.Group), err)
	}
	if none, err := c.Enqueue(ctx, jobFor(r)); err != nil || none.Group != nil {
		t.Fatalf("%v %v", none, err)
	}
	job.Group = " "
	_, err = c.Enqueue(ctx, job)
	wantAPIError(t, err, 422, ErrorCodeInvalidGroup)
}

func TestOrderingKeysListEachKeyWithItsFirstJobAhead(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	// Far in the future: the jobs stay waiting, so each key keeps its line while it is read.
	keyed := func(key string) JobInput {
		job := jobFor(r)
		job.OrderingKey, job.RunAt = key, &later
		return job
	}
	a, b := unique("go")+"/a", unique("go")+"/b"
	first, err := c.Enqueue(ctx, keyed(a))
	if err != nil || deref(first.OrderingKey) != a {
		t.Fatalf("%v %v", first, err)
	}
	if _, err := c.EnqueueBatch(ctx, []JobInput{keyed(a), keyed(a)}); err != nil {
		t.Fatal(err)
	}
	only, err := c.Enqueue(ctx, keyed(b))
	if err != nil {
		t.Fatal(err)
	}

	listed, err := c.OrderingKeys(ctx, "default", OrderingKeysFilter{Limit: Ptr(500)})
	if err != nil {
		t.Fatal(err)
	}
	if listed.Queue != "default" || listed.OrderingOnDead != OrderingOnDeadBlock || listed.NextCursor != nil {
		t.Fatalf("%+v", listed)
	}
	lines := map[string]OrderingKeyLine{}
	for _, line := range listed.Keys {
		lines[line.Key] = line
	}
	if l := lines[a]; l.Head.ID != first.ID || l.Behind != 2 || l.Blocked || l.Why == "" {
		t.Fatalf("%+v", l)
	}
	if l := lines[b]; l.Head.ID != only.ID || l.Behind != 0 {
		t.Fatalf("%+v", l)
	}
	blocked, err := c.OrderingKeys(ctx, "default", OrderingKeysFilter{Blocked: Ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range blocked.Keys {
		if line.Key == a || line.Key == b {
			t.Fatalf("%s is not blocked", line.Key)
		}
	}

	// A key a page: each page's NextCursor leads to the next, and the last has none; in the
	// listing's own order, every key once.
	var paged []string
	filter := OrderingKeysFilter{Limit: Ptr(1)}
	for {
		page, err := c.OrderingKeys(ctx, "default", filter)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range page.Keys {
			paged = append(paged, line.Key)
		}
		if page.NextCursor == nil {
			break
		}
		filter.Cursor = *page.NextCursor
	}
	var all []string
	for _, line := range listed.Keys {
		all = append(all, line.Key)
	}
	if fmt.Sprint(paged) != fmt.Sprint(all) || len(all) < 2 {
		t.Fatalf("paged %v, listed %v", paged, all)
	}

	_, err = c.OrderingKeys(ctx, "no-such-queue", OrderingKeysFilter{})
	wantAPIError(t, err, 404, ErrorCodeNotFound)
	_, err = c.Enqueue(ctx, keyed("a\nb"))
	wantAPIError(t, err, 422, ErrorCodeInvalidOrderingKey)
}

func TestAnUnknownJobIsA404(t *testing.T) {
	c := newClient(t, plainServer.get(t).url)
	_, err := c.GetJob(testContext(t), "no-such-job")
	wantAPIError(t, err, 404, ErrorCodeNotFound)
	if _, err := c.GetJob(testContext(t), ""); err == nil {
		t.Fatal("an empty id is sent")
	}
}

func TestABatchIsAtomicAndDeduplicates(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	existing, err := c.Enqueue(ctx, jobFor(r))
	if err != nil {
		t.Fatal(err)
	}
	again := jobFor(r)
	again.ID = existing.ID
	result, err := c.EnqueueBatch(ctx, []JobInput{jobFor(r), jobFor(r), again})
	if err != nil {
		t.Fatal(err)
	}
	if result.Inserted != 2 || result.Deduplicated != 1 || len(result.Jobs) != 3 || result.Jobs[2].ID != existing.ID ||
		deref(result.Jobs[0].Deduplicated) != false || deref(result.Jobs[2].Deduplicated) != true {
		t.Fatalf("%+v", result)
	}
	// One bad job refuses them all.
	bad := jobFor(r)
	bad.Queue = "no-such-queue"
	fresh := jobFor(r)
	fresh.ID = unique("batch")
	_, err = c.EnqueueBatch(ctx, []JobInput{fresh, bad})
	wantAPIError(t, err, 422, ErrorCodeUnknownQueue)
	_, err = c.GetJob(ctx, fresh.ID)
	wantAPIError(t, err, 404, ErrorCodeNotFound)
}

func TestAJobThatRanHasItsAttempt(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	created, err := c.Enqueue(ctx, jobFor(r))
	if err != nil {
		t.Fatal(err)
	}
	job := finish(ctx, t, c, created.ID, JobStateCompleted)
	if job.Runs != 1 || len(job.AttemptLog) != 1 {
		t.Fatalf("%+v", job)
	}
	a := job.AttemptLog[0]
	if a.Number != 1 || deref(a.Status) != 200 || a.Category != "success" || a.Decision != "complete" {
		t.Fatalf("%+v", a)
	}
	if got := r.all(); len(got) != 1 || string(got[0].body) != `{"n":1}` || got[0].method != "POST" {
		t.Fatalf("%q", got)
	}
}

func TestWaitForJob(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	job := jobFor(r)
	job.RunAt = &later
	scheduled, err := c.Enqueue(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	// The time runs out: the job as it stands.
	if got, err := c.WaitForJob(ctx, scheduled.ID, 200*time.Millisecond); err != nil || got.State != JobStateScheduled {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := c.GetJobAfter(ctx, scheduled.ID, 100*time.Millisecond); err != nil || got.State != JobStateScheduled {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := c.Cancel(ctx, scheduled.ID); err != nil {
		t.Fatal(err)
	}
	finish(ctx, t, c, scheduled.ID, JobStateCancelled)

	done, err := c.Enqueue(ctx, jobFor(r))
	if err != nil {
		t.Fatal(err)
	}
	if got := finish(ctx, t, c, done.ID, JobStateCompleted); len(got.AttemptLog) != 1 {
		t.Fatalf("%+v", got)
	}
	r.setStatus(400)
	dead, err := c.Enqueue(ctx, jobFor(r))
	if err != nil {
		t.Fatal(err)
	}
	finish(ctx, t, c, dead.ID, JobStateDead)
	_, err = c.GetJobAfter(ctx, "no-such-job", time.Second)
	wantAPIError(t, err, 404, ErrorCodeNotFound)
}

func TestListJobsIteratesEveryPage(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	name := unique("list")
	ids := map[string]bool{}
	for i := 0; i < 7; i++ {
		job := jobFor(r)
		job.Endpoint = name
		created, err := c.Enqueue(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		ids[created.ID] = true
	}
	jobs := c.ListJobs(ctx, JobFilter{Endpoint: name, Limit: Ptr(2)})
	var listed []string
	for jobs.Next() {
		listed = append(listed, jobs.Job().ID)
	}
	if err := jobs.Err(); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 7 {
		t.Fatalf("listed %d: %v", len(listed), listed)
	}
	for _, id := range listed {
		if !ids[id] {
			t.Fatalf("%s is not one of them", id)
		}
	}
	page, err := c.ListJobsPage(ctx, JobFilter{Endpoint: name, Limit: Ptr(5)}, "")
	if err != nil || len(page.Jobs) != 5 || page.NextCursor == nil {
		t.Fatalf("%+v %v", page, err)
	}
	none := c.ListJobs(ctx, JobFilter{Endpoint: unique("none")})
	if none.Next() || none.Err() != nil {
		t.Fatal("jobs of an endpoint nobody named")
	}
	bad := c.ListJobs(ctx, JobFilter{Limit: Ptr(0)})
	if bad.Next() {
		t.Fatal("a job with limit 0")
	}
	wantAPIError(t, bad.Err(), 400, ErrorCodeInvalidLimit)
}

func TestListJobsByIdempotencyKeyAndTag(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	tag, key := unique("order"), unique("charge")
	one := jobFor(r)
	one.IdempotencyKey, one.Tags = key, []string{tag}
	two := jobFor(r)
	two.Tags = []string{tag}
	first, err := c.Enqueue(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Enqueue(ctx, two)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(filter JobFilter) []string {
		var out []string
		jobs := c.ListJobs(ctx, filter)
		for jobs.Next() {
			out = append(out, jobs.Job().ID)
		}
		if err := jobs.Err(); err != nil {
			t.Fatal(err)
		}
		sort.Strings(out)
		return out
	}
	both := []string{first.ID, second.ID}
	sort.Strings(both)
	if got := ids(JobFilter{IdempotencyKey: key}); fmt.Sprint(got) != fmt.Sprint([]string{first.ID}) {
		t.Fatalf("by key: %v", got)
	}
	if got := ids(JobFilter{Tag: tag}); fmt.Sprint(got) != fmt.Sprint(both) {
		t.Fatalf("by tag: %v", got)
	}
	if got := ids(JobFilter{IdempotencyKey: deref(second.IdempotencyKey).(string)}); fmt.Sprint(got) != fmt.Sprint([]string{second.ID}) {
		t.Fatalf("by the derived key: %v", got)
	}
}

// deadJobs enqueues n jobs to a receiver answering 400, and waits until they are dead.
func deadJobs(t *testing.T, c *Client, r *receiver, n int) []string {
	t.Helper()
	ctx := testContext(t)
	r.setStatus(400)
	var ids []string
	for i := 0; i < n; i++ {
		job, err := c.Enqueue(ctx, jobFor(r))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, job.ID)
	}
	for _, id := range ids {
		if job := finish(ctx, t, c, id, JobStateDead); deref(job.Category) != DeadCategoryPermanent {
			t.Fatalf("%s died %v", id, deref(job.Category))
		}
	}
	return ids
}

func TestDeadLettersReplayedByFilter(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	ids := deadJobs(t, c, r, 3)
	dead := c.ListJobs(ctx, JobFilter{Endpoint: r.origin, State: JobStateDead})
	n := 0
	for dead.Next() {
		n++
	}
	if dead.Err() != nil || n != 3 {
		t.Fatalf("%d dead, %v", n, dead.Err())
	}
	// One cause, one pattern: a filter for the listing, the groups and the replay.
	patterns, err := c.DeadLetterPatterns(ctx, DeadPatternsFilter{Endpoint: r.origin})
	if err != nil || patterns.Total != 3 || patterns.Count != 1 || len(patterns.Patterns) != 1 {
		t.Fatalf("%+v %v", patterns, err)
	}
	pattern := patterns.Patterns[0].Pattern
	if !strings.HasPrefix(pattern, "400 bad request") || patterns.Patterns[0].Count != 3 {
		t.Fatalf("%+v", patterns.Patterns[0])
	}
	byPattern := c.ListJobs(ctx, JobFilter{Endpoint: r.origin, Pattern: pattern})
	n = 0
	for byPattern.Next() {
		n++
	}
	if n != 3 {
		t.Fatalf("%d by pattern, %v", n, byPattern.Err())
	}
	groups, err := c.DeadLetterGroups(ctx, DeadGroupsFilter{Endpoint: r.origin, Pattern: pattern})
	if err != nil || groups.Total != 3 || len(groups.Groups) != 1 || groups.Groups[0].Category != DeadCategoryPermanent ||
		groups.Groups[0].Reason == nil || !strings.HasPrefix(groups.Groups[0].Reason.Value, "400 bad request") {
		t.Fatalf("%+v %v", groups, err)
	}

	r.setStatus(200)
	replayed, err := c.ReplayDeadLetters(ctx, DeadLetterFilter{Endpoint: r.origin, Category: DeadCategoryPermanent, Pattern: pattern})
	if err != nil || replayed.Affected != 3 || replayed.State != OperationStateDone || replayed.Operation == "" {
		t.Fatalf("%+v %v", replayed, err)
	}
	op, err := c.Operation(ctx, replayed.Operation)
	if err != nil || op.Done != 3 || op.Kind != OperationKindReplay || op.State != OperationStateDone {
		t.Fatalf("%+v %v", op, err)
	}
	for _, id := range ids {
		if job := finish(ctx, t, c, id, JobStateCompleted); job.Replays != 1 {
			t.Fatalf("%+v", job)
		}
	}
	if r.count() != 6 {
		t.Fatalf("%d requests", r.count())
	}
	if _, err := c.ReplayDeadLetters(ctx, DeadLetterFilter{}); !errors.Is(err, errNoCriterion) {
		t.Fatalf("an empty filter: %v", err)
	}
	if _, err := c.DismissDeadLetters(ctx, DeadLetterFilter{Patch: &ReplayPatch{}}); !errors.Is(err, errNoCriterion) && err == nil {
		t.Fatalf("a patch alone: %v", err)
	}
}

// operationEnd reads an operation until it is no longer running: the API has no way to wait
// for one.
func operationEnd(t *testing.T, c *Client, id string) *Operation {
	t.Helper()
	var op *Operation
	eventually(t, "operation "+id+" to end", func() (bool, error) {
		var err error
		op, err = c.Operation(testContext(t), id)
		return err == nil && op.State != OperationStateRunning, err
	})
	return op
}

func TestBulkOperationsStartedInTheBackground(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	ids := deadJobs(t, c, r, 2)
	r.setStatus(200)
	started, err := c.StartReplayDeadLetters(ctx, DeadLetterFilter{Endpoint: r.origin})
	if err != nil || started.Kind != OperationKindReplay {
		t.Fatalf("%+v %v", started, err)
	}
	// Until the operation has replayed them, the jobs are still dead (finished): wait for it first.
	if op := operationEnd(t, c, started.ID); op.State != OperationStateDone || op.Done != 2 || op.Total != 2 {
		t.Fatalf("%+v", op)
	}
	for _, id := range ids {
		finish(ctx, t, c, id, JobStateCompleted)
	}

	ids = deadJobs(t, c, r, 2)
	op, err := c.StartDismissDeadLetters(ctx, DeadLetterFilter{Endpoint: r.origin})
	if err != nil || op.ID == "" || op.Kind != OperationKindDismiss {
		t.Fatalf("%+v %v", op, err)
	}
	if op = operationEnd(t, c, op.ID); op.State != OperationStateDone || op.Done != 2 || op.FinishedAt == nil {
		t.Fatalf("%+v", op)
	}
	for _, id := range ids {
		_, err := c.GetJob(ctx, id)
		wantAPIError(t, err, 404, ErrorCodeNotFound)
	}
	listed, err := c.Operations(ctx)
	if err != nil || len(listed) == 0 {
		t.Fatalf("%v %v", listed, err)
	}
	found := false
	for _, o := range listed {
		found = found || o.ID == op.ID
	}
	if !found {
		t.Fatalf("%s is not listed", op.ID)
	}
	if _, err := c.StartReplayDeadLetters(ctx, DeadLetterFilter{Endpoint: r.origin, Patch: &ReplayPatch{URL: r.origin}}); err == nil {
		t.Fatal("a replay with changes started in the background")
	}
	// An operation that ended cannot be cancelled.
	_, err = c.CancelOperation(ctx, op.ID)
	wantAPIError(t, err, 409, ErrorCodeInvalidState)
	_, err = c.Operation(ctx, "no-such-operation")
	wantAPIError(t, err, 404, ErrorCodeNotFound)
}

func TestDeadLettersExportAsNDJSON(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	ids := deadJobs(t, c, r, 2)
	var out bytes.Buffer
	n, err := c.ExportDeadLetters(ctx, DeadLetterFilter{Endpoint: r.origin}, &out)
	if err != nil || n != int64(out.Len()) {
		t.Fatalf("%d %v", n, err)
	}
	var exported []string
	lines := bufio.NewScanner(&out)
	for lines.Scan() {
		var line struct {
			ID      string `json:"id"`
			Request struct {
				Body string `json:"body"`
			} `json:"request"`
			Dead struct {
				Category DeadCategory `json:"category"`
			} `json:"dead"`
		}
		if err := json.Unmarshal(lines.Bytes(), &line); err != nil {
			t.Fatalf("%s: %v", lines.Bytes(), err)
		}
		// The request as sent: its body as the bytes sent.
		if line.Dead.Category != DeadCategoryPermanent || line.Request.Body != `{"n":1}` {
			t.Fatalf("%s", lines.Bytes())
		}
		exported = append(exported, line.ID)
	}
	if fmt.Sprint(exported) != fmt.Sprint(ids) {
		t.Fatalf("exported %v, oldest first; dead %v", exported, ids)
	}
	_, err = c.ExportDeadLetters(ctx, DeadLetterFilter{Queue: "no-such-queue"}, &out)
	wantAPIError(t, err, 422, ErrorCodeUnknownQueue)
}

func TestReplayWithChanges(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	id := deadJobs(t, c, r, 1)[0]
	before, err := c.GetJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	patch := &ReplayPatch{Headers: &HeaderChanges{Set: map[string]string{"X-Api-Version": "2"}}}
	preview, err := c.PreviewDeadLetters(ctx, DeadLetterFilter{Endpoint: r.origin, Patch: patch})
	if err != nil || preview.Matched != 1 || preview.Affected != 1 || preview.Skipped != 0 || !preview.DryRun ||
		!strings.Contains(strings.Join(preview.Preview[0].Changed, "; "), "header x-api-version set") {
		t.Fatalf("%+v %v", preview, err)
	}
	one, err := c.PreviewReplay(ctx, id, ReplayInput{Patch: patch, Key: ReplayKeyRenew})
	if err != nil || !strings.Contains(strings.Join(one.Preview[0].Changed, "; "), "idempotency key renewed") {
		t.Fatalf("%+v %v", one, err)
	}
	if still, err := c.GetJob(ctx, id); err != nil || still.State != JobStateDead {
		t.Fatalf("a preview changed the job: %v %v", still, err)
	}
	r.setStatus(200)
	if _, err := c.ReplayWith(ctx, id, ReplayInput{Patch: patch, DryRun: Ptr(true)}); err != nil {
		t.Fatal(err)
	}
	finish(ctx, t, c, id, JobStateCompleted)
	shown, err := c.GetJob(ctx, id)
	if err != nil || deref(shown.IdempotencyKey) != deref(before.IdempotencyKey) || len(shown.Changes) != 1 ||
		fmt.Sprint(shown.Changes[0].Changed) != "[header x-api-version set]" || shown.OriginalRequest == nil {
		t.Fatalf("%+v %v", shown, err)
	}
	if got := r.all(); got[len(got)-1].header.Get("X-Api-Version") != "2" {
		t.Fatalf("the replay sent %v", got[len(got)-1].header)
	}

	// Without a body: NoBody.
	id = deadJobs(t, c, r, 1)[0]
	r.setStatus(200)
	if _, err := c.ReplayWith(ctx, id, ReplayInput{Patch: &ReplayPatch{Body: NoBody}}); err != nil {
		t.Fatal(err)
	}
	if job := finish(ctx, t, c, id, JobStateCompleted); job.Request.BodyBytes != 0 {
		t.Fatalf("the body is still there: %+v", job.Request)
	}
}

func TestReplayDismissAndCancel(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	job := jobFor(r)
	job.RunAt = &later
	scheduled, err := c.Enqueue(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Cancel(ctx, scheduled.ID); err != nil || got.State != JobStateCancelled {
		t.Fatalf("%v %v", got, err)
	}
	_, err = c.Replay(ctx, scheduled.ID)
	wantAPIError(t, err, 409, ErrorCodeInvalidState)
	ids := deadJobs(t, c, r, 2)
	if got, err := c.Dismiss(ctx, ids[0]); err != nil || got.ID != ids[0] || !got.Dismissed {
		t.Fatalf("%+v %v", got, err)
	}
	r.setStatus(200)
	if got, err := c.Replay(ctx, ids[1]); err != nil || got.Replays != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	finish(ctx, t, c, ids[1], JobStateCompleted)
}

func TestATokenIsRequired(t *testing.T) {
	ctx := testContext(t)
	url := tokenServer.get(t).url
	t.Setenv("REDIAL_TOKEN", "")
	_, err := newClient(t, url).Stats(ctx)
	wantAPIError(t, err, 401, ErrorCodeUnauthorized)
	_, err = newClient(t, url, Config{Token: "wrong"}).Stats(ctx)
	wantAPIError(t, err, 401, ErrorCodeUnauthorized)
	if stats, err := newClient(t, url, Config{Token: "secret"}).Stats(ctx); err != nil || stats == nil {
		t.Fatal(err)
	}
	t.Setenv("REDIAL_TOKEN", "secret")
	t.Setenv("REDIAL_SERVER", url)
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c.strict = true
	queues, err := c.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range queues {
		names = append(names, q.Name)
	}
	// The callbacks queue is always there, for completion callbacks' deliveries.
	if sort.Strings(names); fmt.Sprint(names) != "[callbacks default]" {
		t.Fatalf("%v", names)
	}
}

func TestPauseAndResumeAnEndpoint(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	pause := PauseInput{Reason: "provider maintenance", For: "30m"}
	// No job named it yet: refused unless the pause asks to create it.
	_, err := c.PauseEndpoint(ctx, r.origin, pause, false)
	wantAPIError(t, err, 404, ErrorCodeNotFound)
	paused, err := c.PauseEndpoint(ctx, r.origin, pause, true)
	if err != nil || paused.Name != r.origin || paused.PausedByHand == nil || paused.PausedByHand.Reason != "provider maintenance" ||
		paused.PausedByHand.Until == nil {
		t.Fatalf("%+v %v", paused, err)
	}
	job, err := c.Enqueue(ctx, jobFor(r))
	if err != nil {
		t.Fatal(err)
	}
	// Held: the job waits, and nothing was sent (it completes below, once the endpoint resumes).
	if held, err := c.GetJob(ctx, job.ID); err != nil || held.State.Finished() || r.count() != 0 {
		t.Fatalf("%+v %v, %d sent", held, err, r.count())
	}
	shown, err := c.Endpoint(ctx, r.origin)
	if err != nil || shown.PausedByHand == nil || shown.Forecast == nil {
		t.Fatalf("%+v %v", shown, err)
	}
	resumed, err := c.ResumeEndpoint(ctx, r.origin)
	if err != nil || resumed.PausedByHand != nil {
		t.Fatalf("%+v %v", resumed, err)
	}
	finish(ctx, t, c, job.ID, JobStateCompleted)
	endpoints, err := c.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range endpoints {
		found = found || e.Name == r.origin
	}
	if !found {
		t.Fatalf("%s is not listed", r.origin)
	}
	if reset, err := c.ResetBreaker(ctx, r.origin); err != nil || reset.Breaker != BreakerStateClosed {
		t.Fatalf("%+v %v", reset, err)
	}
	_, err = c.ReplayOutage(ctx, r.origin)
	wantAPIError(t, err, 422, ErrorCodeInvalidState)
	if _, err := c.PauseEndpoint(ctx, r.origin, PauseInput{For: "1m", Until: &later}, false); err == nil {
		t.Fatal("a pause with For and Until is sent")
	}
	_, err = c.PauseEndpoint(ctx, r.origin, PauseInput{Reason: "a\nb"}, false)
	wantAPIError(t, err, 422, ErrorCodeInvalidReason)
}

func TestPauseAndResumeAQueue(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t, ownServer(t, "").url)
	paused, err := c.PauseQueue(ctx, "default", PauseInput{Reason: "deploy"})
	if err != nil || paused.PausedByHand == nil || paused.PausedByHand.Reason != "deploy" || paused.PausedByHand.Until != nil {
		t.Fatalf("%+v %v", paused, err)
	}
	queues, err := c.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if (q.Name == "default") != (q.PausedByHand != nil) {
			t.Fatalf("%+v", q)
		}
	}
	if resumed, err := c.ResumeQueue(ctx, "default"); err != nil || resumed.PausedByHand != nil {
		t.Fatalf("%+v %v", resumed, err)
	}
	_, err = c.PauseQueue(ctx, "no-such-queue", PauseInput{})
	wantAPIError(t, err, 422, ErrorCodeUnknownQueue)
}

func TestSchedulesRoundTrip(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t, plainServer.get(t).url)
	id := unique("go")[:20]
	cron := ScheduleInput{ID: id, Cron: "0 9 * * 1-5", Timezone: "Europe/Berlin",
		Job: JobTemplateInput{Request: RequestInput{Method: "POST", URL: "https://api.example.com/report"}, Tags: []string{"report"}}}
	created, err := c.CreateSchedule(ctx, cron)
	if err != nil || created.ID != id || created.Source != ScheduleSourceAPI || created.NextAt == nil ||
		created.Rule.Cron == nil || created.Rule.Cron.Timezone != "Europe/Berlin" || created.Rule.Every != nil {
		t.Fatalf("%+v %v", created, err)
	}
	every := ScheduleInput{Every: "1h", Missed: MissedPolicySkip,
		Job: JobTemplateInput{Request: RequestInput{Method: "GET", URL: "https://api.example.com/"}}}
	every.ID = id
	_, err = c.CreateSchedule(ctx, every)
	wantAPIError(t, err, 409, ErrorCodeScheduleExists)
	every.ID = ""
	if _, err := c.CreateSchedule(ctx, every); err == nil {
		t.Fatal("a schedule without an id is sent")
	}
	replaced, err := c.PutSchedule(ctx, id, every)
	if err != nil || replaced.Missed.Policy != MissedPolicySkip || replaced.Rule.Every == nil || replaced.Rule.Every.Interval != "1h" {
		t.Fatalf("%+v %v", replaced, err)
	}
	all, err := c.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range all {
		found = found || s.ID == id
	}
	if !found {
		t.Fatalf("%s is not listed", id)
	}
	if got, err := c.PauseSchedule(ctx, id); err != nil || !got.Paused {
		t.Fatalf("%+v %v", got, err)
	}
	if got, err := c.ResumeSchedule(ctx, id); err != nil || got.Paused {
		t.Fatalf("%+v %v", got, err)
	}
	if got, err := c.Schedule(ctx, id); err != nil || got.ID != id {
		t.Fatalf("%+v %v", got, err)
	}
	if err := c.DeleteSchedule(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = c.Schedule(ctx, id)
	wantAPIError(t, err, 404, ErrorCodeNotFound)
	_, err = c.PutSchedule(ctx, id, ScheduleInput{Cron: "every day", Job: every.Job})
	wantAPIError(t, err, 422, ErrorCodeInvalidSchedule)
}

func TestStatsAlertsAndQueuesRead(t *testing.T) {
	ctx, r := testContext(t), newReceiver(t)
	c := newClient(t, plainServer.get(t).url)
	job, err := c.Enqueue(ctx, jobFor(r))
	if err != nil {
		t.Fatal(err)
	}
	finish(ctx, t, c, job.ID, JobStateCompleted)
	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	completed := 0
	for _, s := range stats.Endpoints {
		if s.Endpoint == r.origin && s.State == JobStateCompleted {
			completed = s.Count
		}
	}
	if completed != 1 {
		t.Fatalf("%+v", stats.Endpoints)
	}
	alerts, err := c.Alerts(ctx)
	if err != nil || len(alerts) == 0 {
		t.Fatalf("%v %v", alerts, err)
	}
}
