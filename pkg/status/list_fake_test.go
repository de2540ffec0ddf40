package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// tiedSeeds returns n dead records in few distinct update times, so that many share a sort key
// within one shard, plus records in other states.
func tiedSeeds(n int) []seed {
	var out []seed
	for i := range n {
		state := idempotency.StateDead
		if i%5 == 4 {
			state = idempotency.StateRetrying
		}
		out = append(out, seed{
			kind: []string{"email.send", "report.build", "report.build"}[i%3], key: fmt.Sprintf("t%03d", i),
			jobID: fmt.Sprintf("job-%d", i), state: state, runs: 1,
			upd: testNow.Add(-time.Duration(i%4) * time.Second), exp: testNow.Add(time.Hour),
		})
	}
	return out
}

func fakeTable(t *testing.T, f *fakeDB, shards int) *Table {
	t.Helper()
	tbl, err := New(Config{Client: f, Table: "jobs", Shards: shards, QueryConcurrency: 3, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// TestListTiesWithinShards pages through records whose sort keys tie inside a shard, as
// DynamoDB orders them: every job once, newest first, and the same order whatever the page size.
func TestListTiesWithinShards(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 2, 16} {
		for _, kind := range []string{"", "report.build"} {
			t.Run(fmt.Sprintf("%d shards/%s", shards, kind), func(t *testing.T) {
				t.Parallel()
				f := newFakeDB()
				seeds := tiedSeeds(90)
				for _, s := range seeds {
					f.put(s, shards)
				}
				tbl := fakeTable(t, f, shards)
				want := expected(seeds, idempotency.StateDead, kind)
				sort.Strings(want)
				var first []string
				for _, limit := range []int{1, 4, 7, 1000} {
					got := walk(t, tbl, ListQuery{State: idempotency.StateDead, Kind: kind, Limit: limit})
					if first == nil {
						first = got
						checkNewestFirst(t, f, got)
						set := slices.Clone(got)
						sort.Strings(set)
						if !slices.Equal(set, want) {
							t.Fatalf("limit %d: walked %d jobs %v\nwant %d %v", limit, len(got), got, len(want), want)
						}
						continue
					}
					if !slices.Equal(got, first) {
						t.Fatalf("limit %d walked\n%v\nlimit 1 walked\n%v", limit, got, first)
					}
				}
				if m := f.maxInFlight.Load(); m > 3 {
					t.Fatalf("%d queries at once, QueryConcurrency is 3", m)
				}
			})
		}
	}
}

func checkNewestFirst(t *testing.T, f *fakeDB, pks []string) {
	t.Helper()
	prev := int64(1 << 62)
	for _, pk := range pks {
		upd, _, _ := getN(f.items[pk], idempotency.AttrUpdated)
		if upd > prev {
			t.Fatalf("%s (upd %d) listed after an older job (upd %d)", pk, upd, prev)
		}
		prev = upd
	}
}

// TestListSkipsStaleIndexEntries: the index lags the table, so List checks each entry against
// the item.
func TestListSkipsStaleIndexEntries(t *testing.T) {
	t.Parallel()
	f := newFakeDB()
	base := seed{kind: "email.send", jobID: "j", state: idempotency.StateDead, runs: 3, exp: testNow.Add(time.Hour)}
	keep1, keep2 := base, base
	keep1.key, keep1.upd = "keep1", testNow.Add(-time.Second)
	keep2.key, keep2.upd = "keep2", testNow.Add(-5*time.Second)
	redriven, deleted, expired := base, base, base
	redriven.key, redriven.upd = "redriven", testNow.Add(-2*time.Second)
	deleted.key, deleted.upd = "deleted", testNow.Add(-3*time.Second)
	expired.key, expired.upd, expired.exp = "expired", testNow.Add(-4*time.Second), testNow.Add(-time.Minute)
	for _, s := range []seed{keep1, keep2, redriven, expired} {
		f.put(s, idempotency.DefaultShards)
	}
	// redriven is running now, but its dead index entry has not been removed yet.
	f.stale[redriven.pk()] = redriven.item(idempotency.DefaultShards)
	running := redriven
	running.state, running.tok = idempotency.StateRunning, "tok"
	f.put(running, idempotency.DefaultShards)
	// deleted is gone from the table (TTL), not yet from the index.
	f.stale[deleted.pk()] = deleted.item(idempotency.DefaultShards)

	tbl := fakeTable(t, f, idempotency.DefaultShards)
	for _, limit := range []int{1, 2, 50} {
		got := walk(t, tbl, ListQuery{State: idempotency.StateDead, Limit: limit})
		if !slices.Equal(got, []string{keep1.pk(), keep2.pk()}) {
			t.Fatalf("limit %d: listed %v", limit, got)
		}
	}
	// A page fills up past skipped entries.
	p, err := tbl.List(context.Background(), ListQuery{State: idempotency.StateDead, Limit: 2})
	if err != nil || len(p.Jobs) != 2 {
		t.Fatalf("page of 2: %d jobs, %v", len(p.Jobs), err)
	}
}

func TestListRetriesUnprocessedKeys(t *testing.T) {
	t.Parallel()
	f := newFakeDB()
	seeds := tiedSeeds(250)
	for _, s := range seeds {
		f.put(s, idempotency.DefaultShards)
	}
	f.unprocessed = 3
	tbl := fakeTable(t, f, idempotency.DefaultShards)
	var slept []time.Duration
	tbl.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	tbl.concurrency = 1 // slept is not locked
	p, err := tbl.List(context.Background(), ListQuery{State: idempotency.StateDead, Limit: MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if want := expected(seeds, idempotency.StateDead, ""); len(p.Jobs) != len(want) || p.NextPageToken != "" {
		t.Fatalf("listed %d jobs (token %q), want %d", len(p.Jobs), p.NextPageToken, len(want))
	}
	if len(slept) != 3 || slept[0] != 50*time.Millisecond {
		t.Fatalf("slept %v, want three backoffs from 50ms", slept)
	}

	f.unprocessed = 1 << 30 // never drains
	if _, err := tbl.List(context.Background(), ListQuery{State: idempotency.StateDead}); err == nil {
		t.Fatal("List succeeded although keys stayed unprocessed")
	}
}

func TestListReportsQueryErrors(t *testing.T) {
	t.Parallel()
	f := newFakeDB()
	f.queryErr = errors.New("ProvisionedThroughputExceededException")
	tbl := fakeTable(t, f, idempotency.DefaultShards)
	_, err := tbl.List(context.Background(), ListQuery{State: idempotency.StateRetrying})
	if !errors.Is(err, f.queryErr) {
		t.Fatalf("err = %v", err)
	}
}

func TestListStopsOnCancelledContext(t *testing.T) {
	t.Parallel()
	f := newFakeDB()
	for _, s := range tiedSeeds(30) {
		f.put(s, idempotency.DefaultShards)
	}
	tbl := fakeTable(t, f, idempotency.DefaultShards)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.queryErr = context.Canceled // what the SDK returns for a cancelled context
	if _, err := tbl.List(ctx, ListQuery{State: idempotency.StateDead}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}
