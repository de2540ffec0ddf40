package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/heartbeat"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

const (
	testARN     = "arn:aws:sqs:us-east-1:123456789012:jobs"
	testFIFOARN = "arn:aws:sqs:us-east-1:123456789012:jobs.fifo"
	testURL     = "https://sqs.test/jobs"
	testDLQURL  = "https://sqs.test/jobs-dlq"
)

// testArgs is a kind whose behaviour the args choose.
type testArgs struct {
	Do    string `json:"do"` // ok, fail, panic, cancel, slow, block, retry_after
	Delay string `json:"delay,omitempty"`
	N     int    `json:"n,omitempty"`
}

func (testArgs) Kind() string { return "test.job" }

// recorder remembers the jobs it ran, in order.
type recorder struct {
	mu      sync.Mutex
	ran     []string // job ids
	infos   []jobs.Info
	traces  []string
	release chan struct{}
}

func (r *recorder) work(ctx context.Context, job *jobs.Job[testArgs]) error {
	r.mu.Lock()
	r.ran = append(r.ran, job.ID)
	r.infos = append(r.infos, *job.Info)
	r.traces = append(r.traces, jobs.TraceParentFromContext(ctx))
	r.mu.Unlock()
	switch job.Args.Do {
	case "fail":
		return errors.New("failed on purpose")
	case "panic":
		panic("kaboom")
	case "cancel":
		return jobs.Cancel(errors.New("not worth retrying"))
	case "retry_after":
		d, _ := time.ParseDuration(job.Args.Delay)
		return jobs.RetryAfter(d, errors.New("come back later"))
	case "slow": // honours its context
		<-ctx.Done()
		return ctx.Err()
	case "block": // ignores its context
		<-r.release
	}
	return nil
}

func (r *recorder) ranIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ran...)
}

type testSetup struct {
	sqs  *fakeSQS
	rec  *recorder
	h    *Handler
	logs *bytes.Buffer
}

func newTestHandler(t *testing.T, mutate func(*Config), opts ...jobs.Option) *testSetup {
	t.Helper()
	reg := jobs.NewRegistry()
	rec := &recorder{release: make(chan struct{})}
	t.Cleanup(func() { close(rec.release) })
	opts = append([]jobs.Option{jobs.WithMaxAttempts(3), jobs.WithPolicy(jobs.PolicyFunc(func(n int) time.Duration { return time.Duration(n) * 10 * time.Second }))}, opts...)
	if err := jobs.Register(reg, jobs.WorkFunc[testArgs](rec.work), opts...); err != nil {
		t.Fatal(err)
	}
	fake := newFakeSQS()
	logs := &bytes.Buffer{}
	cfg := Config{
		Registry: reg,
		SQS:      fake,
		Logger:   slog.New(slog.NewJSONHandler(&lockedWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testSetup{sqs: fake, rec: rec, h: h, logs: logs}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// msg builds an SQS message whose body is an envelope for testArgs.
func msg(id string, args testArgs, mutate ...func(*jobs.Envelope, *events.SQSMessage)) events.SQSMessage {
	a, _ := json.Marshal(args)
	env := jobs.Envelope{V: 1, ID: "job-" + id, Kind: "test.job", Args: a}
	m := events.SQSMessage{
		MessageId: id, ReceiptHandle: "rh-" + id, EventSource: "aws:sqs", EventSourceARN: testARN, AWSRegion: "us-east-1",
		Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1764410400000"},
	}
	for _, f := range mutate {
		f(&env, &m)
	}
	if m.Body == "" {
		b, err := env.MarshalJSON()
		if err != nil {
			panic(err)
		}
		m.Body = string(b)
	}
	return m
}

func receives(n int) func(*jobs.Envelope, *events.SQSMessage) {
	return func(_ *jobs.Envelope, m *events.SQSMessage) {
		m.Attributes["ApproximateReceiveCount"] = strconv.Itoa(n)
	}
}

func group(g string) func(*jobs.Envelope, *events.SQSMessage) {
	return func(_ *jobs.Envelope, m *events.SQSMessage) {
		m.EventSourceARN = testFIFOARN
		m.Attributes["MessageGroupId"] = g
	}
}

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func handle(t *testing.T, s *testSetup, ctx context.Context, msgs ...events.SQSMessage) []string {
	t.Helper()
	resp, err := s.h.HandleSQS(ctx, events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatalf("HandleSQS: %v", err)
	}
	return failedIDs(resp)
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func decodeFailure(t *testing.T, e *sqstypes.SendMessageBatchRequestEntry) Failure {
	t.Helper()
	a, ok := e.MessageAttributes[FailureAttribute]
	if !ok {
		t.Fatalf("entry has no %s attribute: %v", FailureAttribute, e.MessageAttributes)
	}
	var f Failure
	if err := json.Unmarshal([]byte(aws.ToString(a.StringValue)), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestPartialBatchFailure(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	failed := handle(t, s, context.Background(),
		msg("1", testArgs{Do: "ok"}),
		msg("2", testArgs{Do: "fail"}),
		msg("3", testArgs{Do: "panic"}),
		msg("4", testArgs{Do: "ok"}),
		msg("5", testArgs{Do: "cancel"}),
	)
	if !equal(failed, []string{"2", "3"}) {
		t.Errorf("failed = %v, want [2 3]", failed)
	}
	for _, rh := range []string{"rh-2", "rh-3"} {
		if v, ok := s.sqs.visibilityOf(rh); !ok || v != 10 {
			t.Errorf("visibility of %s = %d (set %v), want 10 (the policy's first backoff)", rh, v, ok)
		}
	}
	for _, rh := range []string{"rh-1", "rh-4", "rh-5"} {
		if _, ok := s.sqs.visibilityOf(rh); ok {
			t.Errorf("visibility of acknowledged %s was changed", rh)
		}
	}
	dlq := s.sqs.sentTo(testDLQURL)
	if len(dlq) != 1 {
		t.Fatalf("DLQ got %d messages, want 1 (the cancelled job)", len(dlq))
	}
	f := decodeFailure(t, &dlq[0])
	if f.Reason != jobs.ReasonCancelled || f.JobID != "job-5" || f.SourceMessageID != "5" || !strings.Contains(f.Error, "not worth retrying") {
		t.Errorf("failure = %+v", f)
	}
	if !strings.Contains(s.logs.String(), "kaboom") || !strings.Contains(s.logs.String(), "runtime/debug.Stack") {
		t.Errorf("the panic and its stack are not logged:\n%s", s.logs.String())
	}
	if got := s.sqs.callCount("ChangeMessageVisibilityBatch"); got != 1 {
		t.Errorf("ChangeMessageVisibilityBatch calls = %d, want 1", got)
	}
}

func TestExhaustedAndBeyondAttempts(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	failed := handle(t, s, context.Background(),
		msg("last", testArgs{Do: "fail"}, receives(3)),
		msg("beyond", testArgs{Do: "ok"}, receives(4)),
		msg("override", testArgs{Do: "fail"}, receives(3), func(e *jobs.Envelope, _ *events.SQSMessage) { e.MaxAttempts = 10 }),
		msg("before", testArgs{Do: "fail"}, receives(1), func(e *jobs.Envelope, _ *events.SQSMessage) { e.AttemptsBefore = 2 }),
	)
	if !equal(failed, []string{"override"}) {
		t.Errorf("failed = %v, want [override]", failed)
	}
	if ran := s.rec.ranIDs(); strings.Contains(strings.Join(ran, ","), "job-beyond") {
		t.Errorf("a job beyond its attempts ran: %v", ran)
	}
	dlq := s.sqs.sentTo(testDLQURL)
	if len(dlq) != 3 {
		t.Fatalf("DLQ got %d, want 3", len(dlq))
	}
	reasons := map[string]Failure{}
	for i := range dlq {
		f := decodeFailure(t, &dlq[i])
		reasons[f.SourceMessageID] = f
	}
	if f := reasons["last"]; f.Reason != jobs.ReasonExhausted || f.Attempts != 3 {
		t.Errorf("last: %+v", f)
	}
	if f := reasons["beyond"]; f.Reason != jobs.ReasonExhausted || !strings.Contains(f.Error, "beyond max attempts 3") {
		t.Errorf("beyond: %+v", f)
	}
	if f := reasons["before"]; f.Reason != jobs.ReasonExhausted || f.Attempts != 3 {
		t.Errorf("attempts_before + receive count: %+v", f)
	}
}

func TestMalformedAndUnknownKindGoToDLQOnFirstReceive(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	bad := msg("bad", testArgs{}, func(_ *jobs.Envelope, m *events.SQSMessage) { m.Body = "hello, not json" })
	unknown := msg("unknown", testArgs{}, func(e *jobs.Envelope, _ *events.SQSMessage) { e.Kind = "nobody.home" })
	badArgs := msg("badargs", testArgs{}, func(e *jobs.Envelope, _ *events.SQSMessage) { e.Args = json.RawMessage(`{"do":42}`) })
	failed := handle(t, s, context.Background(), bad, unknown, badArgs)
	if len(failed) != 0 {
		t.Errorf("failed = %v, want none (all dead-lettered)", failed)
	}
	dlq := s.sqs.sentTo(testDLQURL)
	got := map[string]Failure{}
	for i := range dlq {
		f := decodeFailure(t, &dlq[i])
		got[f.SourceMessageID] = f
		if f.SourceMessageID == "bad" && aws.ToString(dlq[i].MessageBody) != "hello, not json" {
			t.Errorf("DLQ body = %q, want the original", aws.ToString(dlq[i].MessageBody))
		}
	}
	if got["bad"].Reason != jobs.ReasonMalformed || got["unknown"].Reason != jobs.ReasonUnknownKind || got["badargs"].Reason != jobs.ReasonMalformed {
		t.Errorf("reasons = %+v", got)
	}
	if got["unknown"].Kind != "nobody.home" || got["unknown"].SourceQueue != testARN {
		t.Errorf("unknown kind failure = %+v", got["unknown"])
	}
	// The DLQ URL was looked up once from the redrive policy and is cached.
	handle(t, s, context.Background(), msg("bad2", testArgs{}, func(_ *jobs.Envelope, m *events.SQSMessage) { m.Body = "{}" }))
	if n := s.sqs.callCount("GetQueueAttributes"); n != 1 {
		t.Errorf("GetQueueAttributes calls = %d, want 1 (cached)", n)
	}
}

func TestFailedDLQSendReportsItemFailed(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	s.sqs.sendErr = errors.New("AWS.SimpleQueueService.NonExistentQueue")
	failed := handle(t, s, context.Background(), msg("1", testArgs{Do: "cancel"}), msg("2", testArgs{Do: "ok"}))
	if !equal(failed, []string{"1"}) {
		t.Errorf("failed = %v, want [1]", failed)
	}
	if !strings.Contains(s.logs.String(), "NonExistentQueue") {
		t.Errorf("the send error is not logged:\n%s", s.logs.String())
	}
}

func TestFailedDLQEntryReportsOnlyThatItem(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	bad := msg("1", testArgs{}, func(_ *jobs.Envelope, m *events.SQSMessage) { m.Body = "poison-a" })
	bad2 := msg("2", testArgs{}, func(_ *jobs.Envelope, m *events.SQSMessage) { m.Body = "poison-b" })
	s.sqs.failBodies = map[string]bool{"poison-a": true}
	failed := handle(t, s, context.Background(), bad, bad2)
	if !equal(failed, []string{"1"}) {
		t.Errorf("failed = %v, want [1]", failed)
	}
}

func TestFIFOOrderAndGroupSkip(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, func(c *Config) { c.Concurrency = 4 })
	failed := handle(t, s, context.Background(),
		msg("a1", testArgs{Do: "ok"}, group("A")),
		msg("b1", testArgs{Do: "ok"}, group("B")),
		msg("a2", testArgs{Do: "fail"}, group("A")),
		msg("b2", testArgs{Do: "ok"}, group("B")),
		msg("a3", testArgs{Do: "ok"}, group("A")),
		msg("b3", testArgs{Do: "ok"}, group("B")),
	)
	if !equal(failed, []string{"a2", "a3"}) {
		t.Errorf("failed = %v, want [a2 a3]", failed)
	}
	var a, b []string
	for _, id := range s.rec.ranIDs() {
		switch id[4] {
		case 'a':
			a = append(a, id)
		case 'b':
			b = append(b, id)
		}
	}
	if !equal(a, []string{"job-a1", "job-a2"}) || !equal(b, []string{"job-b1", "job-b2", "job-b3"}) {
		t.Errorf("ran A=%v B=%v, want A in order up to the failure and all of B in order", a, b)
	}
	if v, _ := s.sqs.visibilityOf("rh-a3"); v != 0 {
		t.Errorf("the skipped tail's visibility = %d, want 0", v)
	}
	if v, _ := s.sqs.visibilityOf("rh-a2"); v != 10 {
		t.Errorf("the failed message's visibility = %d, want its backoff 10", v)
	}
}

func TestFIFODeadLetterKeepsGroupAndDedupsBySourceID(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	failed := handle(t, s, context.Background(),
		msg("a1", testArgs{Do: "cancel"}, group("A")),
		msg("a2", testArgs{Do: "ok"}, group("A")),
	)
	if len(failed) != 0 {
		t.Errorf("failed = %v, want none", failed)
	}
	dlq := s.sqs.sentTo("https://sqs.test/jobs-dlq.fifo")
	if len(dlq) != 1 || aws.ToString(dlq[0].MessageGroupId) != "A" || aws.ToString(dlq[0].MessageDeduplicationId) != "a1" {
		t.Fatalf("FIFO DLQ entries = %+v", dlq)
	}
	if ran := s.rec.ranIDs(); !equal(ran, []string{"job-a1", "job-a2"}) {
		t.Errorf("ran %v, want the group to go on after a delivered dead letter", ran)
	}
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, func(c *Config) { c.DeadlineMargin = time.Second; c.Concurrency = 4; c.AbandonGrace = 45 * time.Second })
	deadline := time.Now().Add(1500 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var msgs []events.SQSMessage
	msgs = append(msgs, msg("fast1", testArgs{Do: "ok"}), msg("slow", testArgs{Do: "slow"}), msg("block", testArgs{Do: "block"}), msg("fast2", testArgs{Do: "ok"}))
	failed := handle(t, s, ctx, msgs...)
	returned := time.Now()
	if !returned.Before(deadline) {
		t.Errorf("HandleSQS returned %s after the deadline", returned.Sub(deadline))
	}
	if !equal(failed, []string{"slow", "block"}) {
		t.Errorf("failed = %v, want [slow block]", failed)
	}
	if v, _ := s.sqs.visibilityOf("rh-block"); v != 45 {
		t.Errorf("abandoned job's visibility = %d, want the grace 45", v)
	}
}

func TestDeadlineAlreadyPassedRunsNothing(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, func(c *Config) { c.DeadlineMargin = 5 * time.Second })
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(4*time.Second))
	defer cancel()
	failed := handle(t, s, ctx, msg("1", testArgs{Do: "ok"}), msg("2", testArgs{Do: "ok"}))
	if !equal(failed, []string{"1", "2"}) || len(s.rec.ranIDs()) != 0 {
		t.Errorf("failed = %v, ran %v; want both failed unrun", failed, s.rec.ranIDs())
	}
	for _, rh := range []string{"rh-1", "rh-2"} {
		if v, ok := s.sqs.visibilityOf(rh); !ok || v != 0 {
			t.Errorf("visibility of unrun %s = %d (set %v), want 0", rh, v, ok)
		}
	}
}

func TestConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	var inFlight, peak atomic.Int32
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[testArgs](func(ctx context.Context, job *jobs.Job[testArgs]) error {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		for range 100 {
			runtime.Gosched() // stay in flight a little while
		}
		inFlight.Add(-1)
		return nil
	}))
	h, err := New(Config{Registry: reg, SQS: newFakeSQS(), Concurrency: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []events.SQSMessage
	for i := range 30 {
		msgs = append(msgs, msg(strconv.Itoa(i), testArgs{}))
	}
	resp, _ := h.HandleSQS(context.Background(), events.SQSEvent{Records: msgs})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %v", resp.BatchItemFailures)
	}
	if p := peak.Load(); p > 3 || p < 1 {
		t.Errorf("peak concurrency = %d, want 1..3", p)
	}
}

func TestTraceContextReachesJobAndLogs(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
	handle(t, s, context.Background(), msg("1", testArgs{Do: "ok"}, func(e *jobs.Envelope, m *events.SQSMessage) {
		e.Meta = map[string]string{"traceparent": tp}
		m.Attributes["AWSTraceHeader"] = xray
	}))
	if got := s.rec.traces; len(got) != 1 || got[0] != tp {
		t.Errorf("job context traceparent = %v, want %s", got, tp)
	}
	if got := s.rec.infos[0].AWSTraceHeader; got != xray {
		t.Errorf("Info.AWSTraceHeader = %q", got)
	}
	line := s.logs.String()
	if !strings.Contains(line, tp) || !strings.Contains(line, xray) || !strings.Contains(line, `"outcome":"succeeded"`) {
		t.Errorf("log line lacks the trace context: %s", line)
	}
	if strings.Contains(line, `"do":"ok"`) {
		t.Errorf("args were logged without LogArgs: %s", line)
	}
}

func TestMiddlewareSeam(t *testing.T) {
	t.Parallel()
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	s := newTestHandler(t, func(c *Config) {
		c.Middleware = []Middleware{
			MiddlewareFunc(func(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
				note("outer>" + job.ID)
				err := next(ctx)
				note("outer<" + job.ID)
				return err
			}),
			MiddlewareFunc(func(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
				switch job.ID {
				case "job-dup":
					return jobs.ErrSkipped
				case "job-store":
					job.Attempt = 1 // a store knows better than the receive count
				}
				return next(ctx)
			}),
		}
	})
	failed := handle(t, s, context.Background(),
		msg("dup", testArgs{Do: "fail"}),
		msg("store", testArgs{Do: "ok"}, receives(9)),
	)
	if len(failed) != 0 {
		t.Errorf("failed = %v, want none", failed)
	}
	if ran := s.rec.ranIDs(); !equal(ran, []string{"job-store"}) {
		t.Errorf("ran %v, want only job-store (dup skipped; store's attempt 1 ≤ 3)", ran)
	}
	if !strings.Contains(s.logs.String(), `"outcome":"skipped"`) {
		t.Errorf("no skipped outcome logged")
	}
	if len(order) != 4 {
		t.Errorf("outer middleware calls = %v", order)
	}
}

func TestLongRetryAfterResendsACopy(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := newTestHandler(t, func(c *Config) { c.Now = func() time.Time { return now }; c.QueueURL = testURL })
	failed := handle(t, s, context.Background(), msg("1", testArgs{Do: "retry_after", Delay: "20h"}, receives(2)))
	if len(failed) != 0 {
		t.Errorf("failed = %v, want none: the original is acknowledged once its copy is sent", failed)
	}
	sent := s.sqs.sentTo(testURL)
	if len(sent) != 1 {
		t.Fatalf("re-sent %d copies, want 1", len(sent))
	}
	env, err := jobs.DecodeEnvelope([]byte(aws.ToString(sent[0].MessageBody)))
	if err != nil {
		t.Fatal(err)
	}
	if env.AttemptsBefore != 2 || !env.RunAt.Equal(now.Add(20*time.Hour)) || env.ID != "job-1" || sent[0].DelaySeconds != 900 {
		t.Errorf("copy = %+v, DelaySeconds %d; want attempts_before 2, run_at +20h, same id, delay 900", env, sent[0].DelaySeconds)
	}
}

func TestRunAtInTheFutureWaitsWithoutRunning(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := newTestHandler(t, func(c *Config) { c.Now = func() time.Time { return now }; c.QueueURL = testURL })
	failed := handle(t, s, context.Background(),
		msg("soon", testArgs{Do: "ok"}, func(e *jobs.Envelope, _ *events.SQSMessage) { e.RunAt = now.Add(5 * time.Minute); e.AttemptsBefore = 1 }),
		msg("later", testArgs{Do: "ok"}, func(e *jobs.Envelope, _ *events.SQSMessage) { e.RunAt = now.Add(5 * time.Hour) }),
		msg("due", testArgs{Do: "ok"}, func(e *jobs.Envelope, _ *events.SQSMessage) { e.RunAt = now }),
	)
	if !equal(failed, []string{"later"}) {
		t.Errorf("failed = %v, want [later] (hidden in its visibility)", failed)
	}
	if ran := s.rec.ranIDs(); !equal(ran, []string{"job-due"}) {
		t.Errorf("ran %v, want only the due job", ran)
	}
	if v, _ := s.sqs.visibilityOf("rh-later"); v != int32((5*time.Hour-15*time.Minute)/time.Second) {
		t.Errorf("visibility of the far job = %d", v)
	}
	sent := s.sqs.sentTo(testURL)
	if len(sent) != 1 || sent[0].DelaySeconds != 300 {
		t.Fatalf("re-sent %+v, want one copy with DelaySeconds 300", sent)
	}
}

func TestMalformedHook(t *testing.T) {
	t.Parallel()
	var got []string
	s := newTestHandler(t, func(c *Config) {
		c.MalformedHook = func(ctx context.Context, m events.SQSMessage) error {
			got = append(got, m.Body)
			if m.Body == "reject" {
				return errors.New("not mine either")
			}
			return nil
		}
	})
	failed := handle(t, s, context.Background(),
		msg("1", testArgs{}, func(_ *jobs.Envelope, m *events.SQSMessage) { m.Body = "legacy-format" }),
		msg("2", testArgs{}, func(_ *jobs.Envelope, m *events.SQSMessage) { m.Body = "reject" }),
	)
	if len(failed) != 0 || len(got) != 2 {
		t.Errorf("failed = %v, hook saw %v", failed, got)
	}
	dlq := s.sqs.sentTo(testDLQURL)
	if len(dlq) != 1 || aws.ToString(dlq[0].MessageBody) != "reject" {
		t.Fatalf("DLQ = %+v, want the rejected body", dlq)
	}
	if f := decodeFailure(t, &dlq[0]); f.Reason != jobs.ReasonMalformed || !strings.Contains(f.Error, "not mine either") {
		t.Errorf("failure = %+v", f)
	}
}

// TestMalformedHookKeepsItsReceiptHandle: through Invoke, the hook's message carries a receipt
// handle of its own, which stays right when the Lambda runtime reuses the payload's buffer (the
// decoder does not copy receipt handles, and the hook may keep the message).
func TestMalformedHookKeepsItsReceiptHandle(t *testing.T) {
	t.Parallel()
	var kept []events.SQSMessage
	s := newTestHandler(t, func(c *Config) {
		c.MalformedHook = func(_ context.Context, m events.SQSMessage) error {
			kept = append(kept, m)
			return nil
		}
	})
	ev := events.SQSEvent{Records: []events.SQSMessage{
		msg("1", testArgs{}, func(_ *jobs.Envelope, m *events.SQSMessage) { m.Body = "legacy-format" }),
	}}
	payload, _ := json.Marshal(ev)
	if _, err := s.h.Invoke(context.Background(), payload); err != nil {
		t.Fatal(err)
	}
	for i := range payload {
		payload[i] = 'x'
	}
	if len(kept) != 1 || kept[0].ReceiptHandle != "rh-1" || kept[0].Body != "legacy-format" {
		t.Errorf("the hook kept %+v, want receipt handle rh-1", kept)
	}
}

func TestDeadLetterAttributes(t *testing.T) {
	t.Parallel()
	attrs := func(n int) func(*jobs.Envelope, *events.SQSMessage) {
		return func(_ *jobs.Envelope, m *events.SQSMessage) {
			m.MessageAttributes = map[string]events.SQSMessageAttribute{}
			for i := range n {
				v := "v" + strconv.Itoa(i)
				m.MessageAttributes["a"+strconv.Itoa(i)] = events.SQSMessageAttribute{DataType: "String", StringValue: &v}
			}
			m.MessageAttributes["bin"] = events.SQSMessageAttribute{DataType: "Binary", BinaryValue: []byte{1, 2, 3}}
		}
	}
	s := newTestHandler(t, nil)
	handle(t, s, context.Background(),
		msg("eight", testArgs{Do: "cancel"}, attrs(7)),
		msg("ten", testArgs{Do: "cancel"}, attrs(9)),
	)
	dlq := s.sqs.sentTo(testDLQURL)
	if len(dlq) != 2 {
		t.Fatalf("DLQ got %d, want 2", len(dlq))
	}
	for _, e := range dlq {
		n := len(e.MessageAttributes)
		_, hasFailure := e.MessageAttributes[FailureAttribute]
		switch n {
		case 9: // 8 originals + the failure
			if !hasFailure {
				t.Errorf("9 attributes without the failure one")
			}
			if got := e.MessageAttributes["bin"].BinaryValue; !bytes.Equal(got, []byte{1, 2, 3}) {
				t.Errorf("binary attribute = %v", got)
			}
		case 10: // 10 originals: no room, the message still goes
			if hasFailure {
				t.Errorf("11 attributes would be rejected by SQS")
			}
		default:
			t.Errorf("DLQ entry with %d attributes", n)
		}
	}
}

func TestInvokePayload(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	ev := events.SQSEvent{Records: []events.SQSMessage{msg("1", testArgs{Do: "ok"}), msg("2", testArgs{Do: "fail"})}}
	payload, _ := json.Marshal(ev)
	out, err := s.h.Invoke(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"batchItemFailures":[{"itemIdentifier":"2"}]}`; got != want {
		t.Errorf("Invoke = %s, want %s", got, want)
	}
	// The Lambda runtime reuses the payload's buffer: what the worker gave the SQS client (the
	// failed job's receipt handle, which the decoder does not copy) must not change with it.
	for i := range payload {
		payload[i] = 'x'
	}
	s.sqs.mu.Lock()
	if _, ok := s.sqs.visibility["rh-2"]; !ok || len(s.sqs.visibility) != 1 {
		t.Errorf("visibility changes %v, want one for rh-2", s.sqs.visibility)
	}
	s.sqs.mu.Unlock()
	if _, err := s.h.Invoke(context.Background(), []byte(`{"Records":[`)); err == nil {
		t.Error("a truncated payload must be an error")
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	fake := newFakeSQS()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no registry", Config{SQS: fake}, "Registry is required"},
		{"no client", Config{Registry: reg}, "SQS client is required"},
		{"negative concurrency", Config{Registry: reg, SQS: fake, Concurrency: -1}, "Concurrency -1"},
		{"negative margin", Config{Registry: reg, SQS: fake, DeadlineMargin: -time.Second}, "DeadlineMargin -1s must not be negative"},
		{"grace above 12h", Config{Registry: reg, SQS: fake, AbandonGrace: 13 * time.Hour}, "AbandonGrace 13h0m0s is above its limit"},
		{"nil middleware", Config{Registry: reg, SQS: fake, Middleware: []Middleware{nil}}, "Middleware[0] is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want ErrConfig with %q", err, tt.want)
			}
		})
	}
	h, err := New(Config{Registry: reg, SQS: fake})
	if err != nil {
		t.Fatal(err)
	}
	if h.cfg.Concurrency != DefaultConcurrency || h.cfg.DeadlineMargin != DefaultDeadlineMargin || h.cfg.AbandonGrace != DefaultAbandonGrace {
		t.Errorf("defaults not applied: %+v", h.cfg)
	}
}

func TestOnBatchReportsEveryOutcome(t *testing.T) {
	t.Parallel()
	var got []Outcome
	s := newTestHandler(t, func(c *Config) { c.OnBatch = func(_ context.Context, o []Outcome) { got = o } })
	handle(t, s, context.Background(),
		msg("1", testArgs{Do: "ok"}),
		msg("2", testArgs{Do: "fail"}, receives(2)),
		msg("3", testArgs{Do: "cancel"}),
	)
	if len(got) != 3 {
		t.Fatalf("outcomes = %+v", got)
	}
	want := []struct {
		outcome string
		attempt int
		failed  bool
		reason  string
	}{{OutcomeSucceeded, 1, false, ""}, {OutcomeRetry, 2, true, ""}, {OutcomeDeadLettered, 1, false, jobs.ReasonCancelled}}
	for i, w := range want {
		o := got[i]
		if o.Outcome != w.outcome || o.Attempt != w.attempt || o.Failed != w.failed || o.Reason != w.reason || !o.Ran || o.Kind != "test.job" {
			t.Errorf("outcome %d = %+v, want %+v", i, o, w)
		}
	}
	if got[1].Visibility != 20*time.Second {
		t.Errorf("visibility = %s, want 20s", got[1].Visibility)
	}
}

func TestFairQueueGroupsOnStandardQueueAreNotFIFO(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	tenant := func(_ *jobs.Envelope, m *events.SQSMessage) { m.Attributes["MessageGroupId"] = "tenant-1" }
	failed := handle(t, s, context.Background(),
		msg("1", testArgs{Do: "fail"}, tenant),
		msg("2", testArgs{Do: "ok"}, tenant),
		msg("3", testArgs{Do: "cancel"}, tenant),
	)
	if !equal(failed, []string{"1"}) {
		t.Errorf("failed = %v, want [1]: a standard queue's groups do not stop on failure", failed)
	}
	dlq := s.sqs.sentTo(testDLQURL)
	if len(dlq) != 1 || dlq[0].MessageDeduplicationId != nil {
		t.Errorf("DLQ entries = %+v, want one without FIFO fields", dlq)
	}
}

// A clock that runs ahead of the timer: the pool sees the deadline before the timer fires, so
// the batch finishes with items still pending. They must be reported failed, not lost.
func TestDeadlineSeenByThePoolBeforeTheTimer(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, func(c *Config) {
		c.Concurrency = 1
		c.DeadlineMargin = time.Second
		c.Now = func() time.Time { return time.Now().Add(1200 * time.Millisecond) }
	})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(2*time.Second))
	defer cancel()
	failed := handle(t, s, ctx, msg("1", testArgs{Do: "ok"}), msg("2", testArgs{Do: "ok"}))
	if !equal(failed, []string{"1", "2"}) || len(s.rec.ranIDs()) != 0 {
		t.Errorf("failed = %v, ran %v; want both reported failed without running", failed, s.rec.ranIDs())
	}
}

func TestDeadLetterKeepsTraceHeaderAndFairQueueGroup(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	handle(t, s, context.Background(), msg("1", testArgs{Do: "cancel"}, func(_ *jobs.Envelope, m *events.SQSMessage) {
		m.Attributes["AWSTraceHeader"] = "Root=1-5759e988-bd862e3fe1be46a994272793"
		m.Attributes["MessageGroupId"] = "tenant-7"
	}))
	dlq := s.sqs.sentTo(testDLQURL)
	if len(dlq) != 1 {
		t.Fatalf("DLQ = %+v", dlq)
	}
	if got := aws.ToString(dlq[0].MessageSystemAttributes["AWSTraceHeader"].StringValue); got != "Root=1-5759e988-bd862e3fe1be46a994272793" {
		t.Errorf("AWSTraceHeader = %q", got)
	}
	if got := aws.ToString(dlq[0].MessageGroupId); got != "tenant-7" || dlq[0].MessageDeduplicationId != nil {
		t.Errorf("group %q dedup %v: want the fair-queue group and no FIFO dedup id", got, dlq[0].MessageDeduplicationId)
	}
}

func TestPreflightWarnsWhenMaxReceiveCountIsTooLow(t *testing.T) {
	t.Parallel()
	// The fake queue's redrive policy has maxReceiveCount 15; a kind with MaxAttempts 6 needs 18.
	s := newTestHandler(t, func(c *Config) { c.QueueURL = testURL }, jobs.WithMaxAttempts(6))
	warned, err := s.h.Preflight(context.Background(), "")
	if err != nil || len(warned) != 1 || warned[0] != "test.job" {
		t.Fatalf("Preflight = %v, %v; want a warning for test.job", warned, err)
	}
	if !strings.Contains(s.logs.String(), `"max_receive_count":15`) {
		t.Errorf("no warning logged:\n%s", s.logs.String())
	}
	ok := newTestHandler(t, func(c *Config) { c.QueueURL = testURL }, jobs.WithMaxAttempts(5))
	if warned, err := ok.h.Preflight(context.Background(), ""); err != nil || len(warned) != 0 {
		t.Errorf("MaxAttempts 5 with maxReceiveCount 15: %v, %v; want no warning", warned, err)
	}
}

// visibilityWatcher is a heartbeat.Stopper that records which receipt handles it was told to
// leave alone, and how many visibility changes the worker had made by then.
type visibilityWatcher struct {
	fake          *fakeSQS
	stopped       []string
	changesBefore int
}

func (w *visibilityWatcher) Stop(handles []string) {
	w.fake.mu.Lock()
	w.changesBefore += w.fake.calls["ChangeMessageVisibilityBatch"]
	w.fake.mu.Unlock()
	w.stopped = append(w.stopped, handles...)
}

// TestRetryStopsTheConsumersHeartbeat: before the worker sets a retry's visibility, it tells a
// consumer that extends visibility (pkg/poller, through the context) to stop extending exactly
// the retried messages, so that no extension overwrites the retry delay.
func TestRetryStopsTheConsumersHeartbeat(t *testing.T) {
	t.Parallel()
	s := newTestHandler(t, nil)
	w := &visibilityWatcher{fake: s.sqs}
	failed := handle(t, s, heartbeat.NewContext(context.Background(), w),
		msg("1", testArgs{Do: "ok"}),
		msg("2", testArgs{Do: "fail"}),
		msg("3", testArgs{Do: "retry_after", Delay: "5s"}),
		msg("4", testArgs{Do: "cancel"}),
	)
	if !equal(failed, []string{"2", "3"}) {
		t.Fatalf("failed = %v, want 2 and 3", failed)
	}
	slices.Sort(w.stopped)
	if !equal(w.stopped, []string{"rh-2", "rh-3"}) {
		t.Errorf("heartbeat stopped for %v, want exactly the retried rh-2 and rh-3", w.stopped)
	}
	if w.changesBefore != 0 {
		t.Errorf("%d visibility changes before the heartbeat was stopped, want none", w.changesBefore)
	}
	if got := s.sqs.visibility["rh-3"]; got != 5 {
		t.Errorf("rh-3 visibility = %d, want the 5 s retry delay", got)
	}
}

// TestLogLevels: at the default level (Info) a success writes no log line, a retry and a dead
// letter do; at Debug the success has its line too.
func TestLogLevels(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		level       slog.Level
		wantSuccess bool
	}{{slog.LevelInfo, false}, {slog.LevelDebug, true}} {
		t.Run(tt.level.String(), func(t *testing.T) {
			t.Parallel()
			logs := &bytes.Buffer{}
			s := newTestHandler(t, func(c *Config) {
				c.Logger = slog.New(slog.NewJSONHandler(&lockedWriter{w: logs}, &slog.HandlerOptions{Level: tt.level}))
			})
			handle(t, s, context.Background(), msg("ok", testArgs{Do: "ok"}), msg("retry", testArgs{Do: "fail"}),
				msg("dead", testArgs{Do: "fail"}, receives(3)))
			out := logs.String()
			if got := strings.Contains(out, `"job_id":"job-ok"`); got != tt.wantSuccess {
				t.Errorf("success logged = %v, want %v:\n%s", got, tt.wantSuccess, out)
			}
			for _, want := range []string{`"level":"WARN","msg":"sqsworker: job retry"`, `"job_id":"job-dead"`} {
				if !strings.Contains(out, want) {
					t.Errorf("log lacks %s:\n%s", want, out)
				}
			}
		})
	}
}

// TestOneClockReadPerJob: with a deadline, the pool reads the clock once per job (the reading at
// a job's end is the next one's deadline check and start), plus one per pool goroutine: three per
// job was 4 % of a small batch.
func TestOneClockReadPerJob(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	s := newTestHandler(t, func(c *Config) {
		c.Concurrency = 4
		c.Now = func() time.Time { reads.Add(1); return time.Now() }
	})
	const jobs = 200
	msgs := make([]events.SQSMessage, jobs)
	for i := range msgs {
		msgs[i] = msg(strconv.Itoa(i), testArgs{Do: "ok"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if failed := handle(t, s, ctx, msgs...); len(failed) != 0 {
		t.Fatalf("failed %v", failed)
	}
	t.Logf("%d clock reads for %d jobs", reads.Load(), jobs)
	// One per job, one more per pool goroutine, and a few per batch (its start, settling).
	if got, most := reads.Load(), int64(jobs+4+10); got > most {
		t.Errorf("%d clock reads for %d jobs, want at most %d", got, jobs, most)
	}
}
