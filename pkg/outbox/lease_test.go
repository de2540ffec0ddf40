package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// slowClaims is a store whose claims take their time: claiming the i-th entry takes `step` on
// the relay's clock, and each entry's lease is counted from its own claim write (as
// dynamooutbox does), so that when Claim returns the first entries have less lease left than the
// last.
type slowClaims struct {
	*outbox.MemoryStore
	clk  *clock
	step time.Duration
}

func (s *slowClaims) Claim(ctx context.Context, c outbox.Claim) ([]outbox.Entry, error) {
	entries, err := s.MemoryStore.Claim(ctx, c)
	for i := range entries {
		entries[i].LockedUntil = c.Until.Add(time.Duration(i) * s.step)
		s.clk.Add(s.step)
	}
	return entries, err
}

func orderOf(t *testing.T, body string) string {
	t.Helper()
	env, err := jobs.ParseEnvelope(body)
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Order string `json:"order"`
	}
	if err := json.Unmarshal(env.Args, &a); err != nil {
		t.Fatal(err)
	}
	return a.Order
}

// TestRelayDoesNotSendWhatItMayNoLongerHold: a pass whose claim took most of the lease sends only
// the entries whose claim has at least half the lease left; the others go back unsent, with no
// attempt spent, and the next pass sends them. Each entry is sent once.
func TestRelayDoesNotSendWhatItMayNoLongerHold(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	api := &fakeSQS{}
	p := newProducer(t, api, stdURL, clk)
	mem := outbox.NewMemoryStore()
	var ids []string
	for i := range 10 {
		e := prepare(t, p, clk, fmt.Sprint(i))
		ids = append(ids, e.ID())
		if err := mem.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	// A lease of 10 s; claiming the 10 entries takes 8 s: entry i's claim ends at 10 s + 0.8 s·i,
	// so at the send (8 s) entries 0–3 have less than 5 s left.
	store := &slowClaims{MemoryStore: mem, clk: clk, step: 800 * time.Millisecond}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Producers: []*producer.Producer{p}, Lease: 10 * time.Second,
		Now: clk.Now, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Claimed != 10 || st.Sent != 6 || st.Released != 4 || st.LeaseShort != 4 {
		t.Fatalf("first pass %+v; want 6 sent, 4 released for their short claims", st)
	}
	var sent []string
	for _, b := range api.sent() {
		sent = append(sent, orderOf(t, b))
	}
	if want := []string{"4", "5", "6", "7", "8", "9"}; !slices.Equal(sent, want) {
		t.Fatalf("sent %v, want %v", sent, want)
	}
	for i := range 4 {
		e, err := mem.Get(context.Background(), ids[i])
		if err != nil || e.Attempts != 0 || e.LockedBy != "" || e.AvailableAt.After(clk.Now()) {
			t.Errorf("released entry %+v, %v: want unclaimed, due now, no attempt spent", e, err)
		}
	}
	store.step = 0 // a quick claim
	if st, err = r.RunOnce(context.Background()); err != nil || st.Sent != 4 || st.LeaseShort != 0 {
		t.Fatalf("second pass %+v, %v; want the 4 released entries sent", st, err)
	}
	if n := len(api.sent()); n != 10 || mem.Len() != 0 {
		t.Errorf("%d sends in all, %d entries left; want each of the 10 sent once", n, mem.Len())
	}
}

// TestRelayReleasesTheRestOfAGroupBehindAShortClaim: on a FIFO queue, the entries of a group
// behind one released for its short claim are released too, so that none overtakes it; other
// groups are sent.
func TestRelayReleasesTheRestOfAGroupBehindAShortClaim(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	api := &fakeSQS{}
	p := newProducer(t, api, fifoURL, clk)
	mem := outbox.NewMemoryStore()
	groups := []string{"k", "k", "k", "g", "h", "g", "h", "h"} // entries 0–3 will be short
	for i, g := range groups {
		if err := mem.Add(prepare(t, p, clk, fmt.Sprint(i), producer.WithGroupID(g), producer.WithDeduplicationID("d"+fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	store := &slowClaims{MemoryStore: mem, clk: clk, step: 1200 * time.Millisecond}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Producers: []*producer.Producer{p}, Lease: 10 * time.Second,
		Now: clk.Now, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	// Claimed over 9.6 s: entry i ends at 10 s + 1.2 s·i; at 9.6 s, entries 0–3 have less than
	// 5 s left.
	st, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, b := range api.sent() {
		sent = append(sent, orderOf(t, b))
	}
	if want := []string{"4", "6", "7"}; !slices.Equal(sent, want) || st.LeaseShort != 5 || st.Released != 5 {
		t.Fatalf("sent %v (stats %+v); want group h alone (4, 6, 7), and 5 released: k's three, g's two", sent, st)
	}
}
