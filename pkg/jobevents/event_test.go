package jobevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// image is a job record's stream image, encoded by the store's own encoder.
func image(r idempotency.Record) map[string]events.DynamoDBAttributeValue {
	out := map[string]events.DynamoDBAttributeValue{}
	for k, v := range idempotency.ItemFromRecord(r, idempotency.DefaultShards) {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[k] = events.NewStringAttribute(v.Value)
		case *types.AttributeValueMemberN:
			out[k] = events.NewNumberAttribute(v.Value)
		default:
			panic(fmt.Sprintf("attribute %s: %T", k, v))
		}
	}
	return out
}

func record(name string, seq int, old, new *idempotency.Record) events.DynamoDBEventRecord {
	r := events.DynamoDBEventRecord{EventName: name, EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/myapp-jobs/stream/2026-12-01T00:00:00.000"}
	r.Change.SequenceNumber = strconv.Itoa(seq)
	if old != nil {
		r.Change.OldImage = image(*old)
	}
	if new != nil {
		r.Change.NewImage = image(*new)
	}
	return r
}

func rec(state idempotency.State, upd time.Time) *idempotency.Record {
	return &idempotency.Record{Kind: "report.build", Key: "2026-11", JobID: "01JOB", State: state, Runs: 2,
		FirstAttemptAt: t0, LastAttemptAt: t0.Add(time.Minute), UpdatedAt: upd, ExpiresAt: t0.Add(24 * time.Hour)}
}

func TestFromRecord(t *testing.T) {
	t.Parallel()
	running, succeeded := rec(idempotency.StateRunning, t0), rec(idempotency.StateSucceeded, t0.Add(2*time.Minute))
	succeeded.Result = `{"rows":42}`
	dead := rec(idempotency.StateDead, t0.Add(3*time.Minute))
	dead.Reason = "exhausted"
	retrying := rec(idempotency.StateRetrying, t0.Add(time.Minute))
	cancelled := rec(idempotency.StateCancelled, t0.Add(4*time.Minute))
	cancelled.Reason, cancelled.CancelRequestedAt = "cancelled", t0.Add(3*time.Minute)
	tests := []struct {
		name   string
		r      events.DynamoDBEventRecord
		want   bool
		state  string
		prev   string
		reason string
	}{
		{"finish succeeded", record("MODIFY", 1, running, succeeded), true, "succeeded", "running", ""},
		{"finish dead", record("MODIFY", 2, running, dead), true, "dead", "running", "exhausted"},
		{"cancelled on request", record("MODIFY", 3, running, cancelled), true, "cancelled", "running", "cancelled"},
		{"dead record created (mark dead)", record("INSERT", 4, nil, dead), true, "dead", "", "exhausted"},
		{"retrying: not final", record("MODIFY", 5, running, retrying), false, "", "", ""},
		{"claim: not final", record("MODIFY", 6, retrying, running), false, "", "", ""},
		{"no state change", record("MODIFY", 7, succeeded, succeeded), false, "", "", ""},
		{"TTL deletion", record("REMOVE", 8, succeeded, nil), false, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok, err := FromRecord(&tt.r)
			if err != nil || ok != tt.want {
				t.Fatalf("FromRecord = %+v, %v, %v; want ok %v", ev, ok, err, tt.want)
			}
			if Filter(&tt.r) != (tt.want || tt.name == "no state change") {
				t.Errorf("Filter = %v", Filter(&tt.r))
			}
			if !ok {
				return
			}
			if ev.State != tt.state || ev.PreviousState != tt.prev || ev.Reason != tt.reason || ev.JobID != "01JOB" ||
				ev.Kind != "report.build" || ev.Key != "2026-11" || ev.Runs != 2 || ev.Table != "myapp-jobs" || ev.V != SchemaVersion {
				t.Errorf("event %+v", ev)
			}
			pk := idempotency.ItemKey("report.build", "2026-11")
			if ev.ID != EventID(pk, idempotency.State(tt.state), ev.FinishedAt) || len(ev.ID) != 32 {
				t.Errorf("event id %q is not the stable id", ev.ID)
			}
		})
	}
	// The id is the same for the same state change, and differs for another.
	a, _, _ := FromRecord(&tests[0].r)
	again := record("MODIFY", 99, running, succeeded)
	b, _, _ := FromRecord(&again)
	later := rec(idempotency.StateSucceeded, t0.Add(time.Hour))
	other := record("MODIFY", 100, running, later)
	c, _, _ := FromRecord(&other)
	if a.ID != b.ID || a.ID == c.ID {
		t.Errorf("ids: %s %s %s; want the first two equal (a redelivery), the third distinct", a.ID, b.ID, c.ID)
	}
	if a.ResultBytes != len(`{"rows":42}`) || a.FirstAttemptAt == nil || !a.FinishedAt.Equal(succeeded.UpdatedAt) {
		t.Errorf("event %+v: want the result's size and the times", a)
	}
	// A chain of pkg/batch (an item of its own in the table, "chain:<id>", no '#') ends in st
	// succeeded or cancelled: the mapping's filter passes it, FromRecord skips it (it is no job).
	chainImg := func(st string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{idempotency.AttrPK: events.NewStringAttribute("chain:01CHAIN"),
			idempotency.AttrState: events.NewStringAttribute(st), "dat": events.NewNumberAttribute("1764583200000")}
	}
	for _, st := range []string{"succeeded", "cancelled"} {
		r := events.DynamoDBEventRecord{EventName: "MODIFY", EventSourceArn: tests[0].r.EventSourceArn}
		r.Change.OldImage, r.Change.NewImage = chainImg("running"), chainImg(st)
		if ev, ok, err := FromRecord(&r); ok || err != nil || !Filter(&r) {
			t.Errorf("a chain item ending %s: FromRecord = %+v, %v, %v (filter %v); want skipped without an error", st, ev, ok, err, Filter(&r))
		}
	}
	// A MODIFY without an old image (a stream with NEW_IMAGE only) is malformed.
	bad := record("MODIFY", 101, nil, succeeded)
	if _, _, err := FromRecord(&bad); !errors.Is(err, ErrMalformed) {
		t.Errorf("MODIFY without an old image = %v, want ErrMalformed", err)
	}
}

// fakeBus is an EventBridge that accepts, refuses or fails entries as told.
type fakeBus struct {
	mu       sync.Mutex
	calls    int
	refuse   map[int]string // call number → error code for its first entry
	failCall map[int]bool   // call number → the whole call fails
	accepted []Event
}

func (f *fakeBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.failCall[f.calls] {
		return nil, errors.New("connection reset")
	}
	out := &eventbridge.PutEventsOutput{}
	for i, e := range in.Entries {
		if code, ok := f.refuse[f.calls]; ok && i == 0 {
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("slow down")})
			out.FailedEntryCount++
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &ev); err != nil {
			return nil, err
		}
		f.accepted = append(f.accepted, ev)
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String("eb-" + strconv.Itoa(len(f.accepted)))})
	}
	return out, nil
}

func newPublisher(t *testing.T, bus EventBridgeAPI) *Publisher {
	t.Helper()
	p, err := New(Config{EventBridge: bus, MaxAttempts: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p.sleep = func(context.Context, time.Duration) error { return nil }
	return p
}

// batch is n finish records (running → succeeded) of distinct jobs, sequence numbers 1…n.
func batch(n int) events.DynamoDBEvent {
	var ev events.DynamoDBEvent
	for i := 1; i <= n; i++ {
		old, new := rec(idempotency.StateRunning, t0), rec(idempotency.StateSucceeded, t0.Add(time.Duration(i)*time.Second))
		old.Key, new.Key = "k"+strconv.Itoa(i), "k"+strconv.Itoa(i)
		ev.Records = append(ev.Records, record("MODIFY", i, old, new))
	}
	return ev
}

func TestHandleDynamoDBPublishesInChunksAndRetries(t *testing.T) {
	t.Parallel()
	bus := &fakeBus{refuse: map[int]string{2: "ThrottlingException"}}
	p := newPublisher(t, bus)
	resp, err := p.HandleDynamoDB(context.Background(), batch(23))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("response %+v, %v; want no failures", resp, err)
	}
	if len(bus.accepted) != 23 || bus.calls != 4 { // 10, 10 (one refused), its retry of 1, 3
		t.Errorf("%d events in %d calls, want 23 in 4", len(bus.accepted), bus.calls)
	}
	if st := p.Stats(); st.Published != 23 || st.Records != 23 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestHandleDynamoDBReportsTheFirstUnpublishedRecord(t *testing.T) {
	t.Parallel()
	// The second chunk's call fails twice (MaxAttempts 2): its first record is reported, and the
	// third chunk is not sent.
	bus := &fakeBus{failCall: map[int]bool{2: true, 3: true}}
	p := newPublisher(t, bus)
	resp, err := p.HandleDynamoDB(context.Background(), batch(25))
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "11" {
		t.Fatalf("response %+v, %v; want the failure at sequence number 11", resp, err)
	}
	if len(bus.accepted) != 10 || bus.calls != 3 {
		t.Errorf("%d events in %d calls; want 10 in 3 (nothing after the failure)", len(bus.accepted), bus.calls)
	}
	if st := p.Stats(); st.Failed != 15 {
		t.Errorf("Failed = %d, want 15", st.Failed)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{},
		{EventBridge: &fakeBus{}, Source: "aws.sqsworker"},
		{EventBridge: &fakeBus{}, MaxAttempts: 11},
		{EventBridge: &fakeBus{}, RetryDelay: -time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
