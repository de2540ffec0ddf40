package batch_test

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// TestBatchSmall: a batch of 10 children, 2 failing to exhaustion, on several pollers: the
// callback runs once, with the counts and the ids of the children that did not succeed.
func TestBatchSmall(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	children := r.thumbs(10, func(i int) bool { return i == 3 || i == 7 })
	b, err := r.client.Enqueue(r.ctx, r.prod, batch.Spec{Callback: r.callback("small"), Description: "ten thumbnails"}, children...)
	if err != nil {
		t.Fatal(err)
	}
	r.start(2, 0)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() > 0 })
	info := r.info(b.ID())
	if info.State != batch.StateDone || info.Total != 10 || info.Succeeded != 8 || info.Dead != 2 || info.Remaining != 0 {
		t.Errorf("batch after the callback: %+v", info)
	}
	sums := r.summaries()
	if len(sums) != 1 {
		t.Fatalf("callback summaries: %+v", sums)
	}
	want := []string{children[3].ID, children[7].ID}
	sort.Strings(want)
	if s := sums[0]; s.Batch != b.ID() || s.Total != 10 || s.Succeeded != 8 || s.Dead != 2 || !slices.Equal(s.NotSucceeded, want) {
		t.Errorf("summary %+v, want 8 succeeded, 2 dead %v", s, want)
	}
}

// TestBatchThousandExactlyOnce is the test: 1,000 children, 5 % of them failing to
// exhaustion, duplicate deliveries (every 20th child sent twice) and crashes between a child's
// finishing write and its delete (a share of first deletes dropped: the message comes back), on
// three pollers: the callback runs exactly once, with the right counts.
func TestBatchThousandExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 jobs")
	}
	t.Parallel()
	r := newRig(t, rigOptions{})
	fail := func(i int) bool { return i%20 == 7 }
	children := r.thumbs(1000, fail)
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("thousand")})
	if err != nil {
		t.Fatal(err)
	}
	r.start(3, 0.1)
	// Built in chunks while the children already run: the callback cannot fire before the seal.
	for lo := 0; lo < 900; lo += 300 {
		if err := b.Add(r.ctx, r.prod, children[lo:lo+300]...); err != nil {
			t.Fatal(err)
		}
	}
	// The last 100 are counted with Track and sent by the test, each twice: duplicate deliveries.
	tagged, err := b.Track(r.ctx, children[900:]...)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err := r.prod.Send(r.ctx, tagged)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range res {
			if x.Err != nil {
				t.Fatal(x.Err)
			}
		}
	}
	// Adding a child again counts nothing twice (the same chunk: its fingerprint), and sends it again.
	if err := b.Add(r.ctx, r.prod, children[0:300]...); err != nil {
		t.Fatal(err)
	}
	r.waitFor("every child counted", 3*time.Minute, func() bool { return r.info(b.ID()).Remaining == 0 })
	if r.cbRuns.Load() != 0 {
		t.Fatal("the callback ran before the seal")
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() > 0 })
	info := r.info(b.ID())
	if info.Total != 1000 || info.Succeeded != 950 || info.Dead != 50 || info.Cancelled != 0 || info.State != batch.StateDone {
		t.Errorf("batch: %+v, want 950 succeeded, 50 dead of 1000", info)
	}
	sums := r.summaries()
	if len(sums) != 1 || sums[0].Succeeded != 950 || sums[0].Dead != 50 || len(sums[0].NotSucceeded) != 50 {
		t.Fatalf("summaries: %+v", sums)
	}
	for i, c := range children {
		j, err := r.status.GetByID(r.ctx, c.ID)
		if err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		want := idempotency.StateSucceeded
		if fail(i) {
			want = idempotency.StateDead
		}
		if j.State != want {
			t.Errorf("child %d: %s, want %s", i, j.State, want)
		}
		// A succeeded child ran once, a failing one its 2 attempts: no crash or duplicate ran a
		// child again.
		if runs, want := r.runs(i), map[bool]int{false: 1, true: 2}[fail(i)]; runs != want {
			t.Errorf("child %d ran %d times, want %d", i, runs, want)
		}
	}
	// The test did what it claims: deletes were dropped (crashes) and duplicates were delivered.
	if r.crashes.Load() == 0 || r.duplicates() == 0 {
		t.Errorf("crashes %d, duplicate deliveries %d: the test exercised neither", r.crashes.Load(), r.duplicates())
	}
	t.Logf("%d deletes dropped, %d duplicate deliveries acknowledged without running", r.crashes.Load(), r.duplicates())
}
