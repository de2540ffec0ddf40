package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/internal/testenv/poll"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// putter is what both stores offer to write a record as it is (a test stands in for pkg/status,
// which writes cancellation requests in the DynamoDB table).
type putter interface {
	Put(ctx context.Context, r idempotency.Record) error
}

// requestCancel marks the running record of key with a cancellation request, as pkg/status does.
func requestCancel(t *testing.T, s idempotency.Store, key, reason string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	rec, err := s.Get(ctx, "payment.charge", key)
	if err != nil || rec.State != idempotency.StateRunning {
		t.Fatalf("record to cancel: %+v, %v; want running", rec, err)
	}
	rec.CancelRequestedAt, rec.CancelReason = at, reason
	if err := s.(putter).Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds, failing the test after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, what, cond)
}

// running reports whether the record of key is running.
func running(s idempotency.Store, key string) func() bool {
	return func() bool {
		rec, err := s.Get(context.Background(), "payment.charge", key)
		return err == nil && rec.State == idempotency.StateRunning
	}
}

// deliverAsync delivers msg in a goroutine and returns its outcomes when done.
func (r *rig) deliverAsync(ctx context.Context, msg events.SQSMessage) <-chan []worker.Outcome {
	ch := make(chan []worker.Outcome, 1)
	go func() {
		r.mu.Lock()
		start := len(r.outcomes)
		r.mu.Unlock()
		if _, err := r.h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
			r.t.Error(err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		ch <- append([]worker.Outcome(nil), r.outcomes[start:]...)
	}()
	return ch
}

// waitOutcome waits for an async delivery's outcome.
func waitOutcome(t *testing.T, ch <-chan []worker.Outcome) worker.Outcome {
	t.Helper()
	select {
	case out := <-ch:
		if len(out) != 1 {
			t.Fatalf("outcomes %+v, want one", out)
		}
		return out[0]
	case <-time.After(60 * time.Second):
		t.Fatal("the job never ended")
	}
	return worker.Outcome{}
}

// stopsOnCancel is a job that waits for its context and returns its cause, which it keeps.
func stopsOnCancel(cause *error) func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
	return func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
		select {
		case <-ctx.Done():
			*cause = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(60 * time.Second):
			return errors.New("the context was never cancelled")
		}
	}
}

// A cancellation requested while a job runs cancels its context with a CancelRequestError; the
// job ends cancelled, dead-lettered with the reason "cancelled", not retried. In Lambda (a
// deadline: no renewals) the periodic read notices it; in a container (no deadline) the lease
// renewal's returned record does, without any read.
func TestCancelRequestStopsARunningJob(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		mutate func(*idempotency.MiddlewareConfig)
		reads  bool
	}{
		{"lambda", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 2*time.Minute)
		}, func(c *idempotency.MiddlewareConfig) { c.CancelCheck = 20 * time.Millisecond }, true},
		{"container", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, func(c *idempotency.MiddlewareConfig) { c.CancelCheck = -1; c.Lease = 3 * time.Second }, false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			stores(t, func(t *testing.T, newStore func() idempotency.Store) {
				r := newRig(t, newStore(), 5, func(c *idempotency.MiddlewareConfig) { c.Now = time.Now; mode.mutate(c) })
				var cause error
				r.work = stopsOnCancel(&cause)
				ctx, cancel := mode.ctx()
				defer cancel()
				done := r.deliverAsync(ctx, message("m1", "job-1", "", chargeArgs{}, 1))
				waitFor(t, "the job to run", running(r.store, "job-1"))
				requestCancel(t, r.store, "job-1", "operator said so", time.Now())
				out := waitOutcome(t, done)

				if out.Outcome != worker.OutcomeDeadLettered || out.Reason != jobs.ReasonCancelled || out.Failed {
					t.Errorf("outcome %+v, want dead_lettered (cancelled), not failed", out)
				}
				if !errors.Is(out.Err, jobs.ErrCancelRequested) {
					t.Errorf("outcome error %v, want one wrapping jobs.ErrCancelRequested", out.Err)
				}
				var req *jobs.CancelRequestError
				if !errors.As(cause, &req) || req.Reason != "operator said so" {
					t.Errorf("the job's context cause = %v, want a CancelRequestError with the reason", cause)
				}
				rec, err := r.store.Get(context.Background(), "payment.charge", "job-1")
				if err != nil || rec.State != idempotency.StateCancelled || rec.Reason != jobs.ReasonCancelled || rec.Token != "" {
					t.Errorf("record %+v, %v; want cancelled (reason cancelled), no claim", rec, err)
				}
				st := r.mw.Stats()
				if st.CancelRequests != 1 {
					t.Errorf("CancelRequests = %d, want 1", st.CancelRequests)
				}
				if mode.reads != (st.CancelChecks > 0) {
					t.Errorf("CancelChecks = %d (renewals %d): want reads only in Lambda mode", st.CancelChecks, st.LeaseRenewals)
				}
				// A later delivery of the cancelled job is acknowledged without running.
				if again := r.deliver(context.Background(), message("m1", "job-1", "", chargeArgs{}, 2)); again[0].Outcome != worker.OutcomeSkipped {
					t.Errorf("a later delivery: %+v, want skipped", again[0])
				}
			})
		})
	}
}

// A job that ignores its context and finishes keeps what happened: a success is recorded as
// succeeded, with the request left on the record as a trace.
func TestCancelRequestIgnoredByTheJob(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, func(c *idempotency.MiddlewareConfig) { c.Now = time.Now; c.CancelCheck = 20 * time.Millisecond })
		noticed := make(chan struct{})
		r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
			<-ctx.Done() // noticed, and ignored
			close(noticed)
			r.charges.Add(1)
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		done := r.deliverAsync(ctx, message("m1", "job-1", "", chargeArgs{}, 1))
		waitFor(t, "the job to run", running(r.store, "job-1"))
		at := time.Now().Truncate(time.Millisecond)
		requestCancel(t, r.store, "job-1", "", at)
		out := waitOutcome(t, done)
		if out.Outcome != worker.OutcomeSucceeded || r.charges.Load() != 1 {
			t.Errorf("outcome %+v, charges %d; want succeeded once", out, r.charges.Load())
		}
		rec, err := r.store.Get(context.Background(), "payment.charge", "job-1")
		if err != nil || rec.State != idempotency.StateSucceeded || !rec.CancelRequestedAt.Equal(at) {
			t.Errorf("record %+v, %v; want succeeded with the request kept", rec, err)
		}
	})
}

// A job that fails before its worker noticed the request (no check ran: CancelCheck off, no
// progress, no renewal) is recorded as cancelled by its finishing write and dead-lettered, not
// retried.
func TestCancelRequestTurnsAFailureIntoACancellation(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, func(c *idempotency.MiddlewareConfig) { c.Now = time.Now; c.CancelCheck = -1 })
		release := make(chan struct{})
		r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
			<-release
			return errors.New("upstream timeout")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		done := r.deliverAsync(ctx, message("m1", "job-1", "", chargeArgs{}, 1))
		waitFor(t, "the job to run", running(r.store, "job-1"))
		requestCancel(t, r.store, "job-1", "", time.Now())
		close(release)
		out := waitOutcome(t, done)
		if out.Outcome != worker.OutcomeDeadLettered || out.Reason != jobs.ReasonCancelled || !errors.Is(out.Err, jobs.ErrCancelRequested) {
			t.Errorf("outcome %+v, want dead_lettered (cancelled) wrapping ErrCancelRequested", out)
		}
		rec, _ := r.store.Get(context.Background(), "payment.charge", "job-1")
		if rec.State != idempotency.StateCancelled || rec.LastError != "upstream timeout" {
			t.Errorf("record %+v, want cancelled with the job's error", rec)
		}
		if n := r.mw.Stats().CancelChecks; n != 0 {
			t.Errorf("CancelChecks = %d with checks off", n)
		}
	})
}

// A job asked to cancel whose worker crashed (its lease ran out with the request on the record):
// the next delivery records the cancellation and dead-letters the message without running it.
func TestCancelRequestOfACrashedRun(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		store := newStore()
		r := newRig(t, store, 5, nil)
		t0 := r.clock.Now()
		rec := idempotency.Record{Kind: "payment.charge", Key: "job-1", JobID: "job-1", State: idempotency.StateRunning, Runs: 1,
			Token: "crashed", LeaseUntil: t0.Add(-time.Second), FirstAttemptAt: t0.Add(-time.Minute), LastAttemptAt: t0.Add(-time.Minute),
			UpdatedAt: t0.Add(-time.Minute), CancelRequestedAt: t0.Add(-30 * time.Second), ExpiresAt: t0.Add(time.Hour)}
		if err := store.(putter).Put(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		out := r.deliver(context.Background(), message("m1", "job-1", "", chargeArgs{}, 2))
		if out[0].Outcome != worker.OutcomeDeadLettered || out[0].Reason != jobs.ReasonCancelled || r.charges.Load() != 0 {
			t.Errorf("outcome %+v, charges %d; want dead_lettered (cancelled) without running", out[0], r.charges.Load())
		}
		got, _ := store.Get(context.Background(), "payment.charge", "job-1")
		if got.State != idempotency.StateCancelled || got.Runs != 1 {
			t.Errorf("record %+v, want cancelled, runs 1", got)
		}
		if n := r.mw.Stats().CancelsRecorded; n != 1 {
			t.Errorf("CancelsRecorded = %d, want 1", n)
		}
	})
}

// Progress: the first report is written at once (and returns the record: a cancellation check at
// no extra cost); later ones within ProgressInterval wait in memory, and the last is written with
// the finish. Outside a job, out of range, and after the job returned: errors.
func TestProgressWritesThrottledAndFlushed(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, func(c *idempotency.MiddlewareConfig) {
			c.Now = time.Now
			c.ProgressInterval = time.Hour // only the first report is written while it runs
			c.CancelCheck = -1
		})
		var leaked context.Context
		r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
			leaked = ctx
			if err := jobs.Progress(ctx, 0.1, "page 1 of 10"); err != nil {
				return err
			}
			waitFor(t, "the first report to be written", func() bool {
				rec, err := r.store.Get(ctx, "payment.charge", "job-1")
				return err == nil && rec.Progress.Fraction == 0.1 && rec.Progress.Message == "page 1 of 10"
			})
			for i := 2; i <= 9; i++ {
				if err := jobs.Progress(ctx, float64(i)/10, "page "+string(rune('0'+i))+" of 10"); err != nil {
					return err
				}
			}
			if err := jobs.Progress(ctx, 1.5, ""); !errors.Is(err, jobs.ErrInvalidProgress) {
				t.Errorf("Progress(1.5) = %v, want ErrInvalidProgress", err)
			}
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out := r.deliver(ctx, message("m1", "job-1", "", chargeArgs{}, 1)); out[0].Outcome != worker.OutcomeSucceeded {
			t.Fatalf("outcome %+v", out[0])
		}
		rec, _ := r.store.Get(ctx, "payment.charge", "job-1")
		if rec.Progress.Fraction != 0.9 || rec.Progress.Message != "page 9 of 10" {
			t.Errorf("final progress %+v, want the last report (0.9) flushed by the finish", rec.Progress)
		}
		if n := r.mw.Stats().ProgressWrites; n != 1 {
			t.Errorf("ProgressWrites = %d, want 1 (the rest throttled)", n)
		}
		if err := jobs.Progress(leaked, 1, "late"); !errors.Is(err, jobs.ErrNoProgressReporter) {
			t.Errorf("Progress after the job returned = %v, want ErrNoProgressReporter", err)
		}
		if err := jobs.Progress(context.Background(), 0.5, ""); !errors.Is(err, jobs.ErrNoProgressReporter) {
			t.Errorf("Progress outside a job = %v, want ErrNoProgressReporter", err)
		}
	})
}

// A progress write returns the record: a job that reports progress learns of a cancellation
// without any read.
func TestProgressWriteNoticesACancelRequest(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, func(c *idempotency.MiddlewareConfig) {
			c.Now = time.Now
			c.ProgressInterval = 10 * time.Millisecond
			c.CancelCheck = -1
		})
		started := make(chan struct{})
		r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
			close(started)
			for i := 0; ; i++ {
				if err := jobs.Progress(ctx, float64(i%100)/100, "working"); err != nil {
					return err
				}
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		done := r.deliverAsync(ctx, message("m1", "job-1", "", chargeArgs{}, 1))
		<-started
		waitFor(t, "a progress write", func() bool { return r.mw.Stats().ProgressWrites > 0 })
		requestCancel(t, r.store, "job-1", "", time.Now())
		out := waitOutcome(t, done)
		if out.Reason != jobs.ReasonCancelled || !errors.Is(out.Err, jobs.ErrCancelRequested) {
			t.Errorf("outcome %+v, want cancelled on request", out)
		}
		if n := r.mw.Stats().CancelChecks; n != 0 {
			t.Errorf("CancelChecks = %d, want 0: the progress writes noticed it", n)
		}
	})
}
