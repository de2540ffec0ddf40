package idempotency_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/internal/ddbsize"
	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// costScale compresses time for BenchmarkJobControlCost: every interval of the middleware runs
// costScale times faster than its default (CancelCheck 10 s → 100 ms, ProgressInterval 5 s → 50
// ms, Lease 5 min → 3 s), so that a job running costRun of real time stands for costScale ×
// costRun of a job at the defaults.
const (
	costScale = 100
	costRun   = 3 * time.Second
)

// BenchmarkJobControlCost measures what a running job pays for cancellability and progress:
// the DynamoDB reads and writes (and their units, by DynamoDB's rules from the items' sizes) the
// middleware makes while one job runs, per minute of run time at the default intervals, in
// Lambda mode (a deadline: cancellation checks are reads) and in a container (no deadline: the
// lease renewals are the checks), with and without a job that reports progress continuously;
// the baseline is the same job with the checks off. Claim and finish are left out (every job
// pays them). Run it with:
//
//	go test -run '^$' -bench JobControlCost -benchtime 1x ./pkg/idempotency/
func BenchmarkJobControlCost(b *testing.B) {
	for _, sc := range []struct {
		name     string
		lambda   bool
		checks   bool
		progress bool
	}{
		{"lambda/baseline-checks-off", true, false, false},
		{"lambda/cancellable", true, true, false},
		{"lambda/cancellable+progress", true, true, true},
		{"container/cancellable", false, true, false},
		{"container/cancellable+progress", false, true, true},
	} {
		b.Run(sc.name, func(b *testing.B) {
			for range b.N {
				reads, rru, writes, wru := runControlCost(b, sc.lambda, sc.checks, sc.progress)
				minutes := (costRun * costScale).Minutes()
				b.ReportMetric(float64(reads)/minutes, "reads/min")
				b.ReportMetric(rru/minutes, "RRU/min")
				b.ReportMetric(float64(writes)/minutes, "writes/min")
				b.ReportMetric(float64(wru)/minutes, "WRU/min")
			}
		})
	}
}

// runControlCost runs one job for costRun under the middleware on the emulator and returns the
// reads (GetItem), their read units, the writes (UpdateItem) and their write units made while
// it ran.
func runControlCost(b *testing.B, lambda, checks, progress bool) (reads int, rru float64, writes, wru int) {
	b.Helper()
	ctx := context.Background()
	be := awslocaltest.Backend(b)
	plain := be.DynamoDB()
	table, err := awslocal.ProvisionTable(ctx, plain, awslocal.UniqueName("cost"))
	if err != nil {
		b.Fatal(err)
	}
	ledger := awscost.NewLedger(map[string]awscost.Schema{table: awscost.SchemaFromCreateTable(idempotency.TableInput(table))})
	var (
		mu       sync.Mutex
		counting bool
	)
	cfg := be.Config.Copy()
	counter := &awscost.Counter{Next: be.Config.HTTPClient, OnWrite: func(w awscost.Write) {
		if w.Status != http.StatusOK && !w.ConditionFailed {
			return
		}
		schema, _ := ledger.Schema(w.Table)
		key := schema.Key(w)
		out, err := plain.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(w.Table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			b.Error(err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		c, err := ledger.Record(w.Table, key, out.Item, w.ConditionFailed)
		if err != nil {
			b.Error(err)
		}
		if counting {
			writes++
			wru += c.Total()
		}
	}}
	cfg.HTTPClient = counter
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: client, Table: table})
	if err != nil {
		b.Fatal(err)
	}
	mcfg := idempotency.MiddlewareConfig{Store: store, Lease: idempotency.DefaultLease / costScale,
		CancelCheck: idempotency.DefaultCancelCheck / costScale, ProgressInterval: idempotency.DefaultProgressWrite / costScale}
	if !checks {
		mcfg.CancelCheck = -1
	}
	mw, err := idempotency.NewMiddleware(mcfg)
	if err != nil {
		b.Fatal(err)
	}
	runCtx := ctx
	if lambda {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	id := jobs.NewID()
	info := &jobs.Info{ID: id, Kind: "report.build", Key: id, RawArgs: []byte(`{"month":"2026-11"}`), MaxAttempts: 5, ReceiveCount: 1}
	var itemSize int
	err = mw.Work(runCtx, info, func(ctx context.Context) error {
		mu.Lock()
		counting = true
		mu.Unlock()
		readsBefore := counter.Calls()["dynamodb.GetItem"]
		end := time.Now().Add(costRun)
		for i := 0; time.Now().Before(end); i++ {
			if progress {
				if err := jobs.Progress(ctx, float64(i%100)/100, "page 4 of 10"); err != nil {
					return err
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		counting = false
		mu.Unlock()
		reads = int(counter.Calls()["dynamodb.GetItem"] - readsBefore)
		rec, err := store.ReadClaim(context.Background(), "report.build", id, id)
		if err == nil {
			itemSize = ddbsize.ItemSize(idempotency.ItemFromRecord(rec, idempotency.DefaultShards))
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	// An eventually consistent read is half a read unit per 4 KB started.
	rru = float64(reads) * 0.5 * float64(ddbsize.Units(itemSize, 4096))
	b.Logf("item %d bytes; %d reads, %d writes (%d WRU) in %s at 1/%d of the default intervals", itemSize, reads, writes, wru, costRun, costScale)
	return reads, rru, writes, wru
}
