package worker

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// TestDeferredJobIsResentFromItsThirdReceive runs a job that a middleware defers on each of its
// receives: the first two hide the message for the delay (reported failed, the job not run);
// the third sends a fresh copy (same id, attempts_before unchanged, the deferral's start in its
// meta, the other meta kept) and acknowledges the original, so the receive count that the queue's
// maxReceiveCount watches starts again at 1.
func TestDeferredJobIsResentFromItsThirdReceive(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	since := now.Add(-42 * time.Minute)
	deferring := MiddlewareFunc(func(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
		return jobs.DeferUntilSince(20*time.Second, since, errors.New("limit full"))
	})
	s := newTestHandler(t, func(c *Config) {
		c.Now = func() time.Time { return now }
		c.QueueURL = testURL
		c.Middleware = []Middleware{deferring}
	})
	withMeta := func(e *jobs.Envelope, _ *events.SQSMessage) {
		e.AttemptsBefore = 2
		e.Meta = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	}
	for receive := 1; receive <= 3; receive++ {
		id := "r" + strconv.Itoa(receive)
		failed := handle(t, s, context.Background(), msg(id, testArgs{Do: "ok"}, withMeta, receives(receive)))
		if ran := s.rec.ranIDs(); len(ran) != 0 {
			t.Fatalf("receive %d: the job ran (%v); a deferred job never runs", receive, ran)
		}
		if receive < 3 {
			if !equal(failed, []string{id}) {
				t.Errorf("receive %d: failed = %v, want the message hidden again", receive, failed)
			}
			if v, _ := s.sqs.visibilityOf("rh-" + id); v != 20 {
				t.Errorf("receive %d: visibility %d, want the deferral's 20 s", receive, v)
			}
			if n := len(s.sqs.sentTo(testURL)); n != 0 {
				t.Errorf("receive %d: %d copies sent, want none yet", receive, n)
			}
			continue
		}
		if len(failed) != 0 {
			t.Errorf("receive 3: failed = %v, want the original acknowledged once its copy is sent", failed)
		}
	}
	sent := s.sqs.sentTo(testURL)
	if len(sent) != 1 {
		t.Fatalf("re-sent %d copies, want 1", len(sent))
	}
	env, err := jobs.DecodeEnvelope([]byte(aws.ToString(sent[0].MessageBody)))
	if err != nil {
		t.Fatal(err)
	}
	if env.ID != "job-r3" || env.AttemptsBefore != 2 || !env.RunAt.IsZero() || sent[0].DelaySeconds != 20 {
		t.Errorf("copy %+v, DelaySeconds %d; want the same job, attempts_before 2, no run_at, delay 20", env, sent[0].DelaySeconds)
	}
	if got := env.Meta[jobs.MetaDeferredSince]; got != since.Format(jobs.TimeLayout) {
		t.Errorf("copy's %s = %q, want %q", jobs.MetaDeferredSince, got, since.Format(jobs.TimeLayout))
	}
	if env.Meta["traceparent"] == "" {
		t.Errorf("copy lost the rest of its meta: %v", env.Meta)
	}
	info := &jobs.Info{Meta: env.Meta}
	if got, ok := jobs.DeferredSince(info, now); !ok || !got.Equal(since) {
		t.Errorf("DeferredSince(copy) = %s, %v; want %s", got, ok, since)
	}
}

// TestDeferredFIFOJobWaitsInItsVisibility: a FIFO message is never re-sent for a deferral (a copy
// would go to the end of its group), however often it was received.
func TestDeferredFIFOJobWaitsInItsVisibility(t *testing.T) {
	t.Parallel()
	deferring := MiddlewareFunc(func(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
		return jobs.Defer(7*time.Second, errors.New("paused"))
	})
	s := newTestHandler(t, func(c *Config) { c.Middleware = []Middleware{deferring} })
	failed := handle(t, s, context.Background(), msg("f", testArgs{Do: "ok"}, group("g"), receives(9)))
	if !equal(failed, []string{"f"}) {
		t.Errorf("failed = %v, want the message hidden", failed)
	}
	if v, _ := s.sqs.visibilityOf("rh-f"); v != 7 {
		t.Errorf("visibility %d, want 7", v)
	}
	if n := s.sqs.callCount("SendMessageBatch"); n != 0 {
		t.Errorf("%d sends, want none", n)
	}
}

// TestFirstReceivedAtFromTheMessage: Info.FirstReceivedAt is the message's
// ApproximateFirstReceiveTimestamp.
func TestFirstReceivedAtFromTheMessage(t *testing.T) {
	t.Parallel()
	var got time.Time
	seen := MiddlewareFunc(func(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
		got = job.FirstReceivedAt
		return next(ctx)
	})
	s := newTestHandler(t, func(c *Config) { c.Middleware = []Middleware{seen} })
	handle(t, s, context.Background(), msg("1", testArgs{Do: "ok"}, func(_ *jobs.Envelope, m *events.SQSMessage) {
		m.Attributes["ApproximateFirstReceiveTimestamp"] = "1764410400130"
	}))
	if want := time.UnixMilli(1764410400130); !got.Equal(want) {
		t.Errorf("FirstReceivedAt = %s, want %s", got, want)
	}
}
