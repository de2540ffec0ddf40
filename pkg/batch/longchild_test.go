package batch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// LongChild is a batch child that is a long job: it saves a cursor and continues in new runs
// (jobs.Sleep(0), as a slice's end does) twice, then waits for its rig's gate and succeeds.
type LongChild struct{}

func (LongChild) Kind() string { return "test.long_child" }

// TestContinuingChildIsCountedWhenItFinishes: a batch child whose runs end without ending it (a
// long job's continuations, issue 31) is not counted at a run's end — its record is queued
// again, not final — but once, when it really finishes; the batch stays open meanwhile and its
// callback runs once, after.
func TestContinuingChildIsCountedWhenItFinishes(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	third := make(chan struct{}, 1)
	var openGate sync.Once
	open := func() { openGate.Do(func() { close(r.gate) }) }
	jobs.MustRegister(r.reg, jobs.WorkFunc[LongChild](func(ctx context.Context, j *jobs.Job[LongChild]) error {
		n := 0
		if _, err := jobs.Cursor(ctx, &n); err != nil {
			return err
		}
		if n < 2 {
			if err := jobs.Checkpoint(ctx, n+1); err != nil {
				return err
			}
			return jobs.Sleep(0) // continue at once, from the cursor
		}
		third <- struct{}{}
		select {
		case <-r.gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("long-child")})
	if err != nil {
		t.Fatal(err)
	}
	long, err := r.prod.Prepare(r.ctx, LongChild{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := append(r.thumbs(1, func(int) bool { return false }), long)
	if err := b.Add(r.ctx, r.prod, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.start(1, 0)
	t.Cleanup(open) // after start's cleanup is registered, so it runs first: a failure must not leave the child blocking the poller's stop
	select {
	case <-third:
	case <-time.After(time.Minute):
		t.Fatal("the long child's third run did not start")
	}
	r.waitFor("the plain child", time.Minute, func() bool { return r.info(b.ID()).Succeeded == 1 })
	if info := r.info(b.ID()); info.Remaining != 1 || info.State == batch.StateDone || r.cbRuns.Load() != 0 {
		t.Fatalf("batch while its long child runs after two continuations: %+v, callbacks %d; want 1 remaining, open, no callback",
			info, r.cbRuns.Load())
	}
	open()
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if info := r.info(b.ID()); info.Succeeded != 2 || info.Remaining != 0 || info.State != batch.StateDone {
		t.Errorf("batch after its long child finished: %+v, want 2 succeeded, done", info)
	}
	if s := r.summaries(); len(s) != 1 || s[0].Succeeded != 2 || s[0].Total != 2 {
		t.Errorf("callback summaries %+v, want one with both children succeeded", s)
	}
	st, err := r.status.GetByID(r.ctx, long.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != idempotency.StateSucceeded || st.Continuations != 2 || st.Runs != 1 {
		t.Errorf("the long child's record: %s, %d continuations, %d runs; want succeeded, 2, 1", st.State, st.Continuations, st.Runs)
	}
}
