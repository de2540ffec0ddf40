package dlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	for _, tc := range []struct {
		name   string
		mutate func(*dlq.Config)
		field  string
	}{
		{"no client", func(c *dlq.Config) { c.SQS = nil }, "SQS"},
		{"no DLQ", func(c *dlq.Config) { c.DLQURL = "" }, "DLQURL"},
		{"no source", func(c *dlq.Config) { c.SourceURL = "" }, "SourceURL"},
		{"same queue", func(c *dlq.Config) { c.SourceURL = c.DLQURL }, "same queue"},
		{"negative rate", func(c *dlq.Config) { c.RatePerSecond = -1 }, "RatePerSecond"},
		{"negative peek", func(c *dlq.Config) { c.PeekVisibility = -time.Second }, "PeekVisibility"},
		{"long peek", func(c *dlq.Config) { c.PeekVisibility = 13 * time.Hour }, "PeekVisibility"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := newFakeDLQ(f, tc.mutate)
			if !errors.Is(err, dlq.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New error = %v, want ErrInvalid naming %s", err, tc.field)
			}
		})
	}
	if _, err := newFakeDLQ(f, func(c *dlq.Config) { c.RatePerSecond, c.PeekVisibility = 0, 0 }); err != nil {
		t.Fatalf("New with defaults: %v", err)
	}
}

func TestRedriveAllMoveTask(t *testing.T) {
	t.Parallel()
	accessDenied := &apiError{code: "AccessDenied", msg: "not authorized"}
	for _, tc := range []struct {
		name       string
		opts       dlq.RedriveOptions
		rate       int
		arns       bool // ARNs in the Config (else looked up)
		listErr    error
		moveErr    error
		wantMethod string
		wantErr    error // errors.Is target; nil: none
		wantStarts int
		wantRate   int32
		wantMoved  int  // messages the fallback moved
		wantResets bool // the status reset every job
	}{
		{name: "task started", rate: 0, wantMethod: dlq.MethodMoveTask, wantStarts: 1, wantRate: 100, wantResets: true},
		{name: "configured ARNs, capped rate", rate: 2000, arns: true, wantMethod: dlq.MethodMoveTask, wantStarts: 1, wantRate: 500, wantResets: true},
		{name: "probe says unsupported", listErr: unsupportedErr("InvalidAction"), wantMethod: dlq.MethodFallback, wantMoved: 4, wantResets: true},
		{name: "start says unsupported", moveErr: unsupportedErr("UnsupportedOperation"), wantMethod: dlq.MethodFallback, wantStarts: 1, wantMoved: 4, wantResets: true},
		{name: "unknown operation message", listErr: &apiError{code: "BadRequest", msg: "Unknown operation StartMessageMoveTask"}, wantMethod: dlq.MethodFallback, wantMoved: 4, wantResets: true},
		{name: "required but unsupported", opts: dlq.RedriveOptions{UseMoveTask: true}, listErr: unsupportedErr("InvalidAction"),
			moveErr: unsupportedErr("InvalidAction"), wantMethod: dlq.MethodMoveTask, wantErr: errors.New("InvalidAction"), wantStarts: 1, wantResets: true},
		{name: "other error", moveErr: accessDenied, wantMethod: dlq.MethodMoveTask, wantErr: accessDenied, wantStarts: 1, wantResets: true},
		{name: "no move task", opts: dlq.RedriveOptions{NoMoveTask: true}, wantMethod: dlq.MethodFallback, wantMoved: 4, wantResets: true},
		{name: "both options", opts: dlq.RedriveOptions{UseMoveTask: true, NoMoveTask: true}, wantErr: dlq.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeSQS()
			f.listErr, f.moveErr = tc.listErr, tc.moveErr
			seedFake(f, 0, 3, nil)
			f.put(fakeDLQ, "not an envelope", nil, nil)
			var rs fakeResetter
			d, err := newFakeDLQ(f, func(c *dlq.Config) {
				c.RatePerSecond, c.Status = tc.rate, &rs
				if tc.arns {
					c.SourceARN, c.DLQARN = "arn:src", "arn:dlq"
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := d.RedriveAll(context.Background(), tc.opts)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("RedriveAll error = %v", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr) && (err == nil || !strings.Contains(err.Error(), tc.wantErr.Error())):
				t.Fatalf("RedriveAll error = %v, want %v", err, tc.wantErr)
			}
			if res.Method != tc.wantMethod || res.Moved != tc.wantMoved {
				t.Errorf("RedriveAll = %+v, want method %q, %d moved", res, tc.wantMethod, tc.wantMoved)
			}
			if len(f.moves) != tc.wantStarts {
				t.Fatalf("%d StartMessageMoveTask calls, want %d", len(f.moves), tc.wantStarts)
			}
			if tc.wantStarts > 0 {
				in := f.moves[0]
				wantSrc, wantDst := fakeARN(fakeDLQ), fakeARN(fakeSource)
				if tc.arns {
					wantSrc, wantDst = "arn:dlq", "arn:src"
				}
				if aws.ToString(in.SourceArn) != wantSrc || aws.ToString(in.DestinationArn) != wantDst {
					t.Errorf("move task from %q to %q, want %q to %q", aws.ToString(in.SourceArn), aws.ToString(in.DestinationArn), wantSrc, wantDst)
				}
				if tc.wantRate != 0 && aws.ToInt32(in.MaxNumberOfMessagesPerSecond) != tc.wantRate {
					t.Errorf("move task rate %d, want %d", aws.ToInt32(in.MaxNumberOfMessagesPerSecond), tc.wantRate)
				}
			}
			if tc.wantMethod == dlq.MethodMoveTask && err == nil && res.TaskHandle != "task-1" {
				t.Errorf("TaskHandle = %q", res.TaskHandle)
			}
			calls := rs.get()
			if tc.wantResets {
				for _, want := range []string{testKind + "/key-000 keep=false", testKind + "/key-001 keep=false", testKind + "/key-002 keep=false"} {
					if !slices.Contains(calls, want) {
						t.Errorf("resets %v lack %q", calls, want)
					}
				}
			} else if len(calls) != 0 {
				t.Errorf("resets %v, want none", calls)
			}
			// The move task leaves the messages to SQS; the fallback moved them all. Either way
			// nothing is left hidden.
			visible, hidden := f.count(fakeDLQ)
			if hidden != 0 || visible != 4-tc.wantMoved {
				t.Errorf("DLQ has %d visible and %d hidden messages, want %d visible", visible, hidden, 4-tc.wantMoved)
			}
		})
	}
}

func TestFallbackFIFOEntries(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	const source = fakeSource + ".fifo"
	seedFake(f, 0, 2, func(i int) map[string]string {
		if i == 0 {
			return map[string]string{"MessageGroupId": "tenant-7"}
		}
		return nil // a backend that does not report the group
	})
	f.put(fakeDLQ, "opaque", nil, nil)
	d, err := newFakeDLQ(f, func(c *dlq.Config) { c.SourceURL = source })
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.RedriveAll(context.Background(), dlq.RedriveOptions{NoMoveTask: true})
	if err != nil || res.Moved != 3 {
		t.Fatalf("RedriveAll = %+v, %v", res, err)
	}
	groups := map[string]string{}
	dedup := map[string]bool{}
	for _, e := range f.sent {
		b := aws.ToString(e.MessageBody)
		id := b
		if env, err := jobs.ParseEnvelope(b); err == nil {
			id = env.ID
			if env.AttemptsBefore != 0 {
				t.Errorf("%s: attempts_before %d, want 0", id, env.AttemptsBefore)
			}
		}
		groups[id] = aws.ToString(e.MessageGroupId)
		if dd := aws.ToString(e.MessageDeduplicationId); dd == "" || dedup[dd] {
			t.Errorf("%s: deduplication id %q empty or reused", id, dd)
		} else {
			dedup[dd] = true
		}
		if _, ok := e.MessageAttributes[worker.FailureAttribute]; ok {
			t.Errorf("%s: the failure attribute was sent", id)
		}
	}
	want := map[string]string{"job-000": "tenant-7", "job-001": testKind, "opaque": "default"}
	for id, g := range want {
		if groups[id] != g {
			t.Errorf("%s sent in group %q, want %q (all: %v)", id, groups[id], g, groups)
		}
	}
}

func TestFallbackRespectsRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		rate, n    int
		wantSleeps []time.Duration
	}{
		{"ten per second", 10, 25, []time.Duration{time.Second, time.Second}},
		{"four per second", 4, 10, []time.Duration{time.Second, time.Second}},
		{"fast", 1000, 25, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeSQS()
			seedFake(f, 0, tc.n, nil)
			clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
			d, err := newFakeDLQ(f, func(c *dlq.Config) { c.RatePerSecond, c.Now, c.Sleep = tc.rate, clock.Now, clock.Sleep })
			if err != nil {
				t.Fatal(err)
			}
			res, err := d.RedriveAll(context.Background(), dlq.RedriveOptions{NoMoveTask: true})
			if err != nil || res.Moved != tc.n {
				t.Fatalf("RedriveAll = %+v, %v", res, err)
			}
			if !slices.Equal(clock.sleeps, tc.wantSleeps) {
				t.Errorf("slept %v, want %v", clock.sleeps, tc.wantSleeps)
			}
		})
	}
}

func TestFallbackFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		refuse    func(string) bool
		sendErr   error
		resetErr  error
		wantMoved int
		wantErr   string
	}{
		{"refused entry stays", func(b string) bool { return strings.Contains(b, "job-001") }, nil, nil, 4, "1 dead letters could not be sent"},
		{"send request fails", nil, errors.New("connection reset"), nil, 0, "connection reset"},
		{"status reset fails", nil, nil, errors.New("table gone"), 0, "table gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeSQS()
			f.refuse, f.sendErr = tc.refuse, tc.sendErr
			seedFake(f, 0, 5, nil)
			rs := &fakeResetter{err: tc.resetErr}
			d, err := newFakeDLQ(f, func(c *dlq.Config) { c.Status = rs })
			if err != nil {
				t.Fatal(err)
			}
			res, err := d.RedriveAll(context.Background(), dlq.RedriveOptions{NoMoveTask: true})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || res.Moved != tc.wantMoved {
				t.Fatalf("RedriveAll = %+v, %v; want %d moved and an error with %q", res, err, tc.wantMoved, tc.wantErr)
			}
			// What was not sent stays in the DLQ, visible at once; nothing sent is left there.
			visible, hidden := f.count(fakeDLQ)
			if hidden != 0 || visible != 5-tc.wantMoved {
				t.Errorf("DLQ has %d visible and %d hidden, want %d visible", visible, hidden, 5-tc.wantMoved)
			}
			if sent, _ := f.count(fakeSource); sent != tc.wantMoved {
				t.Errorf("job queue has %d, want %d", sent, tc.wantMoved)
			}
		})
	}
}

func TestRedriveJobFake(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	seedFake(f, 0, 15, nil) // more than one receive
	rs := &fakeResetter{}
	d, err := newFakeDLQ(f, func(c *dlq.Config) { c.Status = rs })
	if err != nil {
		t.Fatal(err)
	}
	if err := d.RedriveJob(context.Background(), "job-012", true); err != nil {
		t.Fatal(err)
	}
	if got := rs.get(); !slices.Equal(got, []string{testKind + "/key-012 keep=true"}) {
		t.Errorf("resets %v", got)
	}
	if len(f.sent) != 1 {
		t.Fatalf("sent %d messages, want 1", len(f.sent))
	}
	env, err := jobs.ParseEnvelope(aws.ToString(f.sent[0].MessageBody))
	if err != nil || env.ID != "job-012" || env.AttemptsBefore != 2 {
		t.Errorf("sent %+v, %v; want job-012 with attempts_before kept", env, err)
	}
	if v := f.sent[0].MessageAttributes["tenant"]; aws.ToString(v.StringValue) != "acme" {
		t.Errorf("attributes %v lost the tenant", f.sent[0].MessageAttributes)
	}
	if visible, hidden := f.count(fakeDLQ); visible != 14 || hidden != 0 {
		t.Errorf("DLQ has %d visible and %d hidden, want 14 visible", visible, hidden)
	}
}

func TestPeekDecodesMessages(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	seedFake(f, 0, 1, func(int) map[string]string {
		return map[string]string{"SentTimestamp": "1795946400000", "ApproximateReceiveCount": "4"}
	})
	f.put(fakeDLQ, "opaque", map[string]sqstypes.MessageAttributeValue{
		"blob": {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2, 3}},
	}, nil)
	d, err := newFakeDLQ(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Peek(context.Background(), 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("Peek = %v, %v", got, err)
	}
	m := got[0]
	if m.JobID != "job-000" || m.Kind != testKind || m.Reason != jobs.ReasonExhausted || m.Attempts != 3 ||
		m.ReceiveCount != 4 || !m.SentAt.Equal(time.UnixMilli(1795946400000)) || m.Failure.Error != "boom" {
		t.Errorf("message = %+v", m)
	}
	o := got[1]
	if o.Failure != nil || o.Reason != dlq.ReasonMaxReceiveCount || o.JobID != "" || o.Attributes["blob"] != "AQID" {
		t.Errorf("opaque message = %+v", o)
	}
	if _, err := d.Peek(context.Background(), -1); !errors.Is(err, dlq.ErrInvalid) {
		t.Errorf("Peek(-1) error = %v", err)
	}
	if visible, hidden := f.count(fakeDLQ); visible != 2 || hidden != 0 {
		t.Errorf("DLQ has %d visible and %d hidden after Peek", visible, hidden)
	}
}

// TestFallbackLeavesNewDeadLetters checks each rule by which the fallback mover tells the dead
// letters that were in the DLQ at its start from those that arrived since, on a fake whose
// responses carry no server time (so the start is Config.Now): each case defeats the other rules.
func TestFallbackLeavesNewDeadLetters(t *testing.T) {
	t.Parallel()
	const n = 5
	failure := func(jobID, source string) map[string]sqstypes.MessageAttributeValue {
		v, _ := json.Marshal(worker.Failure{Reason: jobs.ReasonCancelled, JobID: jobID, SourceMessageID: source})
		return map[string]sqstypes.MessageAttributeValue{worker.FailureAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(v))}}
	}
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	sentAt := func(t time.Time) map[string]string {
		return map[string]string{"SentTimestamp": strconv.FormatInt(t.UnixMilli(), 10)}
	}
	for _, tc := range []struct {
		name string
		seed func(f *fakeSQS, i int)
		// again dead-letters a moved message again, as a worker or SQS would.
		again               func(f *fakeSQS, m *fakeMsg)
		wantMoved, wantLeft int
	}{
		{
			// A worker dead-letters the moved copy again; its body is no envelope, so only the
			// failure's source_message_id ties it to this redrive (the clock says "before").
			name: "copy names the moved message as its source",
			seed: func(f *fakeSQS, i int) {
				f.put(fakeDLQ, fmt.Sprintf("opaque-%d", i), failure("", "src"), sentAt(start.Add(-time.Minute)))
			},
			again: func(f *fakeSQS, m *fakeMsg) {
				f.putLocked(fakeDLQ, "", m.body, failure("", m.id), sentAt(start.Add(-time.Minute)))
			},
			wantMoved: n, wantLeft: n,
		},
		{
			// SQS's redrive policy moves the copy under its own message id, without a failure.
			name: "SQS moved the copy back under its id",
			seed: func(f *fakeSQS, i int) {
				f.put(fakeDLQ, fmt.Sprintf("opaque-%d", i), nil, sentAt(start.Add(-time.Minute)))
			},
			again: func(f *fakeSQS, m *fakeMsg) {
				f.putLocked(fakeDLQ, m.id, m.body, nil, sentAt(start.Add(-time.Minute)))
			},
			wantMoved: n, wantLeft: n,
		},
		{
			// The worker re-sent the job under a new message id (a long retry), then dead-lettered
			// that: only the job id ties it to this redrive.
			name: "copy of a job already moved",
			seed: func(f *fakeSQS, i int) {
				env := envelope(i)
				f.put(fakeDLQ, body(env), failure(env.ID, "src"), sentAt(start.Add(-time.Minute)))
			},
			again: func(f *fakeSQS, m *fakeMsg) {
				env, _ := jobs.ParseEnvelope(m.body)
				f.putLocked(fakeDLQ, "", m.body, failure(env.ID, "some-resent-copy"), sentAt(start.Add(-time.Minute)))
			},
			wantMoved: n, wantLeft: n,
		},
		{
			// Other jobs dead-lettered after the start, by the timestamp alone.
			name: "sent after the start",
			seed: func(f *fakeSQS, i int) {
				at := start.Add(-time.Minute)
				if i%2 == 1 {
					at = start.Add(time.Second)
				}
				env := envelope(i)
				f.put(fakeDLQ, body(env), failure(env.ID, fmt.Sprintf("src-%d", i)), sentAt(at))
			},
			wantMoved: 3, wantLeft: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeSQS()
			for i := range n {
				tc.seed(f, i)
			}
			f.onSent = tc.again
			clock := &fakeClock{now: start}
			d, err := newFakeDLQ(f, func(c *dlq.Config) { c.Now, c.Sleep = clock.Now, clock.Sleep })
			if err != nil {
				t.Fatal(err)
			}
			res, err := d.RedriveAll(context.Background(), dlq.RedriveOptions{NoMoveTask: true})
			if err != nil || res.Moved != tc.wantMoved || res.LeftBehind != tc.wantLeft || res.Total != n {
				t.Fatalf("RedriveAll = %+v, %v; want %d moved of %d, %d left behind", res, err, tc.wantMoved, n, tc.wantLeft)
			}
			// What it left is visible again at once.
			if visible, hidden := f.count(fakeDLQ); hidden != 0 || visible != tc.wantLeft {
				t.Errorf("DLQ has %d visible and %d hidden messages afterwards, want %d visible", visible, hidden, tc.wantLeft)
			}
		})
	}
}
