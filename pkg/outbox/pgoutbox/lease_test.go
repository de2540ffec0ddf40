package pgoutbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// lateClaims is the outbox seen through a slow path to the database: each claim statement
// returns `late` after it ran (on the relay's clock), as one that waited for a pooled connection
// or a slow network does, with its lease counted from the relay's clock before it.
type lateClaims struct {
	outbox.Store
	mu   sync.Mutex
	now  time.Time
	late time.Duration
}

func (l *lateClaims) Now() time.Time { l.mu.Lock(); defer l.mu.Unlock(); return l.now }

func (l *lateClaims) Claim(ctx context.Context, c outbox.Claim) ([]outbox.Entry, error) {
	entries, err := l.Store.Claim(ctx, c)
	l.mu.Lock()
	l.now = l.now.Add(l.late)
	l.mu.Unlock()
	return entries, err
}

// The PostgreSQL relay shares the relay core's check: rows whose claim has less than half the
// lease left when the send would start (here the claim returned 60% of the lease late) are not
// sent; they go back with no attempt spent, and the next pass sends each once. Before the check,
// they were sent whatever their lease said, while another relay could claim them.
func TestRowsWhoseClaimRanOutAreNotSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := &countingSQS{}
	const url = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: newProducer(t, api, url)})
	ids := enqueue(t, db, o, 5)
	store := &lateClaims{Store: o, now: time.Now(), late: 18 * time.Second}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Producers: []*producer.Producer{newProducer(t, api, url)}, ID: "a",
		Lease: 30 * time.Second, Now: store.Now, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.RunOnce(ctx)
	if err != nil || st.Claimed != 5 || st.Sent != 0 || st.Released != 5 || st.LeaseShort != 5 || len(api.sent()) != 0 {
		t.Fatalf("late claim: %+v, %v, %d sent; want the 5 rows released unsent", st, err, len(api.sent()))
	}
	for _, id := range ids {
		if e, err := o.Get(ctx, id); err != nil || e.Attempts != 0 || e.LockedBy != "" {
			t.Errorf("row %s: %+v, %v; want unclaimed with no attempt spent", id, e, err)
		}
	}
	store.late = 0
	if st, err = r.RunOnce(ctx); err != nil || st.Sent != 5 {
		t.Fatalf("next pass: %+v, %v; want the 5 rows sent", st, err)
	}
	if n := len(api.sent()); n != 5 || rowCount(t, db, o) != 0 {
		t.Errorf("%d sends, %d rows left; want each row sent once", n, rowCount(t, db, o))
	}
}
