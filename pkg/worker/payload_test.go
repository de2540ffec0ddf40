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

// fakeStore is an in-memory PayloadStore. getErr, when set, fails every Get; block, when set,
// makes Get wait for its context.
type fakeStore struct {
	mu      sync.Mutex
	objs    map[string]string // bucket/key → content
	getErr  error
	block   bool
	deletes []string
	gets    int
}

func newFakeStore() *fakeStore { return &fakeStore{objs: map[string]string{}} }

func (f *fakeStore) Get(ctx context.Context, p payload.Pointer) ([]byte, error) {
	f.mu.Lock()
	f.gets++
	block, getErr := f.block, f.getErr
	v, ok := f.objs[p.Bucket+"/"+p.Key]
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, fmt.Errorf("payload: get %s: %w", p, ctx.Err())
	}
	if getErr != nil {
		return nil, getErr
	}
	if !ok {
		return nil, fmt.Errorf("%w: get %s", payload.ErrNotFound, p)
	}
	return []byte(v), nil
}

func (f *fakeStore) Put(_ context.Context, key string, body []byte) (payload.Pointer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs["jobs-payloads/"+key] = string(body)
	return payload.Pointer{Bucket: "jobs-payloads", Key: key, Class: payload.PointerClass}, nil
}

func (f *fakeStore) Delete(_ context.Context, p payload.Pointer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, p.Key)
	delete(f.objs, p.Bucket+"/"+p.Key)
	return nil
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

func TestPayloadKeepAndDelete(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		st := newFakeStore()
		s := newTestHandler(t, func(c *Config) { c.Payload = st; c.KeepPayload = keep })
		failed := handle(t, s, context.Background(),
			pointerMsg(st, "ok", "k-ok", testArgs{Do: "ok"}),
			pointerMsg(st, "fail", "k-fail", testArgs{Do: "fail"}),
			pointerMsg(st, "cancel", "k-cancel", testArgs{Do: "cancel"}))
		if !equal(failed, []string{"fail"}) {
			t.Fatalf("keep=%v: failed = %v", keep, failed)
		}
		if st.has("k-ok") != keep || !st.has("k-fail") || !st.has("k-cancel") {
			t.Errorf("keep=%v: objects ok %v fail %v cancel %v; want ok kept only with KeepPayload, the retried and dead-lettered ones kept",
				keep, st.has("k-ok"), st.has("k-fail"), st.has("k-cancel"))
		}
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
