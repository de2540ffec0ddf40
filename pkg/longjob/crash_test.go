package longjob_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/longjob"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// TestCrashMidSliceResumesFromCheckpoint kills the holder of a job in the middle of a slice: its
// first run saves a cursor at item 500, processes items 500-599 and then freezes, ignoring its
// context (as a Lambda whose invocation timed out, or a process that hung). Invocations last 5 s
// here, so that the first run reaches its checkpoint however loaded the machine is. The worker abandons
// it at the deadline; once its lease has expired the job's message is taken by another run, which
// goes on from item 500 (items 500-599 are done again, their effects refused as done), not from
// the start. When the frozen run wakes up and tries to save its stale cursor, the write is
// refused (its claim is gone) and the newer cursor stays. The job then completes: every item
// once, nothing dead-lettered.
func TestCrashMidSliceResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	it := &items{ddb: s.ddb, table: s.table, written: map[int]int{}}
	const n = 1000
	frozen, release, second, proceed := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	staleErr := make(chan error, 1)
	var once sync.Once

	processRange := func(ctx context.Context, job string, from, to int) error {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for lo := from; lo < to; lo += 25 { // 25 at a time
			hi := min(lo+25, to)
			errs := make([]error, hi-lo)
			var wg sync.WaitGroup
			for i := lo; i < hi; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i-lo] = it.process(wctx, job, i) }()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return err
			}
		}
		return nil
	}
	work := func(ctx context.Context, job *jobs.Job[backfillArgs]) error {
		from := -1
		if _, err := jobs.Cursor(ctx, &from); err != nil {
			return err
		}
		it.mu.Lock()
		it.runs = append(it.runs, from)
		run := len(it.runs)
		it.mu.Unlock()
		switch run {
		case 1: // the run that crashes
			if err := processRange(ctx, job.ID, 0, 500); err != nil {
				return err
			}
			if err := jobs.Checkpoint(ctx, 500); err != nil {
				return err
			}
			if err := processRange(ctx, job.ID, 500, 600); err != nil {
				return err
			}
			close(frozen)
			<-release // frozen: the worker abandons it at the deadline
			staleErr <- jobs.Checkpoint(ctx, 600)
			return errors.New("the frozen run returned late")
		case 2: // the run that takes over
			if err := processRange(ctx, job.ID, max(from, 0), 700); err != nil {
				return err
			}
			if err := jobs.Checkpoint(ctx, 700); err != nil && !errors.Is(err, jobs.ErrSliceEnded) {
				return err
			}
			once.Do(func() { close(second) })
			<-proceed
		}
		return longjob.Iterate(ctx, 0, func(ctx context.Context, cur int) (int, bool, error) {
			end := min(cur+50, n)
			return end, end == n, processRange(ctx, job.ID, cur, end)
		}, longjob.Options{Every: -1})
	}

	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: s.store, Logger: logger(), AbandonGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[backfillArgs](work))
	h, err := worker.New(worker.Config{Registry: reg, SQS: s.sqs, QueueURL: s.stack.QueueURL, DLQURL: s.stack.DLQURL,
		Middleware: []worker.Middleware{mw}, DeadlineMargin: 300 * time.Millisecond, SliceGrace: 300 * time.Millisecond,
		AbandonGrace: time.Second, Logger: logger()})
	if err != nil {
		t.Fatal(err)
	}
	s.startPoller(h, poller.Config{InvocationTimeout: 5 * time.Second, Concurrency: 2, VisibilityTimeout: 20 * time.Second})

	res, err := s.prod.Enqueue(context.Background(), backfillArgs{N: n})
	if err != nil {
		t.Fatal(err)
	}
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(2 * time.Minute):
			t.Fatalf("timed out waiting for %s (%s)", what, it)
		}
	}
	wait(frozen, "the first run to freeze")
	wait(second, "another run to take the job over")
	close(release)
	var stale error
	select {
	case stale = <-staleErr:
	case <-time.After(time.Minute):
		t.Fatal("the frozen run never tried its checkpoint")
	}
	if !errors.Is(stale, idempotency.ErrLeaseLost) {
		t.Errorf("the frozen run's checkpoint: %v, want ErrLeaseLost", stale)
	}
	j, err := s.st.GetByID(context.Background(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Cursor.Value != "700" {
		t.Errorf("cursor after the stale write: %+v, want the newer run's 700", j.Cursor)
	}
	close(proceed)
	j = s.waitState(res.ID, idempotency.StateSucceeded, 2*time.Minute)
	t.Logf("%s; record: runs %d, continuations %d", it, j.Runs, j.Continuations)

	it.mu.Lock()
	defer it.mu.Unlock()
	for i := range n {
		if c := it.written[i]; c != 1 {
			t.Errorf("item %d written %d times, want once", i, c)
		}
	}
	if it.runs[0] != -1 || len(it.runs) < 2 || it.runs[1] != 500 {
		t.Errorf("runs started from %v; want the first from none, the second from the checkpoint 500", it.runs)
	}
	for k := 2; k < len(it.runs); k++ {
		if it.runs[k] < 700 {
			t.Errorf("run %d started from %d, before the cursor 700 saved earlier (runs from %v)", k, it.runs[k], it.runs)
		}
	}
	if r := it.refused.Load(); r != 100 {
		t.Errorf("%d items were found done when processed again, want the 100 the frozen run did after its checkpoint", r)
	}
	// The crashed run did not end its slice cleanly: like any run that overruns the deadline it
	// counted an attempt.
	if j.Runs != 2 {
		t.Errorf("record's runs %d, want 2 (the abandoned run's attempt, the one that finished)", j.Runs)
	}
	s.dlqEmpty()
}
