package jobevents_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/sqsworker/sqsworker/internal/ddbtable"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/ddbstream"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobevents"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// jobTable creates a job table with a NEW_AND_OLD_IMAGES stream (what the CDK stack turns on
// with Props.Events) and returns its name and stream ARN.
func jobTable(t *testing.T, ddb *dynamodb.Client) (string, string) {
	t.Helper()
	name := awslocal.UniqueName("events")
	in := idempotency.TableInput(name)
	in.StreamSpecification = &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages}
	desc, err := ddbtable.Create(context.Background(), ddb, in, ddbtable.Wait{})
	if err != nil {
		t.Fatal(err)
	}
	return name, aws.ToString(desc.LatestStreamArn)
}

// crashingBus is the emulator's EventBridge with crashes injected around PutEvents, and a record
// of every event EventBridge accepted (what a subscriber receives). A crash before the publish
// fails the call without sending it; a crash after it sends it (EventBridge has the events) and
// then fails, as a function that died before answering its invocation.
type crashingBus struct {
	*eventbridge.Client
	calls          atomic.Int32
	before, after  map[int32]bool
	mu             sync.Mutex
	accepted       []jobevents.Event
	crashedBefore  atomic.Int32
	crashedAfter   atomic.Int32
	publishedTwice bool
}

func (b *crashingBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, o ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	n := b.calls.Add(1)
	if b.before[n] {
		b.crashedBefore.Add(1)
		return nil, errors.New("injected crash before the publish")
	}
	out, err := b.Client.PutEvents(ctx, in, o...)
	if err != nil {
		return out, err
	}
	b.mu.Lock()
	for i, e := range out.Entries {
		if aws.ToString(e.ErrorCode) == "" {
			var ev jobevents.Event
			if err := json.Unmarshal([]byte(aws.ToString(in.Entries[i].Detail)), &ev); err != nil {
				b.mu.Unlock()
				return nil, err
			}
			b.accepted = append(b.accepted, ev)
		}
	}
	b.mu.Unlock()
	if b.after[n] {
		b.crashedAfter.Add(1)
		return nil, errors.New("injected crash after the publish")
	}
	return out, nil
}

// unique returns the accepted events deduplicated on event_id, as a subscriber keeps them, and
// the raw count.
func (b *crashingBus) unique() (map[string]jobevents.Event, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := map[string]jobevents.Event{}
	for _, ev := range b.accepted {
		m[ev.ID] = ev
	}
	return m, len(b.accepted)
}

// TestEventsExactlyOncePerStateChange writes jobs into every final state on the emulator through
// the store and pkg/status (as the worker, `sqsworker cancel` and a redrive do), runs the
// publisher under a ddbstream poller with Lambda's mapping settings, crashes it before and after
// publishing, and checks that after deduplication on event_id there is exactly one event per
// state change: a success, a dead job redriven and dead again (two), a queued job cancelled, a
// running job cancelled on request, a dead letter without a record.
func TestEventsExactlyOncePerStateChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	ddb := b.DynamoDB()
	table, streamARN := jobTable(t, ddb)
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := status.New(status.Config{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}

	// A subscriber's rule on a bus of its own: dead jobs (the kumo emulator records matches).
	eb := eventbridge.NewFromConfig(b.Config)
	bus := awslocal.UniqueName("bus")
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)}); err != nil {
		t.Fatal(err)
	}
	rule := awslocal.UniqueName("dead-jobs")
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventBusName: aws.String(bus),
		EventPattern: aws.String(`{"source":["sqsworker"],"detail-type":["Job Finished"],"detail":{"state":["dead"]}}`)}); err != nil {
		t.Fatal(err)
	}
	// An SNS topic target: the emulator records the match and delivers nothing over HTTP.
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("t1"), Arn: aws.String("arn:aws:sns:us-east-1:000000000000:" + rule)}}}); err != nil {
		t.Fatal(err)
	}

	crash := &crashingBus{Client: eb, before: map[int32]bool{1: true, 4: true}, after: map[int32]bool{2: true, 6: true}}
	pub, err := jobevents.New(jobevents.Config{EventBridge: crash, EventBus: bus, MaxAttempts: 1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	handler := ddbstream.HandlerFunc(pub.HandleDynamoDB)
	poll, err := ddbstream.New(ddbstream.Config{
		Streams: dynamodbstreams.NewFromConfig(b.Config), StreamARN: streamARN, Handler: handler, Filter: jobevents.Filter,
		BatchSize: 3, ReportBatchItemFailures: true, BisectBatchOnFunctionError: true, MaximumRetryAttempts: 20,
		PollInterval: 10 * time.Millisecond, RetryDelay: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- poll.Run(rctx) }()

	now := time.Now().Truncate(time.Millisecond)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	claim := func(key, tok string, t0 time.Time) {
		t.Helper()
		res, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: "report.build", Key: key, JobID: key, Token: tok, PayloadHash: "h",
			Now: t0, LeaseUntil: t0.Add(time.Hour), ExpiresAt: t0.Add(24 * time.Hour)})
		if err != nil || !res.Claimed {
			t.Fatalf("claim %s: %+v %v", key, res, err)
		}
	}
	finish := func(key, tok string, st idempotency.State, reason string, t0 time.Time) {
		t.Helper()
		err := store.Finish(ctx, idempotency.Finish{Kind: "report.build", Key: key, JobID: key, Token: tok, State: st, Reason: reason,
			Error: "x", Now: t0, ExpiresAt: t0.Add(24 * time.Hour)})
		if err != nil {
			t.Fatalf("finish %s %s: %v", key, st, err)
		}
	}
	// A: succeeds after one retry.
	claim("01A", "a1", at(0))
	finish("01A", "a1", idempotency.StateRetrying, "", at(1*time.Millisecond))
	claim("01A", "a2", at(2*time.Millisecond))
	finish("01A", "a2", idempotency.StateSucceeded, "", at(3*time.Millisecond))
	// B: dead, redriven, dead again.
	claim("01B", "b1", at(0))
	finish("01B", "b1", idempotency.StateDead, "exhausted", at(5*time.Millisecond))
	if err := tbl.ResetForRedrive(ctx, "report.build", "01B", false); err != nil {
		t.Fatal(err)
	}
	claim("01B", "b2", time.Now())
	finish("01B", "b2", idempotency.StateDead, "exhausted", time.Now().Add(time.Millisecond))
	// C: queued, cancelled.
	if err := tbl.RecordQueued(ctx, status.QueuedJob{Kind: "report.build", Key: "01C", JobID: "01C", ExpiresAt: at(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if res, err := tbl.CancelJob(ctx, "report.build", "01C", "no longer needed"); err != nil || res.Requested {
		t.Fatal(res, err)
	}
	// D: running, cancelled on request, recorded cancelled by its worker.
	claim("01D", "d1", time.Now())
	if res, err := tbl.CancelJob(ctx, "report.build", "01D", ""); err != nil || !res.Requested {
		t.Fatal(res, err)
	}
	finish("01D", "d1", idempotency.StateCancelled, "cancelled", time.Now())
	// E: dead-lettered without a record (an unknown kind): mark dead creates one.
	if ok, err := store.MarkDead(ctx, idempotency.DeadMark{Kind: "report.build", Key: "01E", JobID: "01E", Reason: "unknown_kind",
		Now: time.Now(), ExpiresAt: at(time.Hour)}); err != nil || !ok {
		t.Fatal(ok, err)
	}

	want := []string{"01A succeeded", "01B dead", "01B dead", "01C cancelled", "01D cancelled", "01E dead"}
	var got []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		u, _ := crash.unique()
		got = got[:0]
		for _, ev := range u {
			got = append(got, ev.JobID+" "+ev.State)
		}
		sort.Strings(got)
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Let the poller settle what it still holds, then stop it.
	settle := time.Now().Add(30 * time.Second)
	for poll.Stats().Records < 15 && time.Now().Before(settle) { // every write above is one record
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events after deduplication: %v, want exactly %v", got, want)
	}
	u, raw := crash.unique()
	if crash.crashedBefore.Load() == 0 || crash.crashedAfter.Load() == 0 || raw <= len(u) {
		t.Errorf("crashes before %d, after %d; %d events accepted for %d unique: the test must see redeliveries and duplicates",
			crash.crashedBefore.Load(), crash.crashedAfter.Load(), raw, len(u))
	}
	for id, ev := range u {
		if ev.ID != id || len(id) != 32 || ev.FinishedAt.IsZero() || ev.Table != table {
			t.Errorf("event %+v", ev)
		}
		switch ev.JobID {
		case "01C":
			if ev.PreviousState != "queued" || ev.Reason != "no longer needed" {
				t.Errorf("cancelled queued job: %+v", ev)
			}
		case "01D":
			if ev.CancelRequestedAt == nil || ev.PreviousState != "running" {
				t.Errorf("job cancelled on request: %+v", ev)
			}
		case "01E":
			if ev.PreviousState != "" || ev.Reason != "unknown_kind" || ev.Runs != 0 {
				t.Errorf("dead letter without a record: %+v", ev)
			}
		}
	}

	// The subscriber's rule matched the dead jobs' events (duplicates included: it dedupes).
	delivered := deliveredTo(t, b.URL, rule)
	ids := map[string]bool{}
	for _, d := range delivered {
		var ev jobevents.Event
		if err := json.Unmarshal([]byte(d), &ev); err != nil || ev.State != "dead" {
			t.Errorf("delivered to the dead-jobs rule: %s (%v)", d, err)
		}
		ids[ev.ID] = true
	}
	if len(ids) != 3 {
		t.Errorf("the dead-jobs rule received %d distinct events, want 3", len(ids))
	}
}

// deliveredTo returns the details of the events the emulator matched to rule (its test-only
// /kumo/eventbridge/delivered-events endpoint).
func deliveredTo(t *testing.T, base, rule string) []string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(base, "/") + "/kumo/eventbridge/delivered-events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var all []struct {
		RuleName string          `json:"RuleName"`
		Detail   json.RawMessage `json:"Detail"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range all {
		if d.RuleName == rule {
			var s string
			if json.Unmarshal(d.Detail, &s) == nil {
				out = append(out, s)
			} else {
				out = append(out, string(d.Detail))
			}
		}
	}
	return out
}
