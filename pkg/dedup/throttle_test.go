package dedup_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/dedup"
)

// TestThrottleDropsBeyondTheLimit: of 20 enqueues of one key at once with a limit of 5 per
// minute, 5 are sent and 15 dropped with ErrThrottled, saying when the period ends; the next
// period takes 5 more. Another key has its own count.
func TestThrottleDropsBeyondTheLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	e.clock.now = e.clock.now.Truncate(time.Minute).Add(10 * time.Second)
	rule := dedup.Throttle{Key: "tenant-1", Limit: 5, Period: time.Minute}
	const n = 20
	results := make([]dedup.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.enq.Enqueue(ctx, exportArgs{User: "t1", N: i}, rule)
		}()
	}
	wg.Wait()
	sent, dropped := 0, 0
	periodEnd := e.clock.Now().Truncate(time.Minute).Add(time.Minute)
	for i, r := range results {
		switch {
		case errs[i] == nil && r.Outcome == dedup.Enqueued:
			sent++
			if r.Count < 1 || r.Count > 5 || r.MessageID == "" {
				t.Fatalf("enqueue %d: count %d, message %q", i, r.Count, r.MessageID)
			}
		case errors.Is(errs[i], dedup.ErrThrottled) && r.Outcome == dedup.Throttled:
			dropped++
			var te *dedup.ThrottledError
			if !errors.As(errs[i], &te) || !te.RetryAt.Equal(periodEnd) || !r.RetryAt.Equal(periodEnd) || te.Limit != 5 {
				t.Fatalf("enqueue %d: %v (%+v), want the period's end %s", i, errs[i], te, periodEnd)
			}
		default:
			t.Fatalf("enqueue %d: %+v, %v", i, r, errs[i])
		}
	}
	if sent != 5 || dropped != 15 {
		t.Fatalf("%d sent and %d dropped, want 5 and 15", sent, dropped)
	}
	if msgs := e.receive(); len(msgs) != 5 {
		t.Fatalf("%d messages, want 5", len(msgs))
	}
	if r, err := e.enq.Enqueue(ctx, exportArgs{User: "t2"}, dedup.Throttle{Key: "tenant-2", Limit: 5, Period: time.Minute}); err != nil || r.Count != 1 {
		t.Fatalf("another key: %+v, %v", r, err)
	}
	e.clock.Add(time.Minute)
	for i := range 5 {
		if r, err := e.enq.Enqueue(ctx, exportArgs{User: "t1", N: 100 + i}, rule); err != nil || r.Count != i+1 {
			t.Fatalf("next period, enqueue %d: %+v, %v", i, r, err)
		}
	}
	if _, err := e.enq.Enqueue(ctx, exportArgs{User: "t1", N: 200}, rule); !errors.Is(err, dedup.ErrThrottled) {
		t.Fatalf("the sixth of the next period: %v, want ErrThrottled", err)
	}
}

// TestThrottleFailedSendGivesTheEnqueueBack: an enqueue whose send failed does not use up the
// period.
func TestThrottleFailedSendGivesTheEnqueueBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var f *failingSQS
	e := newEnv(t, envOptions{sqsWrapper: func(q producerSQS) producerSQS {
		f = &failingSQS{SQSAPI: q, fail: true}
		return f
	}})
	rule := dedup.Throttle{Key: "tenant-3", Limit: 1, Period: time.Hour}
	if _, err := e.enq.Enqueue(ctx, exportArgs{User: "t3"}, rule); err == nil || errors.Is(err, dedup.ErrThrottled) {
		t.Fatalf("enqueue with SQS failing: %v, want the send's error", err)
	}
	f.set(false)
	if r, err := e.enq.Enqueue(ctx, exportArgs{User: "t3"}, rule); err != nil || r.Count != 1 {
		t.Fatalf("after the failed send: %+v, %v; want the one enqueue of the period", r, err)
	}
}
