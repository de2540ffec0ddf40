package status

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// TestWait runs jobs through the store's claim and finish on the emulator while Wait reads them:
// it returns each final state, keeps waiting through retries, and says what it knows when the
// deadline comes or the job cannot be found.
func TestWait(t *testing.T) {
	t.Parallel()
	r := newLayoutRig(t, idempotency.LayoutByID)
	tbl := r.tbl
	tbl.now = time.Now
	ctx := context.Background()
	fast := WaitOptions{Interval: time.Millisecond, MaxInterval: 5 * time.Millisecond}

	for _, final := range []idempotency.State{idempotency.StateSucceeded, idempotency.StateDead, idempotency.StateCancelled} {
		t.Run(string(final), func(t *testing.T) {
			id := "01W" + string(final)
			key := id
			if final == idempotency.StateCancelled {
				key = "order-" + id // a key of its own: found through the by_id index
			}
			now := time.Now()
			res, err := r.store.Claim(ctx, idempotency.ClaimRequest{Kind: "k", Key: key, JobID: id, PayloadHash: "h", Token: "t1",
				Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
			if err != nil || !res.Claimed {
				t.Fatal(res, err)
			}
			type answer struct {
				j   Job
				err error
			}
			done := make(chan answer, 1)
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			go func() {
				j, err := tbl.Wait(wctx, id, fast)
				done <- answer{j, err}
			}()
			// A failure and a retry first: not final, Wait goes on.
			if err := r.store.Finish(ctx, idempotency.Finish{Kind: "k", Key: key, JobID: id, Token: "t1", State: idempotency.StateRetrying,
				Error: "boom", Now: time.Now(), ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.store.Claim(ctx, idempotency.ClaimRequest{Kind: "k", Key: key, JobID: id, PayloadHash: "h", Token: "t2",
				Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			select {
			case a := <-done:
				t.Fatalf("Wait returned before the final state: %+v, %v", a.j, a.err)
			default:
			}
			f := idempotency.Finish{Kind: "k", Key: key, JobID: id, Token: "t2", State: final, Now: time.Now(), ExpiresAt: now.Add(time.Hour)}
			if final != idempotency.StateSucceeded {
				f.Reason, f.Error = "cancelled", "stop"
			}
			if err := r.store.Finish(ctx, f); err != nil {
				t.Fatal(err)
			}
			a := <-done
			if a.err != nil || a.j.State != final || a.j.JobID != id || a.j.Runs != 2 {
				t.Errorf("Wait = %+v, %v; want %s after 2 runs", a.j, a.err, final)
			}
		})
	}

	t.Run("Deadline", func(t *testing.T) {
		now := time.Now()
		if _, err := r.store.Claim(ctx, idempotency.ClaimRequest{Kind: "k", Key: "01SLOW", JobID: "01SLOW", Token: "t",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		// Long enough for the first lookup to find the job on a loaded machine (-race, 2 cores):
		// the job stays running, so Wait always ends at this deadline.
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		j, err := tbl.Wait(wctx, "01SLOW", fast)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNotFound) || j.State != idempotency.StateRunning {
			t.Errorf("Wait past its deadline = %+v, %v; want the running job and DeadlineExceeded", j, err)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		o := fast
		o.NotFoundAfter = 20 * time.Millisecond
		if _, err := tbl.Wait(ctx, "no-such-job", o); !errors.Is(err, ErrNotFound) {
			t.Errorf("Wait(unknown, NotFoundAfter) = %v, want ErrNotFound", err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		if _, err := tbl.Wait(wctx, "no-such-job", fast); !errors.Is(err, ErrNotFound) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait(unknown) until the deadline = %v, want ErrNotFound and DeadlineExceeded", err)
		}
	})

	t.Run("Lapsed", func(t *testing.T) {
		if err := tbl.RecordQueued(ctx, QueuedJob{Kind: "k", Key: "01LAPSED", JobID: "01LAPSED", At: time.Now().Add(-2 * time.Hour),
			ExpiresAt: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Wait(ctx, "01LAPSED", fast); !errors.Is(err, ErrNotFound) {
			t.Errorf("Wait(lapsed) = %v, want ErrNotFound", err)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		for _, tt := range []struct {
			id   string
			opts WaitOptions
		}{{"", WaitOptions{}}, {"x", WaitOptions{Interval: -1}}, {"x", WaitOptions{NotFoundAfter: -1}}} {
			if _, err := tbl.Wait(ctx, tt.id, tt.opts); !errors.Is(err, ErrInvalid) {
				t.Errorf("Wait(%q, %+v) = %v, want ErrInvalid", tt.id, tt.opts, err)
			}
		}
	})
}
