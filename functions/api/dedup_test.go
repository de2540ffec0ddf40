package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// dedupKinds allows report.build unique and throttle, email.send debounce, metrics.rollup nothing.
var dedupKinds = func() map[string]string {
	env := map[string]string{"SQSWORKER_TABLE": "jobs", config.EnvAPIDedup: "report.build=unique+throttle,email.send=debounce",
		config.EnvScheduleGroup: "jobs", config.EnvQueueARN: "arn:aws:sqs:us-east-1:000000000000:jobs",
		config.EnvSchedulerRoleARN: "arn:aws:iam::000000000000:role/scheduler"}
	for k, v := range testKinds {
		env[k] = v
	}
	return env
}()

// newDedupStack is newStack with the rules of dedupKinds and an Enqueuer on the stack's table.
func newDedupStack(t *testing.T) *stack {
	t.Helper()
	s := newStack(t)
	s.api.Policy = testPolicy(t, dedupKinds)
	b := awslocaltest.Backend(t)
	sch := scheduler.NewFromConfig(b.Config)
	name := awslocal.UniqueName("apidedup")
	group, err := awslocal.ProvisionScheduleGroup(context.Background(), sch, name)
	if err != nil {
		t.Fatal(err)
	}
	s.sched, err = schedule.NewClient(schedule.Config{Scheduler: sch, Group: group, QueueARN: "arn:aws:sqs:us-east-1:000000000000:" + name + "-jobs",
		RoleARN: awslocal.SchedulerRoleARN(name)})
	if err != nil {
		t.Fatal(err)
	}
	enq, err := dedup.New(dedup.Config{Producer: s.prod, DynamoDB: b.DynamoDB(), Table: s.tableName, Jobs: s.table, Scheduler: s.sched, LocalScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	s.api.Dedup = enq
	return s
}

func (s *stack) postAs(t *testing.T, arn, body string, headers map[string]string) events.LambdaFunctionURLResponse {
	t.Helper()
	h := map[string]string{"content-type": "application/json"}
	for k, v := range headers {
		h[k] = v
	}
	req := request("POST", "/jobs", body, h)
	if arn != "" {
		req = signed(req, arn)
	}
	resp, err := s.api.Handle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func dedupAnswer(t *testing.T, resp events.LambdaFunctionURLResponse, code int) dedupResponse {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("status %d (%s), want %d", resp.StatusCode, resp.Body, code)
	}
	var r dedupResponse
	if err := json.Unmarshal([]byte(resp.Body), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAPIUniqueJobs: a unique request is 202 once, then 200 "duplicate" with the first job's id
// and nothing sent; keys are the caller's (another IAM principal with the same args gets a job
// of its own, and cannot read the first caller's).
func TestAPIUniqueJobs(t *testing.T) {
	t.Parallel()
	s := newDedupStack(t)
	const alice, bob = "arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/bob"
	body := `{"kind":"report.build","args":{"name":"q1"},"unique":{"window":"1h","while":"active"}}`
	first := dedupAnswer(t, s.postAs(t, alice, body, nil), http.StatusAccepted)
	if first.Outcome != "enqueued" || !strings.HasPrefix(first.RuleKey, "args:") {
		t.Fatalf("first: %+v", first)
	}
	dup := dedupAnswer(t, s.postAs(t, alice, body, nil), http.StatusOK)
	if dup.Outcome != "duplicate" || dup.ID != first.ID || dup.State != "queued" || dup.RuleKey != first.RuleKey {
		t.Fatalf("repeat: %+v, want a duplicate of %s", dup, first.ID)
	}
	other := dedupAnswer(t, s.postAs(t, bob, body, nil), http.StatusAccepted)
	if other.Outcome != "enqueued" || other.ID == first.ID {
		t.Fatalf("another caller, same args: %+v, want a job of its own", other)
	}
	if ids := s.drain(t); len(ids) != 2 {
		t.Fatalf("queue holds %v, want the two callers' jobs", ids)
	}
	resp, err := s.api.Handle(context.Background(), signed(request("GET", "/jobs/"+first.ID, "", nil), bob))
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("bob reads alice's job: %d, %v; want 404", resp.StatusCode, err)
	}
	// A key of the caller's own, and the key in the answer is the caller's (not the scoped one).
	keyed := dedupAnswer(t, s.postAs(t, alice, `{"kind":"report.build","args":{"name":"q2"},"unique":{"key":"q","window":"10m"}}`, nil), http.StatusAccepted)
	if keyed.RuleKey != "q" {
		t.Fatalf("rule key %q, want q", keyed.RuleKey)
	}
}

// TestAPIThrottle: beyond the limit, 429 with Retry-After (the seconds to the period's end) and
// nothing sent.
func TestAPIThrottle(t *testing.T) {
	t.Parallel()
	s := newDedupStack(t)
	body := `{"kind":"report.build","args":{"name":"x"},"throttle":{"key":"tenant-1","limit":2,"period":"1h"}}`
	for i := range 2 {
		if r := dedupAnswer(t, s.postAs(t, "", body, nil), http.StatusAccepted); r.Count != i+1 || r.Limit != 2 {
			t.Fatalf("enqueue %d: %+v", i, r)
		}
	}
	resp := s.postAs(t, "", body, nil)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(resp.Body, `"retry_at"`) {
		t.Fatalf("third: %d %s, want 429", resp.StatusCode, resp.Body)
	}
	if sec, err := strconv.Atoi(resp.Headers["Retry-After"]); err != nil || sec < 1 || sec > 3600 {
		t.Fatalf("Retry-After %q, want the seconds to the end of the hour", resp.Headers["Retry-After"])
	}
	if ids := s.drain(t); len(ids) != 2 {
		t.Fatalf("queue holds %v, want 2 jobs", ids)
	}
}

// TestAPIDedupRefused: rules are allowed per kind, one at a time, without an Idempotency-Key,
// with valid values; each refusal says why and sends nothing.
func TestAPIDedupRefused(t *testing.T) {
	t.Parallel()
	s := newDedupStack(t)
	for _, tt := range []struct {
		body, key string
		code      int
		want      string
	}{
		{`{"kind":"metrics.rollup","args":{},"unique":{"window":"1h"}}`, "", http.StatusForbidden, `may not be enqueued with \"unique\"`},
		{`{"kind":"report.build","args":{},"debounce":{"period":"2m"}}`, "", http.StatusForbidden, `may not be enqueued with \"debounce\"`},
		{`{"kind":"email.send","args":{"to":"a@b.c"},"debounce":{"period":"10m","max_wait":"5m"}}`, "", http.StatusBadRequest, `\"debounce.period\" 10m0s is longer than \"debounce.max_wait\" 5m0s`},
		{`{"kind":"email.send","args":{"to":"a@b.c"},"debounce":{"period":"2m"},"delay":"10s"}`, "", http.StatusBadRequest, `\"debounce\" with a delay (\"delay\")`},
		{`{"kind":"report.build","args":{},"unique":{"window":"1h"},"throttle":{"limit":1,"period":"1m"}}`, "", http.StatusBadRequest, "choose one"},
		{`{"kind":"report.build","args":{},"unique":{"window":"1h"}}`, "k-1", http.StatusBadRequest, "Idempotency-Key cannot be combined"},
		{`{"kind":"report.build","args":{},"unique":{}}`, "", http.StatusBadRequest, `\"unique.window\" is required`},
		{`{"kind":"report.build","args":{},"unique":{"window":"soon"}}`, "", http.StatusBadRequest, `\"unique.window\" \"soon\" is not a Go duration`},
		{`{"kind":"report.build","args":{},"unique":{"window":"0s"}}`, "", http.StatusBadRequest, `\"unique.window\" 0s: a unique key needs a window`},
		{`{"kind":"report.build","args":{},"unique":{"window":"72h"}}`, "", http.StatusBadRequest, "longer than the record TTL"},
		{`{"kind":"report.build","args":{},"unique":{"window":"1h","while":"always"}}`, "", http.StatusBadRequest, `want \"any\" or \"active\"`},
		{`{"kind":"report.build","args":{},"unique":{"window":"1h","key":"k","fields":["a"]}}`, "", http.StatusBadRequest, "both set"},
		{`{"kind":"report.build","args":{},"throttle":{"limit":0,"period":"1m"}}`, "", http.StatusBadRequest, `\"throttle.limit\" 0 is not between 1`},
		{`{"kind":"report.build","args":{},"throttle":{"limit":1,"period":"1m","extra":1}}`, "", http.StatusBadRequest, "unknown field"},
	} {
		h := map[string]string{}
		if tt.key != "" {
			h["idempotency-key"] = tt.key
		}
		resp := s.postAs(t, "", tt.body, h)
		if resp.StatusCode != tt.code || !strings.Contains(resp.Body, tt.want) {
			t.Errorf("%s: %d %s, want %d saying %q", tt.body, resp.StatusCode, resp.Body, tt.code, tt.want)
		}
	}
	if ids := s.drain(t); len(ids) != 0 {
		t.Fatalf("refused requests sent %v", ids)
	}
	s.api.Dedup = nil
	if resp := s.postAs(t, "", `{"kind":"report.build","args":{},"unique":{"window":"1h"}}`, nil); resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("without an Enqueuer: %d %s, want 501", resp.StatusCode, resp.Body)
	}
}

// TestAPIDebounce: two debounced requests of one key are one job, moved by the second, whose
// schedule carries the second request's args; nothing is on the queue until it fires.
func TestAPIDebounce(t *testing.T) {
	t.Parallel()
	s := newDedupStack(t)
	first := dedupAnswer(t, s.postAs(t, "", `{"kind":"email.send","args":{"to":"a@b.c","subject":"v1"},"debounce":{"key":"digest-a","period":"2m"}}`, nil), http.StatusAccepted)
	second := dedupAnswer(t, s.postAs(t, "", `{"kind":"email.send","args":{"to":"a@b.c","subject":"v2"},"debounce":{"key":"digest-a","period":"2m"}}`, nil), http.StatusAccepted)
	if first.Outcome != "debounced" || second.ID != first.ID || second.Events != 2 || second.RunAt == "" {
		t.Fatalf("debounced requests: %+v then %+v, want one job with 2 events", first, second)
	}
	js, err := s.sched.GetJob(context.Background(), first.ID)
	if err != nil || !strings.Contains(string(js.Envelope.Args), `"v2"`) {
		t.Fatalf("the job's schedule: %+v, %v; want the second request's args", js, err)
	}
	if ids := s.drain(t); len(ids) != 0 {
		t.Fatalf("queue holds %v before the schedule fired", ids)
	}
}
