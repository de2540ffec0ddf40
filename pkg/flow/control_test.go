package flow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/flow"
)

// TestListLimitsWithHolders lists concurrency items with their holders (earliest lease first,
// expired ones marked) and rate items with the tokens available, from the index, filtered by
// name; a long key is shown as it was given, not as its hash.
func TestListLimitsWithHolders(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	ctx := context.Background()
	long := string(make([]byte, 600))
	for _, r := range []flow.SlotRequest{
		{Name: "webhook", Key: "tenant-a", Limit: 3, JobID: "JOB1", LeaseUntil: t0.Add(2 * time.Minute), Now: t0},
		{Name: "webhook", Key: "tenant-a", Limit: 3, JobID: "JOB2", LeaseUntil: t0.Add(time.Minute), Now: t0},
		{Name: "webhook", Key: "tenant-b", Limit: 3, JobID: "job/with spaces", LeaseUntil: t0.Add(time.Minute), Now: t0},
		{Name: "webhook", Key: long, Limit: 3, JobID: "JOB4", LeaseUntil: t0.Add(time.Minute), Now: t0},
		{Name: "other", Key: "", Limit: 1, JobID: "JOB5", LeaseUntil: t0.Add(10 * time.Second), Now: t0},
	} {
		if res, err := tbl.AcquireSlot(ctx, r); err != nil || !res.Acquired {
			t.Fatalf("acquire %+v: %+v, %v", r, res, err)
		}
	}
	if _, err := tbl.TakeToken(ctx, flow.TokenRequest{Name: "email.send", Limit: 10, Period: time.Second, Burst: 4, Now: t0}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(30 * time.Second)
	page, err := tbl.List(ctx, flow.ListQuery{Type: flow.TypeConcurrency, Name: "webhook", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]flow.LimitState{}
	for _, l := range page.Limits {
		if l.Name != "webhook" || l.Type != flow.TypeConcurrency || l.Limit != 3 {
			t.Errorf("listed %+v under name webhook", l)
		}
		byKey[l.Key] = l
	}
	if len(byKey) != 3 {
		t.Fatalf("listed keys %v, want tenant-a, tenant-b and the long one", page.Limits)
	}
	if a := byKey["tenant-a"]; len(a.Holders) != 2 || a.Holders[0].JobID != "JOB2" || a.Holders[1].JobID != "JOB1" || a.Holders[0].Expired {
		t.Errorf("tenant-a holders %+v; want JOB2 then JOB1, live", a.Holders)
	}
	if b := byKey["tenant-b"]; len(b.Holders) != 1 || b.Holders[0].JobID != "" {
		t.Errorf("tenant-b holders %+v; want one with a hashed id", b.Holders)
	}
	if _, ok := byKey[long]; !ok {
		t.Errorf("the long key is not listed as given")
	}
	all, err := tbl.List(ctx, flow.ListQuery{Type: flow.TypeConcurrency, Now: now})
	if err != nil || len(all.Limits) != 4 {
		t.Fatalf("all concurrency items: %d, %v; want 4", len(all.Limits), err)
	}
	for _, l := range all.Limits {
		if l.Name == "other" && (l.Key != "" || len(l.Holders) != 1 || !l.Holders[0].Expired) {
			t.Errorf("other: %+v; want the whole-name item with an expired holder", l)
		}
	}
	rates, err := tbl.List(ctx, flow.ListQuery{Type: flow.TypeRate, Now: t0})
	if err != nil || len(rates.Limits) != 1 {
		t.Fatalf("rates: %+v, %v", rates, err)
	}
	if r := rates.Limits[0]; r.Name != "email.send" || r.Limit != 10 || r.Period != time.Second || r.Burst != 4 || r.Available != 3 {
		t.Errorf("rate item %+v; want 10/s, burst 4, 3 available after one token", r)
	}
	if _, err := tbl.List(ctx, flow.ListQuery{Type: "bogus"}); !errors.Is(err, flow.ErrInvalid) {
		t.Errorf("bad type: %v", err)
	}
	if _, err := tbl.List(ctx, flow.ListQuery{Type: flow.TypeRate, PageToken: "!!"}); !errors.Is(err, flow.ErrInvalid) {
		t.Errorf("bad page token: %v", err)
	}
}

// TestControlPausesTheQueuesEventSource: on a backend with the Lambda API, pausing a queue records
// the pause and disables the queue's event source mapping (found by the queue's ARN); resuming
// enables it and clears the record. Another queue's mapping is left alone.
func TestControlPausesTheQueuesEventSource(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	b := awslocaltest.Backend(t)
	lc := lambda.NewFromConfig(b.Config)
	ctx := context.Background()
	fn := awslocal.UniqueName("worker")
	if _, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(fn), Runtime: lambdatypes.RuntimeProvidedal2023,
		Role: aws.String("arn:aws:iam::000000000000:role/worker"), Handler: aws.String("bootstrap"),
		Code: &lambdatypes.FunctionCode{ZipFile: []byte("PK\x05\x06" + string(make([]byte, 18)))}}); err != nil {
		t.Fatalf("create function: %v", err)
	}
	queue := awslocal.UniqueName("jobs")
	arn := "arn:aws:sqs:us-east-1:000000000000:" + queue
	otherARN := arn + "-other"
	for _, a := range []string{arn, otherARN} {
		if _, err := lc.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{FunctionName: aws.String(fn), EventSourceArn: aws.String(a)}); err != nil {
			t.Fatalf("create mapping: %v", err)
		}
	}
	c := &flow.Control{Table: tbl, Lambda: lc, Function: fn}
	res, err := c.PauseQueue(ctx, flow.QueueRef{Name: queue, ARN: arn}, flow.Pause{By: "test"})
	if err != nil || !res.Recorded || len(res.Mappings) != 1 {
		t.Fatalf("pause: %+v, %v; want the record and one mapping", res, err)
	}
	if state := mappingState(t, lc, arn); state != "Disabled" && state != "Disabling" {
		t.Errorf("the queue's mapping is %s, want disabled", state)
	}
	if state := mappingState(t, lc, otherARN); state != "Enabled" {
		t.Errorf("another queue's mapping is %s, want it left enabled", state)
	}
	if p, _ := tbl.Pauses(ctx); !p.QueuePaused(queue) {
		t.Errorf("queue not recorded as paused: %+v", p)
	}
	if !flow.QueueGate(tbl, queue, time.Minute)(ctx) {
		t.Error("QueueGate says the paused queue runs")
	}
	res, err = c.ResumeQueue(ctx, flow.QueueRef{Name: queue, ARN: arn})
	if err != nil || !res.Recorded || len(res.Mappings) != 1 {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if state := mappingState(t, lc, arn); state != "Enabled" && state != "Enabling" {
		t.Errorf("after resume the mapping is %s", state)
	}
	if flow.QueueGate(tbl, queue, time.Minute)(ctx) { // a fresh gate reads the table

		t.Error("QueueGate says the resumed queue is paused")
	}
}

func mappingState(t *testing.T, lc *lambda.Client, arn string) string {
	t.Helper()
	out, err := lc.ListEventSourceMappings(context.Background(), &lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(arn)})
	if err != nil || len(out.EventSourceMappings) != 1 {
		t.Fatalf("list mappings of %s: %v, %v", arn, out, err)
	}
	return aws.ToString(out.EventSourceMappings[0].State)
}
