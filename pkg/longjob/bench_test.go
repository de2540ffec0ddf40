package longjob_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/longjob"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// metered is a job table on the embedded emulator whose every write is billed by a ledger
// (DynamoDB's rules: the item's size before and after, the indexes touched), and the store on it.
type metered struct {
	store  *idempotency.DynamoDBStore
	ledger *awscost.Ledger
}

func newMetered(b *testing.B) *metered {
	b.Helper()
	be := awslocaltest.Backend(b)
	plain := dynamodb.NewFromConfig(be.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table, err := awslocal.ProvisionTable(context.Background(), plain, awslocal.UniqueName("lwu"))
	if err != nil {
		b.Fatal(err)
	}
	ledger := awscost.NewLedger(map[string]awscost.Schema{table: awscost.SchemaFromCreateTable(idempotency.TableInput(table))})
	var mu sync.Mutex
	var failure error
	cfg := be.Config.Copy()
	cfg.HTTPClient = &awscost.Counter{Next: be.Config.HTTPClient, OnWrite: func(w awscost.Write) {
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
	b.Cleanup(func() {
		if failure != nil {
			b.Errorf("ledger: %v", failure)
		}
	})
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: dynamodb.NewFromConfig(cfg,
		func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }), Table: table})
	if err != nil {
		b.Fatal(err)
	}
	return &metered{store: store, ledger: ledger}
}

func (m *metered) units() int { t, _, _ := m.ledger.Totals(); return t }

// BenchmarkCheckpoint measures one jobs.Checkpoint through the idempotency middleware on the
// embedded emulator: its latency and the DynamoDB write units it is billed (one conditional
// UpdateItem, on the item's size), by cursor size; a cursor above 16 KiB goes to S3 (PutObject,
// then the pointer on the record). The baseline in the same run is a lease renewal of the same
// record (Store.Touch without a cursor); "renewal with it" is a renewal of a record that holds
// the cursor: every later write to the record pays for its size. Reported: write units per
// checkpoint (WCU/op), per renewal of the record afterwards (WCU/renewal), and of the job's
// finishing write (WCU/finish).
func BenchmarkCheckpoint(b *testing.B) {
	be := awslocaltest.Backend(b)
	bucket, err := awslocal.ProvisionBucket(context.Background(), be.S3(), awslocal.UniqueName("lcur"))
	if err != nil {
		b.Fatal(err)
	}
	objects, err := payload.New(payload.Config{S3: be.S3(), Bucket: bucket})
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{0, 100, 800, 4 << 10, 16<<10 - 2, 64 << 10} {
		name := "renewal-baseline"
		if size > 0 {
			name = "cursor-" + longjob.Bytes(size+2)
		}
		b.Run(strings.ReplaceAll(name, " ", ""), func(b *testing.B) {
			m := newMetered(b)
			mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: m.store, Cursors: objects, CancelCheck: -1, Logger: logger()})
			if err != nil {
				b.Fatal(err)
			}
			cursor := strings.Repeat("c", size)
			id := jobs.NewID()
			info := &jobs.Info{ID: id, Kind: "bench.long", Key: id, RawArgs: []byte(`{}`), ReceiveCount: 1, MaxAttempts: 5}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			var perOp, renewal, beforeFinish int
			err = mw.Work(ctx, info, func(ctx context.Context) error {
				if size > 0 {
					if err := jobs.Checkpoint(ctx, cursor); err != nil { // the record now holds one
						return err
					}
				}
				token := tokenOf(b, m, info)
				renew := func() error {
					_, err := m.store.Touch(ctx, idempotency.Touch{Kind: info.Kind, Key: info.Key, JobID: id, Token: token,
						LeaseUntil: time.Now().Add(time.Hour)})
					return err
				}
				before := m.units()
				b.ResetTimer()
				for range b.N {
					if size == 0 {
						if err := renew(); err != nil {
							return err
						}
					} else if err := jobs.Checkpoint(ctx, cursor); err != nil {
						return err
					}
				}
				b.StopTimer()
				perOp = (m.units() - before) / b.N
				before = m.units()
				if err := renew(); err != nil {
					return err
				}
				renewal = m.units() - before
				beforeFinish = m.units()
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			finish := m.units() - beforeFinish
			b.ReportMetric(float64(perOp), "WCU/op")
			b.ReportMetric(float64(renewal), "WCU/renewal")
			b.ReportMetric(float64(finish), "WCU/finish")
		})
	}
}

// tokenOf reads the running claim's token (the benchmark renews the middleware's own claim).
func tokenOf(b *testing.B, m *metered, info *jobs.Info) string {
	b.Helper()
	rec, err := m.store.ReadClaim(context.Background(), info.Kind, info.Key, info.ID)
	if err != nil {
		b.Fatal(err)
	}
	return rec.Token
}

// BenchmarkSliceGap measures the gap between two slices of a long job: from the end of a slice
// (the job returned after its slice ended at the invocation's deadline) to the start of the next
// (the job called again), through the whole path — the finishing write, the re-send, the
// acknowledgement, the poller's receive, the claim. The baseline in the same run is a new job's
// latency from its SendMessage to its start. Invocations last 1 s (the poller's
// InvocationTimeout, as a Lambda function's timeout); each slice saves a cursor every 10 ms.
// Reported: p50 and p99 of each, and the AWS calls per continuation.
func BenchmarkSliceGap(b *testing.B) {
	s := newBenchStack(b)
	var (
		mu     sync.Mutex
		starts []time.Time
		ends   []time.Time
		fresh  = map[string]time.Time{} // job id → when its run started (baseline jobs)
	)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[backfillArgs](func(ctx context.Context, job *jobs.Job[backfillArgs]) error {
		now := time.Now()
		mu.Lock()
		starts = append(starts, now)
		mu.Unlock()
		n := 0
		_, _ = jobs.Cursor(ctx, &n)
		for ; n < job.Args.N; n++ {
			if err := jobs.Checkpoint(ctx, n+1); err != nil {
				mu.Lock()
				ends = append(ends, time.Now())
				mu.Unlock()
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}))
	jobs.MustRegister(reg, jobs.WorkFunc[reportArgs](func(ctx context.Context, job *jobs.Job[reportArgs]) error {
		mu.Lock()
		fresh[job.ID] = time.Now()
		mu.Unlock()
		return nil
	}))
	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: s.store, Logger: logger(), AbandonGrace: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	h, err := worker.New(worker.Config{Registry: reg, SQS: s.sqs, QueueURL: s.stack.stack.QueueURL, DLQURL: s.stack.stack.DLQURL,
		Middleware: []worker.Middleware{mw}, DeadlineMargin: 200 * time.Millisecond, SliceGrace: 200 * time.Millisecond,
		AbandonGrace: time.Second, Logger: logger()})
	if err != nil {
		b.Fatal(err)
	}
	p, err := poller.New(poller.Config{SQS: s.sqs, QueueURL: s.stack.stack.QueueURL, Handler: h, InvocationTimeout: time.Second,
		VisibilityTimeout: 20 * time.Second, WaitTime: 20 * time.Second, Logger: logger()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Baseline: new jobs, one at a time, SendMessage → start.
	var base []time.Duration
	for range max(b.N, 20) {
		sent := time.Now()
		res, err := s.prod.Enqueue(ctx, reportArgs{Name: "baseline"})
		if err != nil {
			b.Fatal(err)
		}
		s.waitFor(b, func() bool { mu.Lock(); defer mu.Unlock(); _, ok := fresh[res.ID]; return ok })
		mu.Lock()
		base = append(base, fresh[res.ID].Sub(sent))
		mu.Unlock()
	}

	// The long job: b.N gaps, about 60 checkpoints (0.6 s) per 1 s invocation.
	s.calls.Reset()
	b.ResetTimer()
	res, err := s.prod.Enqueue(ctx, backfillArgs{N: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	s.waitFor(b, func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) > b.N })
	b.StopTimer()
	calls := s.calls.Calls()
	mu.Lock()
	var gaps []time.Duration
	for k := 0; k+1 < len(starts) && k < len(ends); k++ {
		gaps = append(gaps, starts[k+1].Sub(ends[k]))
	}
	slicesRun := len(ends)
	mu.Unlock()
	_ = res
	report(b, "gap", gaps)
	report(b, "baseline", base)
	per := func(op string) float64 { return float64(calls[op]) / float64(slicesRun) }
	b.ReportMetric(per("dynamodb.UpdateItem"), "UpdateItem/slice")
	b.ReportMetric(per("sqs.SendMessageBatch"), "SendMessageBatch/slice")
	b.ReportMetric(per("sqs.ReceiveMessage"), "ReceiveMessage/slice")
	b.ReportMetric(per("sqs.DeleteMessageBatch")+per("sqs.DeleteMessage"), "Delete/slice")
	b.Logf("%d slices; calls %v", slicesRun, calls)
}

// report adds the p50 and p99 of ds as metrics named what-p50-ms and what-p99-ms.
func report(b *testing.B, what string, ds []time.Duration) {
	if len(ds) == 0 {
		b.Fatalf("no %s samples", what)
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), what+"-p50-ms")
	b.ReportMetric(q(0.99), what+"-p99-ms")
	b.Logf("%s: %d samples, p50 %.1f ms, p99 %.1f ms, max %s", what, len(ds), q(0.5), q(0.99), ds[len(ds)-1])
}

// benchStack is a stack whose SQS and DynamoDB clients count their calls.
type benchStack struct {
	*stack
	calls *awscost.Counter
}

func newBenchStack(b *testing.B) *benchStack {
	b.Helper()
	ctx := context.Background()
	be := awslocaltest.Backend(b)
	counter := &awscost.Counter{Next: be.Config.HTTPClient}
	cfg := be.Config.Copy()
	cfg.HTTPClient = counter
	s := &stack{b: be, sqs: sqs.NewFromConfig(cfg), ddb: dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })}
	var err error
	if s.stack, err = awslocal.Provision(ctx, s.sqs, awslocal.StackOptions{Name: awslocal.UniqueName("lgap"), VisibilityTimeout: 20}); err != nil {
		b.Fatal(err)
	}
	if s.table, err = awslocal.ProvisionTable(ctx, s.ddb, s.stack.Name); err != nil {
		b.Fatal(err)
	}
	if s.store, err = idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: s.ddb, Table: s.table}); err != nil {
		b.Fatal(err)
	}
	if s.prod, err = producer.New(producer.Config{SQS: s.sqs, QueueURL: s.stack.QueueURL}); err != nil {
		b.Fatal(err)
	}
	return &benchStack{stack: s, calls: counter}
}

func (s *benchStack) waitFor(b *testing.B, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal(fmt.Sprintf("timed out after %s", 5*time.Minute))
		}
		time.Sleep(time.Millisecond)
	}
}
