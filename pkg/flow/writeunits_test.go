package flow_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbsize"
	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// metered returns a flow table on a new job table of the emulator whose every write is billed by
// DynamoDB's rules (awscost: the item before and after each write, and the index entries it
// adds, changes or removes; the emulator reports no consumed capacity), its call counter, and
// the ledger.
func metered(t *testing.T) (*flow.Table, *awscost.Counter, *awscost.Ledger, string) {
	t.Helper()
	b := awslocaltest.Backend(t)
	plain := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table := awslocal.UniqueName("flowwru")
	in := idempotency.TableInput(table)
	if _, err := plain.CreateTable(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	ledger := awscost.NewLedger(map[string]awscost.Schema{table: awscost.SchemaFromCreateTable(in)})
	var mu sync.Mutex
	var failure error
	counter := &awscost.Counter{Next: b.Config.HTTPClient, OnWrite: func(w awscost.Write) {
		if w.Status != http.StatusOK && !w.ConditionFailed {
			return
		}
		schema, _ := ledger.Schema(w.Table)
		key := schema.Key(w)
		out, err := plain.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.Table), Key: key, ConsistentRead: aws.Bool(true)})
		if err == nil {
			_, err = ledger.Record(w.Table, key, out.Item, w.ConditionFailed)
		}
		if err != nil {
			mu.Lock()
			failure = errors.Join(failure, err)
			mu.Unlock()
		}
	}}
	t.Cleanup(func() {
		if failure != nil {
			t.Errorf("ledger: %v", failure)
		}
	})
	cfg := b.Config.Copy()
	cfg.HTTPClient = counter
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	tbl, err := flow.NewTable(flow.TableConfig{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return tbl, counter, ledger, table
}

// TestWriteUnitsPerLimitedJob bills the writes flow control adds to a job, by DynamoDB's rules:
// a concurrency limit 2 per job (acquire, release), a rate limit 1, both 3; a job denied a slot
// 1 (the refused write); a slot handed over to a waiting job saves a write; a paused kind's jobs
// none (one read per PauseCheck). The limit item's first write also enters the by_status index
// (1 unit, once per item), counted apart.
func TestWriteUnitsPerLimitedJob(t *testing.T) {
	t.Parallel()
	const n = 20
	ctx := context.Background()
	run := func(m *flow.Middleware, clk *clock, id string) error {
		return m.Work(ctx, info(id, "k", nil), func(context.Context) error { return nil })
	}
	for _, tc := range []struct {
		name       string
		conc       []flow.Concurrency
		rates      []flow.Rate
		jobs       func(t *testing.T, m *flow.Middleware, clk *clock)
		tablePer   float64 // write units per job on the table
		index      int     // by_status units in all
		updatesPer float64 // UpdateItem calls per job
	}{
		{"concurrency limit", []flow.Concurrency{{Kind: "k", Limit: 5}}, nil, func(t *testing.T, m *flow.Middleware, clk *clock) {
			for i := range n {
				if err := run(m, clk, "J"+strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
		}, 2, 1, 2},
		{"rate limit", nil, []flow.Rate{{Kind: "k", Limit: 10, Period: time.Second}}, func(t *testing.T, m *flow.Middleware, clk *clock) {
			for i := range n {
				clk.Add(100 * time.Millisecond) // a token is due each time
				if err := run(m, clk, "J"+strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
		}, 1, 1, 1},
		{"both", []flow.Concurrency{{Kind: "k", Limit: 5}}, []flow.Rate{{Kind: "k", Limit: 10, Period: time.Second}}, func(t *testing.T, m *flow.Middleware, clk *clock) {
			for i := range n {
				clk.Add(100 * time.Millisecond)
				if err := run(m, clk, "J"+strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
		}, 3, 2, 3},
		{"denied a slot (limit full)", []flow.Concurrency{{Kind: "k", Limit: 1}}, nil, func(t *testing.T, m *flow.Middleware, clk *clock) {
			inside, leave := make(chan struct{}), make(chan struct{})
			done := make(chan error)
			go func() {
				done <- m.Work(ctx, info("HOLDER", "k", nil), func(context.Context) error { close(inside); <-leave; return nil })
			}()
			<-inside
			for i := range n - 1 {
				var d *jobs.DeferError
				if err := run(m, clk, "J"+strconv.Itoa(i)); !errors.As(err, &d) {
					t.Fatalf("job %d: %v, want deferred", i, err)
				}
			}
			close(leave)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}, (2 + 19.0) / 20, 1, (2 + 19.0) / 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tbl, counter, ledger, _ := metered(t)
			clk := &clock{t: time.Now()}
			m, err := flow.NewMiddleware(flow.Config{Store: tbl, Concurrency: tc.conc, Rates: tc.rates, Now: clk.Now, MaxHold: -1,
				Rand: func(int64) int64 { return 0 }})
			if err != nil {
				t.Fatal(err)
			}
			counter.Reset()
			tc.jobs(t, m, clk)
			table, ix, _ := ledger.Totals()
			calls := counter.Calls()
			perJob := float64(table) / n
			t.Logf("%s: %.2f WRU per job on the table, by_status %d in all; calls %v", tc.name, perJob, ix[idempotency.IndexByStatus], calls)
			if perJob != tc.tablePer || ix[idempotency.IndexByStatus] != tc.index || len(ix) > 1 {
				t.Errorf("write units: %.2f per job, indexes %v; want %.2f per job and by_status %d", perJob, ix, tc.tablePer, tc.index)
			}
			if got := float64(calls["dynamodb.UpdateItem"]) / n; got != tc.updatesPer {
				t.Errorf("UpdateItem calls per job %.2f, want %.2f", got, tc.updatesPer)
			}
		})
	}
}

// TestHandoffSavesAWrite: a job of the process waiting for a full limit's slot gets it from the
// job that ends, in one write instead of a release and an acquisition.
func TestHandoffSavesAWrite(t *testing.T) {
	t.Parallel()
	tbl, counter, ledger, _ := metered(t)
	m, err := flow.NewMiddleware(flow.Config{Store: tbl, Concurrency: []flow.Concurrency{{Kind: "k", Limit: 1}}, MaxHold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	inside, leave := make(chan struct{}), make(chan struct{})
	first := make(chan error)
	go func() {
		first <- m.Work(ctx, info("A", "k", nil), func(context.Context) error { close(inside); <-leave; return nil })
	}()
	<-inside
	second := make(chan error)
	ran := false
	go func() {
		second <- m.Work(ctx, info("B", "k", nil), func(context.Context) error { ran = true; return nil })
	}()
	deadline := time.Now().Add(30 * time.Second)
	for m.Stats().Held == 0 { // B waits in the process
		if time.Now().After(deadline) {
			t.Fatal("B never waited")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	close(leave)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil || !ran {
		t.Fatalf("B: ran %v, %v", ran, err)
	}
	if s := m.Stats(); s.Handoffs != 1 || s.Acquired != 2 || s.Released != 1 {
		t.Errorf("stats %+v; want 1 handoff", s)
	}
	table, _, writes := ledger.Totals()
	// A's acquisition, B's refused one, the handoff, B's release.
	if writes != 4 || table != 4 || counter.Calls()["dynamodb.UpdateItem"] != 4 {
		t.Errorf("%d writes, %d WRU, calls %v; want 4 (acquire, refused, handoff, release)", writes, table, counter.Calls())
	}
}

// TestLimitItemSizes measures a concurrency item's size by DynamoDB's rules (internal/ddbsize) as
// its holders grow: with ULID job ids, up to 24 holders keep it under 1 KB, so every write of a
// limit up to 24 costs 1 write unit; docs/FLOW.md has the table.
func TestLimitItemSizes(t *testing.T) {
	t.Parallel()
	tbl, client, table := newTable(t)
	ctx := context.Background()
	sizes := map[int]int{}
	for i := 1; i <= 100; i++ {
		id := jobs.NewID()
		if res, err := tbl.AcquireSlot(ctx, flow.SlotRequest{Name: "webhook.deliver", Key: "tenant-00042", Limit: 1000, JobID: id,
			LeaseUntil: time.Now().Add(15 * time.Minute), Now: time.Now()}); err != nil || !res.Acquired {
			t.Fatal(res, err)
		}
		switch i {
		case 1, 5, 10, 24, 25, 50, 100:
			sizes[i] = ddbsize.ItemSize(getItem(t, client, table, "$limit#webhook.deliver#tenant-00042"))
		}
	}
	var b strings.Builder
	for _, k := range []int{1, 5, 10, 24, 25, 50, 100} {
		fmt.Fprintf(&b, " %d holders: %d B (%d WRU);", k, sizes[k], ddbsize.Units(sizes[k], 1024))
	}
	t.Log(b.String())
	if sizes[24] > 1024 {
		t.Errorf("24 holders: %d bytes, above 1 KB", sizes[24])
	}
	rate := getItemAfterToken(t, tbl, client, table)
	if s := ddbsize.ItemSize(rate); s > 200 {
		t.Errorf("a rate item is %d bytes, want under 200", s)
	}
}

func getItemAfterToken(t *testing.T, tbl *flow.Table, client *dynamodb.Client, table string) map[string]types.AttributeValue {
	t.Helper()
	if _, err := tbl.TakeToken(context.Background(), flow.TokenRequest{Name: "email.send", Key: "tenant-00042", Limit: 10, Period: time.Second, Burst: 5, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	item := getItem(t, client, table, "$rate#email.send#tenant-00042")
	t.Logf("rate item: %d B", ddbsize.ItemSize(item))
	return item
}

// TestMiddlewareCallsOnlyGetAndUpdate: everything the worker's middleware does (pause reads,
// acquisitions, denials, pruning, handoffs, peeks, renewals, releases, tokens) is GetItem and
// UpdateItem on the table, which the CDK stack's worker role already has (infra/jobqueue's
// TestWorkerGrants): flow control needs no new grant.
func TestMiddlewareCallsOnlyGetAndUpdate(t *testing.T) {
	t.Parallel()
	tbl, counter, _, _ := metered(t)
	m, err := flow.NewMiddleware(flow.Config{Store: tbl, Lease: 3 * time.Second, MaxHold: 2 * time.Second,
		Concurrency: []flow.Concurrency{{Kind: "k", Limit: 1}},
		Rates:       []flow.Rate{{Kind: "k", Limit: 100, Period: time.Second, Burst: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A dead holder to prune.
	if _, err := tbl.AcquireSlot(ctx, flow.SlotRequest{Name: "k", Limit: 1, JobID: "DEAD", LeaseUntil: time.Now().Add(-time.Second), Now: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	inside, leave := make(chan struct{}), make(chan struct{})
	first := make(chan error)
	go func() {
		first <- m.Work(ctx, info("A", "k", nil), func(context.Context) error {
			close(inside)
			<-leave
			time.Sleep(1100 * time.Millisecond) // long enough for a renewal (Lease/3) and a peek
			return nil
		})
	}()
	<-inside
	second := make(chan error)
	go func() { second <- m.Work(ctx, info("B", "k", nil), func(context.Context) error { return nil }) }()
	for m.Stats().Held == 0 {
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	close(leave)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-second
	for op := range counter.Calls() {
		if op != "dynamodb.GetItem" && op != "dynamodb.UpdateItem" {
			t.Errorf("the middleware called %s", op)
		}
	}
	if s := m.Stats(); s.Pruned != 1 {
		t.Errorf("stats %+v; want the dead holder pruned", s)
	}
}
