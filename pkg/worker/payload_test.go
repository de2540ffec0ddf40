package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// fakeStore is an in-memory PayloadStore. getErr, when set, fails every Read; block, when set,
// makes Read wait for its context. done holds the objects marked done.
type fakeStore struct {
	mu      sync.Mutex
	objs    map[string]string // bucket/key → content
	done    map[string]bool   // bucket/key → marked done
	getErr  error
	block   bool
	deletes []string
	marks   []string
	gets    int
	attr    string // SizeAttribute; "" is payload.SizeAttribute
}

func newFakeStore() *fakeStore { return &fakeStore{objs: map[string]string{}, done: map[string]bool{}} }

func (f *fakeStore) Read(ctx context.Context, p payload.Pointer) (payload.Object, error) {
	f.mu.Lock()
	f.gets++
	block, getErr := f.block, f.getErr
	v, ok := f.objs[p.Bucket+"/"+p.Key]
	done := f.done[p.Bucket+"/"+p.Key]
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return payload.Object{}, fmt.Errorf("payload: get %s: %w", p, ctx.Err())
	}
	if getErr != nil {
		return payload.Object{}, getErr
	}
	if !ok {
		return payload.Object{}, fmt.Errorf("%w: get %s", payload.ErrNotFound, p)
	}
	return payload.Object{Body: []byte(v), Done: done}, nil
}

func (f *fakeStore) Put(_ context.Context, key string, body []byte) (payload.Pointer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs["jobs-payloads/"+key] = string(body)
	delete(f.done, "jobs-payloads/"+key)
	return payload.Pointer{Bucket: "jobs-payloads", Key: key, Class: payload.PointerClass}, nil
}

func (f *fakeStore) Delete(_ context.Context, p payload.Pointer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, p.Key)
	delete(f.objs, p.Bucket+"/"+p.Key)
	return nil
}

func (f *fakeStore) MarkDone(_ context.Context, p payload.Pointer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.objs[p.Bucket+"/"+p.Key]; !ok {
		return fmt.Errorf("%w: tag %s", payload.ErrNotFound, p)
	}
	f.marks = append(f.marks, p.Key)
	f.done[p.Bucket+"/"+p.Key] = true
	return nil
}

func (f *fakeStore) SizeAttribute() string {
	if f.attr != "" {
		return f.attr
	}
	return payload.SizeAttribute
}

func (f *fakeStore) isDone(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done["jobs-payloads/"+key]
}

func (f *fakeStore) Key(jobID string) string { return "sqsworker/" + jobID }

func (f *fakeStore) has(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.objs["jobs-payloads/"+key]
	return ok
}

// pointerMsg builds a message whose envelope (for args) lives in st under key.
func pointerMsg(st *fakeStore, id, key string, args testArgs, mutate ...func(*jobs.Envelope, *events.SQSMessage)) events.SQSMessage {
	m := msg(id, args, mutate...)
	st.objs["jobs-payloads/"+key] = m.Body
	m.Body = payload.Pointer{Bucket: "jobs-payloads", Key: key}.Body()
	m.MessageAttributes = map[string]events.SQSMessageAttribute{
		payload.SizeAttribute: {DataType: "Number", StringValue: aws.String(payload.SizeValue(len(st.objs["jobs-payloads/"+key])))},
	}
	return m
}

func TestPayloadTransientErrorRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	st := newFakeStore()
	st.getErr = errors.New("SlowDown: reduce your request rate")
	s := newTestHandler(t, func(c *Config) { c.Payload = st })
	first := pointerMsg(st, "1", "k1", testArgs{Do: "ok"})
	if failed := handle(t, s, context.Background(), first); !equal(failed, []string{"1"}) {
		t.Fatalf("failed = %v, want the message retried", failed)
	}
	if len(s.sqs.sentTo(testDLQURL)) != 0 || len(s.rec.ranIDs()) != 0 {
		t.Fatal("a transient S3 error dead-lettered the message or ran the job")
	}
	last := pointerMsg(st, "2", "k2", testArgs{Do: "ok"}, receives(jobs.DefaultMaxAttempts))
	if failed := handle(t, s, context.Background(), last); len(failed) != 0 {
		t.Fatalf("failed = %v, want the message dead-lettered", failed)
	}
	dead := s.sqs.sentTo(testDLQURL)
	if len(dead) != 1 {
		t.Fatalf("DLQ got %d, want 1", len(dead))
	}
	f := decodeFailure(t, &dead[0])
	if f.Reason != jobs.ReasonPayloadMissing || !strings.Contains(f.Error, "SlowDown") || !strings.Contains(f.Error, "5 receives") {
		t.Errorf("failure %+v", f)
	}
	if aws.ToString(dead[0].MessageBody) != last.Body {
		t.Errorf("DLQ body %s, want the pointer %s", aws.ToString(dead[0].MessageBody), last.Body)
	}
}

func TestPayloadFetchStopsAtTheDeadline(t *testing.T) {
	t.Parallel()
	st := newFakeStore()
	st.block = true
	s := newTestHandler(t, func(c *Config) { c.Payload = st; c.DeadlineMargin = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	failed := handle(t, s, ctx, pointerMsg(st, "1", "k1", testArgs{Do: "ok"}), msg("2", testArgs{Do: "ok"}))
	if !equal(failed, []string{"1"}) {
		t.Fatalf("failed = %v, want the pointer message (not fetched in time)", failed)
	}
	if got := s.sqs.visibility["rh-1"]; got != 0 {
		t.Errorf("visibility %d, want 0: it comes back at once", got)
	}
	if !st.has("k1") || len(s.sqs.sentTo(testDLQURL)) != 0 {
		t.Error("a fetch cut off by the deadline lost the object or dead-lettered the message")
	}
}

func TestPayloadCleanupModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []PayloadCleanup{PayloadDelete, PayloadMarkDone, PayloadKeep} {
		st := newFakeStore()
		s := newTestHandler(t, func(c *Config) { c.Payload = st; c.PayloadCleanup = mode })
		failed := handle(t, s, context.Background(),
			pointerMsg(st, "ok", "k-ok", testArgs{Do: "ok"}),
			pointerMsg(st, "fail", "k-fail", testArgs{Do: "fail"}),
			pointerMsg(st, "cancel", "k-cancel", testArgs{Do: "cancel"}))
		if !equal(failed, []string{"fail"}) {
			t.Fatalf("%v: failed = %v", mode, failed)
		}
		if st.has("k-ok") != (mode != PayloadDelete) || st.isDone("k-ok") != (mode == PayloadMarkDone) {
			t.Errorf("%v: the succeeded job's object exists %v, marked %v", mode, st.has("k-ok"), st.isDone("k-ok"))
		}
		if !st.has("k-fail") || !st.has("k-cancel") || st.isDone("k-fail") || st.isDone("k-cancel") {
			t.Errorf("%v: the retried and dead-lettered jobs' objects: fail %v cancel %v; want both kept, unmarked", mode, st.has("k-fail"), st.has("k-cancel"))
		}
	}
}

// TestPayloadDuplicateAfterSuccess delivers a succeeded large job's message again, as SQS, an
// outbox relay's re-send or a producer's retry with the same id may. Deleting the object makes
// the duplicate a payload_missing dead letter (saying why); marking it done acknowledges the
// duplicate without running it. A genuinely missing object is still payload_missing.
func TestPayloadDuplicateAfterSuccess(t *testing.T) {
	t.Parallel()
	for _, mode := range []PayloadCleanup{PayloadDelete, PayloadMarkDone} {
		st := newFakeStore()
		var outcomes []Outcome
		s := newTestHandler(t, func(c *Config) {
			c.Payload = st
			c.PayloadCleanup = mode
			c.OnBatch = func(_ context.Context, o []Outcome) { outcomes = append(outcomes, o...) }
		})
		first := pointerMsg(st, "1", "sqsworker/job-1", testArgs{Do: "ok"})
		if failed := handle(t, s, context.Background(), first); len(failed) != 0 {
			t.Fatalf("%v: first delivery failed: %v", mode, failed)
		}
		dup := first
		dup.MessageId, dup.ReceiptHandle = "1-dup", "rh-1-dup"
		if failed := handle(t, s, context.Background(), dup); len(failed) != 0 {
			t.Fatalf("%v: the duplicate was reported failed: %v", mode, failed)
		}
		dead := s.sqs.sentTo(testDLQURL)
		last := outcomes[len(outcomes)-1]
		switch mode {
		case PayloadDelete:
			if len(dead) != 1 || decodeFailure(t, &dead[0]).Reason != jobs.ReasonPayloadMissing ||
				!strings.Contains(decodeFailure(t, &dead[0]).Error, "duplicate delivery") {
				t.Fatalf("%v: DLQ %v, want the duplicate as payload_missing, explained", mode, dead)
			}
		case PayloadMarkDone:
			if len(dead) != 0 || last.Outcome != OutcomeSkipped || !errors.Is(last.Err, errPayloadDone) || last.Payload == nil || !last.Payload.Done {
				t.Fatalf("%v: DLQ %d, duplicate's outcome %+v; want it acknowledged as a duplicate", mode, len(dead), last)
			}
			if got := s.rec.ranIDs(); len(got) != 1 {
				t.Fatalf("%v: ran %v, want the job once", mode, got)
			}
			if len(st.marks) != 1 {
				t.Errorf("%v: marked %v, want the object marked once (the duplicate leaves it as it is)", mode, st.marks)
			}
		}
	}
	st := newFakeStore()
	s := newTestHandler(t, func(c *Config) { c.Payload = st; c.PayloadCleanup = PayloadMarkDone })
	gone := pointerMsg(st, "2", "sqsworker/job-2", testArgs{Do: "ok"})
	delete(st.objs, "jobs-payloads/sqsworker/job-2")
	handle(t, s, context.Background(), gone)
	dead := s.sqs.sentTo(testDLQURL)
	if len(dead) != 1 || decodeFailure(t, &dead[0]).Reason != jobs.ReasonPayloadMissing || strings.Contains(decodeFailure(t, &dead[0]).Error, "duplicate delivery") {
		t.Fatalf("a missing object with PayloadMarkDone: DLQ %v, want payload_missing (no duplicate hint)", dead)
	}
}

// A re-sent copy of a job that came through S3 (a retry beyond the visibility cap) keeps its
// envelope in S3, under a key of its own; the original's object is deleted once the copy is
// sent.
func TestPayloadResendKeepsCopyInS3(t *testing.T) {
	t.Parallel()
	st := newFakeStore()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := newTestHandler(t, func(c *Config) { c.Payload = st; c.Now = func() time.Time { return now }; c.QueueURL = testURL })
	orig := pointerMsg(st, "1", "sqsworker/job-1", testArgs{Do: "retry_after", Delay: "20h"}, receives(2))
	if failed := handle(t, s, context.Background(), orig); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	sent := s.sqs.sentTo(testURL)
	if len(sent) != 1 {
		t.Fatalf("re-sent %d copies, want 1", len(sent))
	}
	p, err := payload.ParsePointer(aws.ToString(sent[0].MessageBody))
	if err != nil {
		t.Fatalf("the copy's body is not a pointer: %v", err)
	}
	if !strings.HasPrefix(p.Key, "sqsworker/job-1.resend-") || !st.has(p.Key) {
		t.Fatalf("copy points to %s (exists %v)", p, st.has(p.Key))
	}
	env, err := jobs.DecodeEnvelope([]byte(st.objs["jobs-payloads/"+p.Key]))
	if err != nil || env.AttemptsBefore != 2 || !env.RunAt.Equal(now.Add(20*time.Hour)) {
		t.Fatalf("copy's envelope %+v, %v", env, err)
	}
	if v := aws.ToString(sent[0].MessageAttributes[payload.SizeAttribute].StringValue); v != payload.SizeValue(len(st.objs["jobs-payloads/"+p.Key])) {
		t.Errorf("size attribute %q", v)
	}
	if st.has("sqsworker/job-1") {
		t.Error("the original's object is still there after its copy was sent")
	}
}

// In a FIFO group, a pointer message runs in its place in the group's order.
func TestPayloadFIFOOrder(t *testing.T) {
	t.Parallel()
	st := newFakeStore()
	s := newTestHandler(t, func(c *Config) { c.Payload = st; c.QueueURL = testURL + ".fifo" })
	failed := handle(t, s, context.Background(),
		msg("1", testArgs{Do: "ok"}, group("g")),
		pointerMsg(st, "2", "k2", testArgs{Do: "ok"}, group("g")),
		msg("3", testArgs{Do: "ok"}, group("g")))
	if len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	if got := s.rec.ranIDs(); !equal(got, []string{"job-1", "job-2", "job-3"}) {
		t.Fatalf("ran %v, want the group's order", got)
	}
}
