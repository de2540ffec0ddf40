package pgoutbox_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

const fifoURL = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo"

// Two transactions that write to one FIFO group overlap: T1 writes its row and stays open, T2
// writes its row and tries to commit. T2 waits for T1 (the group's advisory lock, held until
// T1 ends), so no relay can claim T2's row while T1's is not committed yet, and the group is
// sent in commit order: T1's row, then T2's. Without the lock T2 commits at once with the
// later seq, a relay claims and sends it, and T1's row follows it — out of order, and held by
// a second relay while the first still holds T2's.
func TestFIFOOverlappingWritersKeepCommitOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := &countingSQS{}
	p := newProducer(t, api, fifoURL)
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	job := func(n int) (orderArgs, producer.Option) {
		return orderArgs{Order: "o", Group: "g", N: n}, producer.WithGroupID("g")
	}
	newRelay := func(id string) *outbox.Relay {
		r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p}, ID: id, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t1, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Rollback()
	args, opt := job(1)
	if _, err := o.EnqueueTx(ctx, t1, args, opt); err != nil {
		t.Fatal(err)
	}

	pid := make(chan int, 1)
	t2done := make(chan error, 1)
	go func() {
		err := func() error {
			t2, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer t2.Rollback()
			var backend int
			if err := t2.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
				return err
			}
			pid <- backend
			args, opt := job(2)
			if _, err := o.EnqueueTx(ctx, t2, args, opt); err != nil {
				return err
			}
			return t2.Commit()
		}()
		t2done <- err
	}()
	backend := <-pid
	var t2err error
	t2ended := false
	waitFor(t, "T2 to commit or to wait for a lock", func() bool {
		select {
		case t2err = <-t2done:
			t2ended = true
			return true
		default:
		}
		var waiting int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted", backend).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	if t2ended {
		t.Errorf("T2 committed (err %v) while T1, an earlier writer of its group, was still open", t2err)
	}

	// While T1 is open, a relay claims nothing of the group.
	st, err := newRelay("a").RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Claimed != 0 {
		t.Errorf("relay a claimed %d rows of group g while T1 was open: %+v", st.Claimed, st)
	}

	if err := t1.Commit(); err != nil {
		t.Fatal(err)
	}
	if !t2ended {
		if err := <-t2done; err != nil {
			t.Fatalf("T2 after T1's commit: %v", err)
		}
	}
	if _, err := newRelay("b").Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var order []int
	for _, s := range api.sent() {
		env, err := jobs.ParseEnvelope(s.Body)
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, argsOf(t, env).N)
	}
	if len(order) != 2 || order[0] != 1 || order[1] != 2 {
		t.Errorf("group g was sent in the order %v, want [1 2] (T1 committed first)", order)
	}
	if n := rowCount(t, db, o); n != 0 {
		t.Errorf("%d rows left", n)
	}
}

// A transaction holds its groups' locks while it is open: a relay's claim skips those groups
// (its try-lock fails), and other groups are not held up.
func TestFIFOOpenWriterHoldsOnlyItsGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := &countingSQS{}
	p := newProducer(t, api, fifoURL)
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	// Committed rows of two groups.
	inTx(t, db, func(tx *sql.Tx) error {
		_, err := o.EnqueueBatchTx(ctx, tx, []producer.Request{
			{Args: orderArgs{Order: "held", Group: "held"}, Options: []producer.Option{producer.WithGroupID("held")}},
			{Args: orderArgs{Order: "free", Group: "free"}, Options: []producer.Option{producer.WithGroupID("free")}},
		})
		return err
	})
	open, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback()
	if _, err := o.EnqueueTx(ctx, open, orderArgs{Order: "held", Group: "held", N: 1}, producer.WithGroupID("held")); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Drain(ctx)
	if err != nil || st.Sent != 1 {
		t.Fatalf("Drain with a writer of group held open = %+v, %v; want group free's row sent", st, err)
	}
	if s := api.sent(); len(s) != 1 || s[0].Group != "free" {
		t.Errorf("sent %+v; want only group free", s)
	}
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Drain(ctx); err != nil || st.Sent != 2 {
		t.Fatalf("Drain after the commit = %+v, %v; want group held's two rows", st, err)
	}
}
