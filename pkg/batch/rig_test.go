package batch_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/internal/testenv/poll"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Thumb is a batch child: it fails every attempt when Fail is set.
type Thumb struct {
	N    int  `json:"n"`
	Fail bool `json:"fail,omitempty"`
}

func (Thumb) Kind() string { return "test.thumb" }

// ThumbsDone is a batch's callback.
type ThumbsDone struct {
	Album string `json:"album"`
}

func (ThumbsDone) Kind() string { return "test.thumbs_done" }

// Step is a chain's step: it adds Add to the previous step's result, and fails when Fail.
type Step struct {
	Add  int  `json:"add"`
	Fail bool `json:"fail,omitempty"`
}

func (Step) Kind() string { return "test.step" }

// Slow is a child that blocks until its rig's gate opens (a job running during a cancel).
type Slow struct{}

func (Slow) Kind() string { return "test.slow" }

// rig is a job queue on the embedded emulator: queue and DLQ, job table, outbox table and its
// relay (the sweeper, woken by the batch client), a worker with the batch Store, and pollers.
type rig struct {
	t       testing.TB
	ctx     context.Context
	ddb     *dynamodb.Client
	sqs     *sqs.Client
	stack   *awslocal.Stack
	table   string
	obTable string
	ob      *dynamooutbox.Outbox
	client  *batch.Client
	store   *batch.Store
	prod    *producer.Producer
	reg     *jobs.Registry
	status  *status.Table
	wake    chan struct{}
	relay   *dynamooutbox.Runner
	cleanup []func()

	idems   []*idempotency.Middleware
	crashes atomic.Int64 // deletes dropped

	mu        sync.Mutex
	cbStarted map[string]time.Time // batch id → when its callback started
	thumbRuns map[int]int
	callbacks []batch.Summary
	cbRuns    atomic.Int64
	stepSeen  []string     // "step:add:previous"
	failing   map[int]bool // overrides Thumb.Fail (a child fixed before its redrive)
	started   chan struct{}
	gate      chan struct{}
}

type rigOptions struct {
	maxAttempts int
	// ledger, when set, bills every write of the rig's DynamoDB client (both tables).
	ledger *awscost.Ledger
	// noWake leaves the relay to its poll interval (relayPoll): no OnOutbox wake-up.
	noWake    bool
	relayPoll time.Duration
	// dropDeletes is the share of first deletes of each message that are dropped (a crash
	// between the job's finishing write and the delete).
	dropDeletes float64
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	if o.maxAttempts == 0 {
		o.maxAttempts = 2
	}
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	r := &rig{t: t, ctx: ctx, ddb: b.DynamoDB(), sqs: sqs.NewFromConfig(b.Config), wake: make(chan struct{}, 1), thumbRuns: map[int]int{},
		failing: map[int]bool{}, cbStarted: map[string]time.Time{}, started: make(chan struct{}, 16), gate: make(chan struct{})}
	name := awslocal.UniqueName("batch")
	var err error
	if o.ledger != nil {
		r.ddb = meteredClient(t, b, o.ledger)
	}
	r.stack, err = awslocal.Provision(ctx, r.sqs, awslocal.StackOptions{Name: name, MaxReceiveCount: 20, VisibilityTimeout: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.table, err = awslocal.ProvisionTable(ctx, r.ddb, name); err != nil {
		t.Fatal(err)
	}
	obTable := awslocal.OutboxTableName(name)
	r.obTable = obTable
	if _, err := dynamooutbox.CreateTable(ctx, r.ddb, obTable); err != nil {
		t.Fatal(err)
	}
	if o.ledger != nil {
		o.ledger.AddTable(r.table, awscost.SchemaFromCreateTable(idempotency.TableInput(r.table)))
		o.ledger.AddTable(obTable, awscost.SchemaFromCreateTable(dynamooutbox.TableInput(obTable)))
	}
	quiet := slog.New(slog.DiscardHandler)
	if r.ob, err = dynamooutbox.New(dynamooutbox.Config{Client: r.ddb, Table: obTable, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	if r.prod, err = producer.New(producer.Config{SQS: r.sqs, QueueURL: r.stack.QueueURL}); err != nil {
		t.Fatal(err)
	}
	r.reg = jobs.NewRegistry()
	policy := jobs.WithPolicy(jobs.PolicyFunc(func(int) time.Duration { return time.Second }))
	jobs.MustRegister(r.reg, jobs.WorkFunc[Thumb](func(ctx context.Context, j *jobs.Job[Thumb]) error {
		r.mu.Lock()
		r.thumbRuns[j.Args.N]++
		fail, override := r.failing[j.Args.N]
		r.mu.Unlock()
		if !override {
			fail = j.Args.Fail
		}
		if fail {
			return fmt.Errorf("thumb %d fails", j.Args.N)
		}
		return nil
	}), jobs.WithMaxAttempts(o.maxAttempts), policy)
	jobs.MustRegister(r.reg, jobs.WorkFunc[Slow](func(ctx context.Context, j *jobs.Job[Slow]) error {
		r.started <- struct{}{}
		select {
		case <-r.gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	jobs.MustRegister(r.reg, jobs.WorkFunc[ThumbsDone](func(ctx context.Context, j *jobs.Job[ThumbsDone]) error {
		r.cbRuns.Add(1)
		sum, ok := batch.SummaryFrom(ctx)
		if !ok {
			return jobs.Cancel(errors.New("no summary in the callback's context"))
		}
		r.mu.Lock()
		r.callbacks = append(r.callbacks, sum)
		if _, seen := r.cbStarted[sum.Batch]; !seen {
			r.cbStarted[sum.Batch] = time.Now()
		}
		r.mu.Unlock()
		return nil
	}), policy)
	jobs.MustRegister(r.reg, jobs.WorkFunc[Step](func(ctx context.Context, j *jobs.Job[Step]) error {
		prev, ok, err := batch.PreviousResult(ctx, nil)
		if err != nil {
			return err
		}
		sum := 0
		if ok {
			if err := json.Unmarshal(prev, &sum); err != nil {
				return jobs.Cancel(err)
			}
		}
		r.mu.Lock()
		r.stepSeen = append(r.stepSeen, fmt.Sprintf("%s:%d:%d:%v", j.Meta[batch.MetaChainStep], j.Args.Add, sum, ok))
		r.mu.Unlock()
		if j.Args.Fail {
			return fmt.Errorf("step fails")
		}
		out, _ := json.Marshal(sum + j.Args.Add)
		return batch.SetResult(ctx, nil, out)
	}), jobs.WithMaxAttempts(o.maxAttempts), policy)

	onOutbox := func() {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	if o.noWake {
		onOutbox = nil
	}
	if r.client, err = batch.New(batch.Config{Client: r.ddb, Table: r.table, Outbox: r.ob, Registry: r.reg, Logger: quiet,
		OnOutbox: onOutbox}); err != nil {
		t.Fatal(err)
	}
	inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: r.ddb, Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	if r.store, err = r.client.WrapStore(inner); err != nil {
		t.Fatal(err)
	}
	if r.status, err = status.New(status.Config{Client: r.ddb, Table: r.table}); err != nil {
		t.Fatal(err)
	}
	relayProd, err := producer.New(producer.Config{SQS: r.sqs, QueueURL: r.stack.QueueURL})
	if err != nil {
		t.Fatal(err)
	}
	if r.relay, err = dynamooutbox.NewRunner(dynamooutbox.RunnerConfig{Outbox: r.ob, Producers: []*producer.Producer{relayProd},
		ID: name, Relay: outbox.RelayConfig{PollInterval: cmp.Or(o.relayPoll, 500*time.Millisecond), Wake: r.wake}, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs the relay and n pollers, each with its own worker and middleware, until the test
// ends. dropDeletes drops that share of each message's first delete.
func (r *rig) start(n int, dropDeletes float64) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.relay.Run(ctx) })
	quiet := slog.New(slog.DiscardHandler)
	dropped := &sync.Map{}
	for range n {
		idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: r.store, Lease: 5 * time.Second, Logger: quiet})
		if err != nil {
			r.t.Fatal(err)
		}
		r.idems = append(r.idems, idem)
		h, err := worker.New(worker.Config{Registry: r.reg, SQS: r.sqs, QueueURL: r.stack.QueueURL, DLQURL: r.stack.DLQURL,
			Middleware: []worker.Middleware{idem}, Logger: quiet})
		if err != nil {
			r.t.Fatal(err)
		}
		var client poller.SQSAPI = r.sqs
		if dropDeletes > 0 {
			client = &crashingSQS{Client: r.sqs, share: dropDeletes, dropped: dropped, n: &r.crashes}
		}
		p, err := poller.New(poller.Config{SQS: client, QueueURL: r.stack.QueueURL, Handler: h, BatchSize: 10, Concurrency: 4,
			WaitTime: time.Second, VisibilityTimeout: 2 * time.Second, Logger: quiet})
		if err != nil {
			r.t.Fatal(err)
		}
		wg.Go(func() { _ = p.Run(ctx) })
	}
	r.t.Cleanup(func() { cancel(); wg.Wait() })
}

// crashingSQS drops a share of the first delete of each message: the message comes back after
// its visibility timeout, as after a worker that crashed between the job's finishing write and
// the delete.
type crashingSQS struct {
	*sqs.Client
	share   float64
	dropped *sync.Map // receipt handle → true once its delete was decided
	n       *atomic.Int64
}

func (c *crashingSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	var keep []sqstypes.DeleteMessageBatchRequestEntry
	var ok []sqstypes.DeleteMessageBatchResultEntry
	for _, e := range in.Entries {
		if _, seen := c.dropped.LoadOrStore(aws.ToString(e.ReceiptHandle), true); !seen && rand.Float64() < c.share {
			c.n.Add(1)
			ok = append(ok, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id}) // "deleted", but it was not
			continue
		}
		keep = append(keep, e)
	}
	out := &sqs.DeleteMessageBatchOutput{Successful: ok}
	if len(keep) == 0 {
		return out, nil
	}
	in2 := *in
	in2.Entries = keep
	res, err := c.Client.DeleteMessageBatch(ctx, &in2, opts...)
	if err != nil {
		return nil, err
	}
	res.Successful = append(res.Successful, ok...)
	return res, nil
}

// thumbs prepares n children, the ones for which fail(i) holds failing every attempt.
func (r *rig) thumbs(n int, fail func(i int) bool) []producer.Message {
	r.t.Helper()
	out := make([]producer.Message, n)
	for i := range out {
		m, err := r.prod.Prepare(r.ctx, Thumb{N: i, Fail: fail(i)})
		if err != nil {
			r.t.Fatal(err)
		}
		out[i] = m
	}
	return out
}

// send sends messages (already tagged) with the rig's producer.
func (r *rig) send(msgs ...producer.Message) {
	r.t.Helper()
	res, err := r.prod.Send(r.ctx, msgs)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, x := range res {
		if x.Err != nil {
			r.t.Fatal(x.Err)
		}
	}
}

func (r *rig) callback(album string) *producer.Message {
	r.t.Helper()
	m, err := r.prod.Prepare(r.ctx, ThumbsDone{Album: album})
	if err != nil {
		r.t.Fatal(err)
	}
	return &m
}

// waitFor polls cond until it holds or the deadline passes.
func (r *rig) waitFor(what string, deadline time.Duration, cond func() bool) {
	r.t.Helper()
	poll.Until(r.t, deadline, what, cond)
}

func (r *rig) info(id string) batch.Info {
	r.t.Helper()
	d, err := r.client.Get(r.ctx, id, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return d.Info
}

// duplicates returns the deliveries the middleware acknowledged without running (the job had
// succeeded already).
func (r *rig) duplicates() int64 {
	var n int64
	for _, m := range r.idems {
		n += m.Stats().Duplicates
	}
	return n
}

func (r *rig) runs(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.thumbRuns[n]
}

func (r *rig) summaries() []batch.Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]batch.Summary(nil), r.callbacks...)
}

// meteredClient returns a DynamoDB client on the backend whose every write (transactions
// included) is billed by ledger, by DynamoDB's rules, from the item before (the ledger's image)
// and after it (a strongly consistent read); the emulator reports no consumed capacity. Its
// writes are sent one at a time, each billed before the next is sent (serialWrites).
func meteredClient(t testing.TB, b *awslocal.Backend, ledger *awscost.Ledger) *dynamodb.Client {
	plain := b.DynamoDB()
	var mu sync.Mutex
	var failure error
	cfg := b.Config.Copy()
	cfg.HTTPClient = &serialWrites{next: &awscost.Counter{Next: b.Config.HTTPClient, OnWrite: func(w awscost.Write) {
		if w.Status != 200 && !w.ConditionFailed {
			return
		}
		schema, ok := ledger.Schema(w.Table)
		if !ok {
			return // a table the ledger does not bill (the test's own)
		}
		key := schema.Key(w)
		out, err := plain.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.Table), Key: key, ConsistentRead: aws.Bool(true)})
		if err == nil {
			if w.Transactional {
				_, err = ledger.RecordTransactional(w.Table, key, out.Item, w.ConditionFailed)
			} else {
				_, err = ledger.Record(w.Table, key, out.Item, w.ConditionFailed)
			}
		}
		if err != nil {
			mu.Lock()
			failure = errors.Join(failure, err)
			mu.Unlock()
		}
	}}}
	t.Cleanup(func() {
		if failure != nil {
			t.Errorf("ledger: %v", failure)
		}
	})
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
}

// serialWrites sends DynamoDB writes through a metering Counter one at a time: a write is
// applied, read back and billed before the next write is sent. The ledger bills a write on the
// image the previous write of its item left, so it must record the writes of an item in the order
// DynamoDB applied them, and read each one's result before another write changes it. Without
// this, a write of another goroutine could slip in between: the relay claiming an outbox item
// that a transaction has put but the Counter has not billed yet, or two writes of one item
// applied before the first one's read. Reads are not held up.
type serialWrites struct {
	mu   sync.Mutex
	next *awscost.Counter
}

func (s *serialWrites) Do(req *http.Request) (*http.Response, error) {
	svc, op, _ := strings.Cut(req.Header.Get("X-Amz-Target"), ".")
	if strings.HasPrefix(svc, "DynamoDB_") {
		switch op {
		case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems": // the writes the Counter bills
			s.mu.Lock()
			defer s.mu.Unlock()
		}
	}
	return s.next.Do(req)
}
