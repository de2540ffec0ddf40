package dedup_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// TestUniqueConcurrentEnqueues: 50 enqueues of one unique key at once send one job; the 49 others
// are duplicates that name its id. Once the worker (with the idempotency middleware) has run it,
// the next enqueue of the key is a new job.
func TestUniqueConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	rule := dedup.Unique{Key: "user-7", Window: time.Hour, States: dedup.WhileActive}

	const n = 50
	results := make([]dedup.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.enq.Enqueue(ctx, exportArgs{User: "7", N: i}, rule)
		}()
	}
	close(start)
	wg.Wait()

	var sent []dedup.Result
	dups := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("enqueue %d: %v", i, errs[i])
		}
		switch r.Outcome {
		case dedup.Enqueued:
			sent = append(sent, r)
		case dedup.Duplicate:
			dups++
		default:
			t.Fatalf("enqueue %d: outcome %q", i, r.Outcome)
		}
	}
	if len(sent) != 1 || dups != n-1 {
		t.Fatalf("%d enqueued and %d duplicates, want 1 and %d", len(sent), dups, n-1)
	}
	first := sent[0]
	if first.MessageID == "" || first.RuleKey != "user-7" {
		t.Fatalf("the enqueued result: %+v", first)
	}
	for i, r := range results {
		if r.Outcome == dedup.Duplicate && (r.ID != first.ID || r.MessageID != "") {
			t.Fatalf("duplicate %d names job %q (message %q), want %q and no message", i, r.ID, r.MessageID, first.ID)
		}
	}
	msgs := e.receive()
	if len(msgs) != 1 {
		t.Fatalf("%d messages on the queue, want 1", len(msgs))
	}
	if got := envelopes(t, msgs)[0].ID; got != first.ID {
		t.Fatalf("the message carries job %s, want %s", got, first.ID)
	}

	// While it waits in the queue, the key is held (its record is queued).
	again, err := e.enq.Enqueue(ctx, exportArgs{User: "7", N: 100}, rule)
	if err != nil || again.Outcome != dedup.Duplicate || again.ID != first.ID || again.State != idempotency.StateQueued {
		t.Fatalf("enqueue while the job waits: %+v, %v; want a duplicate of %s, queued", again, err, first.ID)
	}

	e.work(msgs)
	if runs, ids := e.ran(); len(runs) != 1 || ids[0] != first.ID {
		t.Fatalf("runs %v of %v, want the one job %s", runs, ids, first.ID)
	}
	next, err := e.enq.Enqueue(ctx, exportArgs{User: "7", N: 200}, rule)
	if err != nil || next.Outcome != dedup.Enqueued || next.ID == first.ID {
		t.Fatalf("enqueue after the job succeeded: %+v, %v; want a new job", next, err)
	}
	msgs = e.receive()
	if len(msgs) != 1 || envelopes(t, msgs)[0].ID != next.ID {
		t.Fatalf("after the new enqueue: %d messages, want the new job's", len(msgs))
	}
	e.work(msgs)
	if runs, _ := e.ran(); len(runs) != 2 || runs[1].N != 200 {
		t.Fatalf("runs %v, want the second job's args last", runs)
	}
}

// failingSQS refuses SendMessageBatch while fail is set.
type failingSQS struct {
	producer.SQSAPI
	mu   sync.Mutex
	fail bool
}

func (f *failingSQS) set(fail bool) { f.mu.Lock(); f.fail = fail; f.mu.Unlock() }

func (f *failingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset by peer")
	}
	return f.SQSAPI.SendMessageBatch(ctx, in, o...)
}

// TestUniqueSendFailureReleasesTheKey: a send that fails after the key was reserved releases it,
// so that the next enqueue of the key is sent, at once, for a rule of either kind.
func TestUniqueSendFailureReleasesTheKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		states []idempotency.State
	}{{"while active", dedup.WhileActive}, {"any state", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var f *failingSQS
			e := newEnv(t, envOptions{sqsWrapper: func(q producer.SQSAPI) producer.SQSAPI {
				f = &failingSQS{SQSAPI: q, fail: true}
				return f
			}})
			rule := dedup.Unique{Key: "user-8", Window: time.Hour, States: tt.states}
			res, err := e.enq.Enqueue(ctx, exportArgs{User: "8"}, rule)
			if err == nil || res.Outcome != "" || res.ReleaseErr != nil {
				t.Fatalf("enqueue with SQS failing: %+v, %v; want the send's error and the key released", res, err)
			}
			f.set(false)
			res2, err := e.enq.Enqueue(ctx, exportArgs{User: "8", N: 1}, rule)
			if err != nil || res2.Outcome != dedup.Enqueued || res2.ID == res.ID {
				t.Fatalf("enqueue after the failed send: %+v, %v; want a new job sent", res2, err)
			}
			if msgs := e.receive(); len(msgs) != 1 {
				t.Fatalf("%d messages, want 1", len(msgs))
			}
		})
	}
}

// stoppingProducer panics in Send, as a process stopping between the reservation and the send.
type stoppingProducer struct{ dedup.Producer }

func (stoppingProducer) Send(context.Context, []producer.Message) ([]producer.Result, error) {
	panic("the process stops here")
}

// TestUniqueReservationOfAStoppedProcessLapses: a process that stops after reserving a key, before
// its send, holds the key until the reservation's lease is over, not longer.
func TestUniqueReservationOfAStoppedProcessLapses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	stopped, err := dedup.New(dedup.Config{Producer: stoppingProducer{e.prod}, DynamoDB: e.ddb, Table: e.table, Jobs: e.status, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	rule := dedup.Unique{Key: "user-9", Window: time.Hour} // any state: the whole hour, once sent
	func() {
		defer func() { _ = recover() }()
		_, _ = stopped.Enqueue(ctx, exportArgs{User: "9"}, rule)
		t.Fatal("Send did not stop the enqueue")
	}()
	res, err := e.enq.Enqueue(ctx, exportArgs{User: "9", N: 1}, rule)
	if err != nil || res.Outcome != dedup.Duplicate {
		t.Fatalf("within the lease: %+v, %v; want a duplicate (the first may still be sending)", res, err)
	}
	e.clock.Add(dedup.DefaultReserveLease + time.Second)
	res, err = e.enq.Enqueue(ctx, exportArgs{User: "9", N: 2}, rule)
	if err != nil || res.Outcome != dedup.Enqueued {
		t.Fatalf("after the lease: %+v, %v; want the key taken over", res, err)
	}
	if msgs := e.receive(); len(msgs) != 1 || argsOf(t, envelopes(t, msgs)[0]).N != 2 {
		t.Fatalf("want the one job of the enqueue that took the key over")
	}
}

// TestUniqueWindowForAnyState: with no States the key is held for the whole window, after the job
// succeeded too (at most one per window); after the window, a new job.
func TestUniqueWindowForAnyState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{noStatus: true}) // the Enqueuer records the job itself
	rule := dedup.Unique{Fields: []string{"user"}, Window: time.Hour}
	first, err := e.enq.Enqueue(ctx, exportArgs{User: "10", N: 1}, rule)
	if err != nil || first.Outcome != dedup.Enqueued || first.StatusErr != nil {
		t.Fatalf("first: %+v, %v", first, err)
	}
	if j, err := e.status.GetByID(ctx, first.ID); err != nil || j.State != idempotency.StateQueued {
		t.Fatalf("the Enqueuer's record of a producer without Status: %+v, %v; want queued", j, err)
	}
	e.work(e.receive())
	e.clock.Add(2 * time.Minute) // past the lease: the record is read
	dup, err := e.enq.Enqueue(ctx, exportArgs{User: "10", N: 2}, rule)
	if err != nil || dup.Outcome != dedup.Duplicate || dup.ID != first.ID || dup.State != idempotency.StateSucceeded {
		t.Fatalf("within the window after success: %+v, %v; want a duplicate of the succeeded job", dup, err)
	}
	other, err := e.enq.Enqueue(ctx, exportArgs{User: "11", N: 2}, rule)
	if err != nil || other.Outcome != dedup.Enqueued {
		t.Fatalf("another user (another derived key): %+v, %v", other, err)
	}
	e.clock.Add(time.Hour)
	next, err := e.enq.Enqueue(ctx, exportArgs{User: "10", N: 3}, rule)
	if err != nil || next.Outcome != dedup.Enqueued {
		t.Fatalf("after the window: %+v, %v; want a new job", next, err)
	}
}

// TestUniqueShortWindow: a window of one second (the shortest) still leaves the send its time,
// and once it is over the key is free.
func TestUniqueShortWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	rule := dedup.Unique{Key: "tick", Window: time.Second}
	if res, err := e.enq.Enqueue(ctx, exportArgs{User: "s"}, rule); err != nil || res.Outcome != dedup.Enqueued {
		t.Fatalf("first: %+v, %v", res, err)
	}
	if res, err := e.enq.Enqueue(ctx, exportArgs{User: "s"}, rule); err != nil || res.Outcome != dedup.Duplicate {
		t.Fatalf("within the second: %+v, %v", res, err)
	}
	e.clock.Add(time.Second)
	if res, err := e.enq.Enqueue(ctx, exportArgs{User: "s"}, rule); err != nil || res.Outcome != dedup.Enqueued {
		t.Fatalf("after the second: %+v, %v", res, err)
	}
}
