package flow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/flow"
)

// TestListLimitsWithHolders lists concurrency items with their holders (earliest lease first,
// expired ones marked) and rate items with the tokens available, from the index, filtered by
// name; a long key is shown as it was given, not as its hash.
func TestListLimitsWithHolders(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	ctx := context.Background()
	long := string(make([]byte, 600))
	for _, r := range []flow.SlotRequest{
		{Name: "webhook", Key: "tenant-a", Limit: 3, JobID: "JOB1", LeaseUntil: t0.Add(2 * time.Minute), Now: t0},
		{Name: "webhook", Key: "tenant-a", Limit: 3, JobID: "JOB2", LeaseUntil: t0.Add(time.Minute), Now: t0},
		{Name: "webhook", Key: "tenant-b", Limit: 3, JobID: "job/with spaces", LeaseUntil: t0.Add(time.Minute), Now: t0},
		{Name: "webhook", Key: long, Limit: 3, JobID: "JOB4", LeaseUntil: t0.Add(time.Minute), Now: t0},
		{Name: "other", Key: "", Limit: 1, JobID: "JOB5", LeaseUntil: t0.Add(10 * time.Second), Now: t0},
	} {
		if res, err := tbl.AcquireSlot(ctx, r); err != nil || !res.Acquired {
			t.Fatalf("acquire %+v: %+v, %v", r, res, err)
		}
	}
	if _, err := tbl.TakeToken(ctx, flow.TokenRequest{Name: "email.send", Limit: 10, Period: time.Second, Burst: 4, Now: t0}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(30 * time.Second)
	page, err := tbl.List(ctx, flow.ListQuery{Type: flow.TypeConcurrency, Name: "webhook", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]flow.LimitState{}
	for _, l := range page.Limits {
		if l.Name != "webhook" || l.Type != flow.TypeConcurrency || l.Limit != 3 {
			t.Errorf("listed %+v under name webhook", l)
		}
		byKey[l.Key] = l
	}
	if len(byKey) != 3 {
		t.Fatalf("listed keys %v, want tenant-a, tenant-b and the long one", page.Limits)
	}
	if a := byKey["tenant-a"]; len(a.Holders) != 2 || a.Holders[0].JobID != "JOB2" || a.Holders[1].JobID != "JOB1" || a.Holders[0].Expired {
		t.Errorf("tenant-a holders %+v; want JOB2 then JOB1, live", a.Holders)
	}
	if b := byKey["tenant-b"]; len(b.Holders) != 1 || b.Holders[0].JobID != "" {
		t.Errorf("tenant-b holders %+v; want one with a hashed id", b.Holders)
	}
	if _, ok := byKey[long]; !ok {
		t.Errorf("the long key is not listed as given")
	}
	all, err := tbl.List(ctx, flow.ListQuery{Type: flow.TypeConcurrency, Now: now})
	if err != nil || len(all.Limits) != 4 {
		t.Fatalf("all concurrency items: %d, %v; want 4", len(all.Limits), err)
	}
	for _, l := range all.Limits {
		if l.Name == "other" && (l.Key != "" || len(l.Holders) != 1 || !l.Holders[0].Expired) {
			t.Errorf("other: %+v; want the whole-name item with an expired holder", l)
		}
	}
	rates, err := tbl.List(ctx, flow.ListQuery{Type: flow.TypeRate, Now: t0})
	if err != nil || len(rates.Limits) != 1 {
		t.Fatalf("rates: %+v, %v", rates, err)
	}
	if r := rates.Limits[0]; r.Name != "email.send" || r.Limit != 10 || r.Period != time.Second || r.Burst != 4 || r.Available != 3 {
		t.Errorf("rate item %+v; want 10/s, burst 4, 3 available after one token", r)
	}
	if _, err := tbl.List(ctx, flow.ListQuery{Type: "bogus"}); !errors.Is(err, flow.ErrInvalid) {
		t.Errorf("bad type: %v", err)
	}
	if _, err := tbl.List(ctx, flow.ListQuery{Type: flow.TypeRate, PageToken: "!!"}); !errors.Is(err, flow.ErrInvalid) {
		t.Errorf("bad page token: %v", err)
	}
}
