package dynamooutbox_test

// What must hold of the DynamoDB outbox, against the embedded emulator (DynamoDB and SQS). No
// test waits for time to pass: clocks are injected, and waits poll a condition.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/ddbtable"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/ddbstream"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

type emailArgs struct {
	Order string `json:"order"`
	N     int    `json:"n,omitempty"`
}

func (emailArgs) Kind() string { return "email.send" }

// env is one isolated system on the emulator: a queue (standard or FIFO) and its DLQ, a job
// table, an outbox table, a producer and the business table "orders".
type env struct {
	t      *testing.T
	ctx    context.Context
	b      *awslocal.Backend
	ddb    *dynamodb.Client
	sqs    *sqs.Client
	stack  *awslocal.Stack
	jobs   string // the job table
	orders string // the business table
	ob     *dynamooutbox.Outbox
	prod   *producer.Producer
	status *status.Table
}

func newEnv(t *testing.T, fifo bool, cfg dynamooutbox.Config) *env {
	t.Helper()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	e := &env{t: t, ctx: ctx, b: b, ddb: b.DynamoDB(), sqs: sqs.NewFromConfig(b.Config)}
	name := awslocal.UniqueName("ob")
	var err error
	if e.stack, err = awslocal.Provision(ctx, e.sqs, awslocal.StackOptions{Name: name, FIFO: fifo}); err != nil {
		t.Fatal(err)
	}
	if e.jobs, err = awslocal.ProvisionTable(ctx, e.ddb, name); err != nil {
		t.Fatal(err)
	}
	e.orders = name + "-orders"
	if _, err := ddbtable.Create(ctx, e.ddb, &dynamodb.CreateTableInput{
		TableName: aws.String(e.orders), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	}, ddbtable.Wait{}); err != nil {
		t.Fatal(err)
	}
	if e.status, err = status.New(status.Config{Client: e.ddb, Table: e.jobs}); err != nil {
		t.Fatal(err)
	}
	if cfg.Status == nil {
		cfg.Status = e.status
	} else if _, off := cfg.Status.(noStatus); off {
		cfg.Status = nil
	}
	cfg.Client = e.ddb
	cfg.Table = newTable(t, e.ddb)
	cfg.Logger = quiet()
	if e.ob, err = dynamooutbox.New(cfg); err != nil {
		t.Fatal(err)
	}
	if e.prod, err = producer.New(producer.Config{SQS: e.sqs, QueueURL: e.stack.QueueURL}); err != nil {
		t.Fatal(err)
	}
	return e
}

// orderPut is the business write: a new order, refused if the order exists.
func (e *env) orderPut(id string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName:           aws.String(e.orders),
		Item:                map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	}}
}

// placeOrder commits the order and its jobs in one transaction.
func (e *env) placeOrder(id string, jobs ...dynamooutbox.Job) error {
	_, err := e.ob.Transact(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{e.orderPut(id)}}, jobs...)
	return err
}

func (e *env) job(args jobs.Args, opts ...producer.Option) dynamooutbox.Job {
	e.t.Helper()
	j, err := e.ob.Prepare(e.ctx, e.prod, args, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// relay returns a sweeper relay over the env's outbox (clock now, when set).
func (e *env) relay(id string, now func() time.Time, api producer.SQSAPI, cfg outbox.RelayConfig) *outbox.Relay {
	e.t.Helper()
	if api == nil {
		api = e.sqs
	}
	p, err := producer.New(producer.Config{SQS: api, QueueURL: e.stack.QueueURL, MaxRetries: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.Store, cfg.Producers, cfg.ID, cfg.Now, cfg.Logger = e.ob, []*producer.Producer{p}, id, now, quiet()
	r, err := outbox.NewRelay(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// queued returns how many messages the queue holds (visible or not).
func (e *env) queued() int {
	e.t.Helper()
	out, err := e.sqs.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(e.stack.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		var k int
		fmt.Sscan(v, &k)
		n += k
	}
	return n
}

// drainQueue receives every message until want arrived (or the deadline) and returns the job
// ids in arrival order, deleting them.
func (e *env) drainQueue(want int) []jobs.Envelope {
	e.t.Helper()
	var got []jobs.Envelope
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.stack.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600})
		if err != nil {
			e.t.Fatal(err)
		}
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				e.t.Fatal(err)
			}
			got = append(got, env)
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(del) > 0 {
			if _, err := e.sqs.DeleteMessageBatch(e.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(e.stack.QueueURL), Entries: del}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return got
}

func (e *env) pending() []outbox.Entry {
	e.t.Helper()
	p, err := e.ob.List(e.ctx, outbox.ListQuery{State: outbox.StatePending, Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Entries
}

// A transaction whose business condition fails leaves no outbox item and no status record, and
// the relay finds nothing to send.
func TestEmulatorFailedTransactionEnqueuesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, dynamooutbox.Config{})
	ok := e.job(emailArgs{Order: "order-1"}, producer.WithKey("order-1-email"))
	if err := e.placeOrder("order-1", ok); err != nil {
		t.Fatal(err)
	}
	// The same order again: its condition fails, and so does the whole transaction.
	dup := e.job(emailArgs{Order: "order-1"}, producer.WithKey("order-1-email-again"))
	err := e.placeOrder("order-1", dup)
	var te *dynamooutbox.TransactionError
	if !errors.As(err, &te) || !te.ConditionFailed(0) || len(te.Failed()) != 1 || !strings.Contains(err.Error(), "table "+e.orders) {
		t.Fatalf("second order: %v; want a TransactionError naming the order's condition", err)
	}
	if _, err := e.ob.Get(e.ctx, dup.ID()); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("the failed transaction's job is in the outbox: %v", err)
	}
	if _, err := e.status.Get(e.ctx, "email.send", "order-1-email-again"); !errors.Is(err, status.ErrNotFound) {
		t.Errorf("the failed transaction's job has a status record: %v", err)
	}
	if j, err := e.status.Get(e.ctx, "email.send", "order-1-email"); err != nil || j.State != idempotency.StateQueued || j.JobID != ok.ID() {
		t.Errorf("the committed job's status: %+v, %v; want queued", j, err)
	}
	st, err := e.relay("r", nil, nil, outbox.RelayConfig{}).Drain(e.ctx)
	if err != nil || st.Sent != 1 || st.Claimed != 1 {
		t.Fatalf("relay: %+v, %v; want the committed job alone sent", st, err)
	}
	got := e.drainQueue(1)
	if len(got) != 1 || got[0].ID != ok.ID() {
		t.Errorf("queue holds %v, want only %s", got, ok.ID())
	}
	if n := e.queued(); n != 0 {
		t.Errorf("%d more messages in the queue", n)
	}
}

// killedStore is an outbox whose write-back never happens: the relay was killed after SQS
// accepted the messages.
type killedStore struct{ outbox.Store }

func (killedStore) Complete(context.Context, string, []outbox.Outcome) error {
	return errors.New("relay killed before the write-back")
}

// A committed job reaches the queue even when its relay dies between the send and the
// write-back: once the lease ends the sweeper sends it again, with the same job id, and the
// worker's idempotency runs its side effect once.
func TestEmulatorRelayKilledAfterSendRunsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, dynamooutbox.Config{})
	j := e.job(emailArgs{Order: "order-7"}, producer.WithKey("order-7-email"))
	if err := e.placeOrder("order-7", j); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p, _ := producer.New(producer.Config{SQS: e.sqs, QueueURL: e.stack.QueueURL})
	r1, _ := outbox.NewRelay(outbox.RelayConfig{Store: killedStore{e.ob}, Producers: []*producer.Producer{p}, ID: "killed", Lease: time.Minute,
		Now: func() time.Time { return now }, Logger: quiet()})
	if _, err := r1.RunOnce(e.ctx); err == nil {
		t.Fatal("the killed relay's pass did not fail")
	}
	// Inside the lease nobody takes it; after it, the sweeper does.
	sweeper := e.relay("sweeper", func() time.Time { return now.Add(59 * time.Second) }, nil, outbox.RelayConfig{})
	if st, _ := sweeper.Drain(e.ctx); st.Claimed != 0 {
		t.Fatalf("claimed inside the lease: %+v", st)
	}
	sweeper = e.relay("sweeper", func() time.Time { return now.Add(time.Minute) }, nil, outbox.RelayConfig{})
	if st, err := sweeper.Drain(e.ctx); err != nil || st.Sent != 1 {
		t.Fatalf("sweeper after the lease: %+v, %v", st, err)
	}
	if len(e.pending()) != 0 {
		t.Errorf("the job is still in the outbox after the sweeper sent it")
	}
	// Two copies of one job in the queue; the worker runs it once.
	var runs atomic.Int64
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[emailArgs](func(context.Context, *jobs.Job[emailArgs]) error {
		runs.Add(1)
		return nil
	}))
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: e.ddb, Table: e.jobs})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var outcomes sync.Map
	var settled atomic.Int64
	h, err := worker.New(worker.Config{Registry: reg, SQS: e.sqs, QueueURL: e.stack.QueueURL, DLQURL: e.stack.DLQURL, Logger: quiet(),
		Middleware: []worker.Middleware{mw}, OnBatch: func(_ context.Context, os []worker.Outcome) {
			for _, o := range os {
				if o.JobID != j.ID() {
					t.Errorf("the worker got job %s, want %s", o.JobID, j.ID())
				}
				outcomes.Store(o.MessageID, o.Outcome)
				if !o.Failed {
					settled.Add(1)
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	// One message per batch: the copies then run one after the other, and the second finds the
	// first's succeeded record. (In one batch the second would find the first still running and
	// wait out its 5-minute lease: right, but longer than this test.)
	pl, err := poller.New(poller.Config{SQS: e.sqs, QueueURL: e.stack.QueueURL, Handler: h, WaitTime: time.Second, BatchSize: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for settled.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if settled.Load() != 2 || runs.Load() != 1 {
		t.Errorf("%d deliveries settled, the job ran %d times; want 2 deliveries and 1 run", settled.Load(), runs.Load())
	}
	rec, err := e.status.Get(e.ctx, "email.send", "order-7-email")
	if err != nil || rec.State != idempotency.StateSucceeded || rec.Runs != 1 {
		t.Errorf("status %+v, %v; want succeeded after 1 run", rec, err)
	}
}

// countingSQS counts the messages SQS accepted, by job id.
type countingSQS struct {
	producer.SQSAPI
	mu   sync.Mutex
	sent map[string]int
	// reject, when set, fails the entries whose body it returns true for.
	reject func(body string) bool
}

func (c *countingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var pass []sqstypes.SendMessageBatchRequestEntry
	var failed []sqstypes.BatchResultErrorEntry
	for _, en := range in.Entries {
		if c.reject != nil && c.reject(aws.ToString(en.MessageBody)) {
			failed = append(failed, sqstypes.BatchResultErrorEntry{Id: en.Id, Code: aws.String("InvalidMessageContents"), Message: aws.String("rejected by the test"), SenderFault: true})
			continue
		}
		pass = append(pass, en)
	}
	out := &sqs.SendMessageBatchOutput{Failed: failed}
	if len(pass) > 0 {
		cp := *in
		cp.Entries = pass
		res, err := c.SQSAPI.SendMessageBatch(ctx, &cp, opts...)
		if err != nil {
			return nil, err
		}
		out.Successful = res.Successful
		out.Failed = append(out.Failed, res.Failed...)
		c.mu.Lock()
		if c.sent == nil {
			c.sent = map[string]int{}
		}
		ok := map[string]bool{}
		for _, s := range res.Successful {
			ok[aws.ToString(s.Id)] = true
		}
		for _, en := range pass {
			if ok[aws.ToString(en.Id)] {
				env, _ := jobs.ParseEnvelope(aws.ToString(en.MessageBody))
				c.sent[env.ID]++
			}
		}
		c.mu.Unlock()
	}
	return out, nil
}

func (c *countingSQS) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.sent))
	for k, v := range c.sent {
		out[k] = v
	}
	return out
}

// The stream relay (fed by the local stream poller) and a sweeper race over 1,000 jobs: each is
// sent exactly once, counted at SQS and in the queue, and both paths sent some (counted by what
// each reports: StreamRelayConfig.OnBatch, RelayConfig.OnPass), n in all. The emulator's transactions emit no stream
// records (docs/OUTBOX.md), so the jobs' outbox items are written here with PutItem, the item the
// transaction would write: the stream then carries what it carries on AWS.
func TestEmulatorStreamRelayAndSweeperRace(t *testing.T) {
	t.Parallel()
	const n = 1000
	e := newEnv(t, false, dynamooutbox.Config{Status: noStatus{}})
	api := &countingSQS{SQSAPI: e.sqs}
	lease := 10 * time.Minute // longer than any pass: only the claim decides
	var streamSent, sweepSent atomic.Int64
	streamRelay := e.relay("stream", nil, api, outbox.RelayConfig{Lease: lease})
	sr, err := dynamooutbox.NewStreamRelay(dynamooutbox.StreamRelayConfig{Outbox: e.ob, Relay: streamRelay, Lease: lease, Logger: quiet(),
		OnBatch: func(st outbox.Stats) { streamSent.Add(int64(st.Sent)) }})
	if err != nil {
		t.Fatal(err)
	}
	dt, err := e.ddb.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(e.ob.Table())})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ddbstream.New(ddbstream.Config{Streams: dynamodbstreams.NewFromConfig(e.b.Config), StreamARN: aws.ToString(dt.Table.LatestStreamArn),
		Handler: sr, Filter: ddbstream.InsertsOnly, ReportBatchItemFailures: true, BisectBatchOnFunctionError: true, MaximumRetryAttempts: 3,
		PollInterval: 5 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	sweeper := e.relay("sweeper", nil, api, outbox.RelayConfig{Lease: lease, BatchSize: 25, PollInterval: time.Millisecond,
		OnPass: func(st outbox.Stats) { sweepSent.Add(int64(st.Sent)) }})
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sp.Run(ctx) })
	wg.Go(func() { sweeper.Run(ctx) })
	ids := map[string]bool{}
	var mu sync.Mutex
	var pw sync.WaitGroup
	for w := range 4 { // four writers
		pw.Go(func() {
			for i := w; i < n; i += 4 {
				j, err := e.ob.Prepare(e.ctx, e.prod, emailArgs{Order: "race", N: i})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := e.ddb.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: j.Items[0].Put.TableName, Item: j.Items[0].Put.Item}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids[j.ID()] = true
				mu.Unlock()
			}
		})
	}
	pw.Wait()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if len(api.counts()) == n {
			if p, err := e.ob.List(e.ctx, outbox.ListQuery{State: outbox.StatePending, Limit: 1}); err == nil && len(p.Entries) == 0 {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	counts := api.counts()
	if len(counts) != n {
		t.Fatalf("%d of %d jobs sent", len(counts), n)
	}
	for id, c := range counts {
		if c != 1 || !ids[id] {
			t.Errorf("job %s sent %d times (ours: %v)", id, c, ids[id])
		}
	}
	st := sp.Stats()
	if st.Invocations == 0 {
		t.Errorf("the stream relay was never invoked: %+v", st)
	}
	if s, w := streamSent.Load(), sweepSent.Load(); s == 0 || w == 0 || s+w != n {
		t.Errorf("the stream relay sent %d and the sweeper %d: want both > 0, %d in all", s, w, n)
	}
	got := e.drainQueue(n)
	seen := map[string]int{}
	for _, env := range got {
		seen[env.ID]++
	}
	if len(seen) != n || len(got) != n {
		t.Errorf("queue: %d messages of %d distinct jobs, want %d of %d", len(got), len(seen), n, n)
	}
	t.Logf("stream poller: %+v; sent by the stream relay %d, by the sweeper %d", st, streamSent.Load(), sweepSent.Load())
}

// noStatus, as newEnv's Config.Status, means no status records (newEnv's default is the env's
// job table).
type noStatus struct{}

func (noStatus) EnqueuedWrite(string, string, string, string, time.Time) (types.TransactWriteItem, error) {
	return types.TransactWriteItem{}, errors.New("not used")
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b strings.Builder
	w := gzipWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// Poison items — written by other code into the table — end dead with their error after
// MaxAttempts, and hold nothing up: the good jobs committed before and after them are sent on
// the first pass.
func TestEmulatorPoisonItemsDieAndBlockNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, dynamooutbox.Config{Status: noStatus{}})
	first := e.job(emailArgs{Order: "before"})
	if err := e.placeOrder("o-before", first); err != nil {
		t.Fatal(err)
	}
	// Three poisons, each a job item altered the way a foreign writer might.
	big := `{"v":1,"id":"ID","kind":"email.send","args":{"blob":"` + strings.Repeat("x", 1_045_000) + `"}}`
	poisons := map[string]func(id string, item map[string]types.AttributeValue){
		// Over SQS's limit once decompressed, though the item is small: the producer refuses it.
		"over the message limit": func(id string, item map[string]types.AttributeValue) {
			delete(item, dynamooutbox.AttrBody)
			item[dynamooutbox.AttrBodyGzip] = &types.AttributeValueMemberB{Value: gz(t, strings.Replace(big, "ID", id, 1))}
		},
		// Over 1 MiB once decompressed: not even read out (a decompression bomb stops there).
		"over 1 MiB decompressed": func(id string, item map[string]types.AttributeValue) {
			delete(item, dynamooutbox.AttrBody)
			item[dynamooutbox.AttrBodyGzip] = &types.AttributeValueMemberB{Value: gz(t, strings.Repeat("y", 2<<20))}
		},
		// A body of the wrong type.
		"a number for a body": func(id string, item map[string]types.AttributeValue) {
			item[dynamooutbox.AttrBody] = &types.AttributeValueMemberN{Value: "42"}
		},
	}
	// Four more whose relay state is unreadable: they can be neither claimed nor counted, so
	// they die on the first pass, unsent.
	broken := map[string]func(id string, item map[string]types.AttributeValue){
		"a string for available_at": func(_ string, item map[string]types.AttributeValue) {
			item[dynamooutbox.AttrAvailableAt] = &types.AttributeValueMemberS{Value: "soon"}
		},
		"no available_at": func(_ string, item map[string]types.AttributeValue) { delete(item, dynamooutbox.AttrAvailableAt) },
		"a string for created_at": func(_ string, item map[string]types.AttributeValue) {
			item[dynamooutbox.AttrCreatedAt] = &types.AttributeValueMemberS{Value: "yesterday"}
		},
		"a string for attempts": func(_ string, item map[string]types.AttributeValue) {
			item[dynamooutbox.AttrAttempts] = &types.AttributeValueMemberS{Value: "none"}
		},
	}
	wantErr := map[string]string{
		"over the message limit":    "above the limit of 1040384 bytes",
		"over 1 MiB decompressed":   "over 1048576 bytes once decompressed",
		"a number for a body":       "attribute body is a number, want a string",
		"a string for available_at": "attribute available_at is a string, want a number",
		"no available_at":           "attribute available_at is missing",
		"a string for created_at":   "attribute created_at is a string, want a number",
		"a string for attempts":     "attribute attempts is a string, want a number",
	}
	for name, alter := range broken {
		poisons[name] = alter
	}
	ids := map[string]string{}
	for name, alter := range poisons {
		j := e.job(emailArgs{Order: name})
		item := j.Items[0].Put.Item
		alter(j.ID(), item)
		if _, err := e.ddb.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.ob.Table()), Item: item}); err != nil {
			t.Fatal(err)
		}
		ids[name] = j.ID()
	}
	last := e.job(emailArgs{Order: "after"})
	if err := e.placeOrder("o-after", last); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	r := e.relay("r", clk.Now, nil, outbox.RelayConfig{MaxAttempts: 3, Backoff: jobs.PolicyFunc(func(int) time.Duration { return time.Second })})
	st, err := r.RunOnce(e.ctx)
	if err != nil || st.Sent != 2 || st.Failed != 3 {
		t.Fatalf("first pass %+v, %v: want both good jobs sent, the 3 poisons failed (the 4 unreadable ones dead already)", st, err)
	}
	for name := range broken {
		en, err := e.ob.Get(e.ctx, ids[name])
		if err != nil || en.State != outbox.StateDead || !strings.Contains(en.LastError, wantErr[name]) {
			t.Errorf("%s after the first pass: %+v, %v; want dead with %q", name, en.State, err, wantErr[name])
			t.Logf("last error: %s", en.LastError)
		}
	}
	got := e.drainQueue(2)
	if len(got) != 2 || !(got[0].ID == first.ID() && got[1].ID == last.ID() || got[1].ID == first.ID() && got[0].ID == last.ID()) {
		t.Errorf("queue holds %v, want the two good jobs", got)
	}
	for pass := 2; pass <= 3; pass++ {
		clk.Add(time.Second)
		st, err := r.RunOnce(e.ctx)
		want := outbox.Stats{Claimed: 3, Failed: 3, Passes: 1}
		if pass == 3 {
			want = outbox.Stats{Claimed: 3, Dead: 3, Passes: 1}
		}
		if err != nil || st != want {
			t.Fatalf("pass %d: %+v, %v; want %+v", pass, st, err, want)
		}
	}
	for name, id := range ids {
		if broken[name] != nil {
			continue // checked after the first pass
		}
		en, err := e.ob.Get(e.ctx, id)
		if err != nil || en.State != outbox.StateDead || en.Attempts != 3 || !strings.Contains(en.LastError, wantErr[name]) {
			t.Errorf("%s: %+v, %v; want dead after 3 attempts with %q", name, en.State, err, wantErr[name])
			t.Logf("last error: %s", en.LastError)
		}
	}
	dead, err := e.ob.List(e.ctx, outbox.ListQuery{State: outbox.StateDead})
	if err != nil || len(dead.Entries) != len(poisons) {
		t.Errorf("dead list: %d entries, %v; want %d", len(dead.Entries), err, len(poisons))
	}
	if n, err := e.ob.CountDead(e.ctx); err != nil || n != len(poisons) {
		t.Errorf("CountDead = %d, %v; want %d", n, err, len(poisons))
	}
	if p := e.pending(); len(p) != 0 {
		t.Errorf("%d items still pending", len(p))
	}
	clk.Add(time.Hour)
	if st, _ := r.Drain(e.ctx); st.Claimed != 0 {
		t.Errorf("dead items were claimed again: %+v", st)
	}
	if n := e.queued(); n != 0 {
		t.Errorf("%d messages in the queue: a poison was sent", n)
	}
}

// FIFO: the jobs of one message group reach the queue in commit order, however the relays race;
// a group whose head keeps failing holds up only itself.
func TestEmulatorFIFOGroupsInCommitOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, dynamooutbox.Config{})
	var rejectA1 atomic.Int64
	rejectA1.Store(2) // the first two sends of A1 are refused
	var a1 string
	api := &countingSQS{SQSAPI: e.sqs, reject: func(body string) bool {
		return a1 != "" && strings.Contains(body, a1) && rejectA1.Add(-1) >= 0
	}}
	const per = 4
	order := map[string][]string{}
	for i := range per {
		var tx []dynamooutbox.Job
		for _, g := range []string{"A", "B", "C"} {
			j := e.job(emailArgs{Order: g, N: i}, producer.WithGroupID(g))
			order[g] = append(order[g], j.ID())
			tx = append(tx, j)
		}
		if err := e.placeOrder(fmt.Sprintf("o%d", i), tx...); err != nil {
			t.Fatal(err)
		}
	}
	a1 = order["A"][0]
	clk := &clock{now: time.Now()}
	cfg := outbox.RelayConfig{BatchSize: 3, Backoff: jobs.PolicyFunc(func(int) time.Duration { return time.Second })}
	r1, r2 := e.relay("r1", clk.Now, api, cfg), e.relay("r2", clk.Now, api, cfg)
	// First round, the relays racing: B and C go out whole; A is stuck behind A1.
	var wg sync.WaitGroup
	for _, r := range []*outbox.Relay{r1, r2} {
		wg.Go(func() {
			if _, err := r.Drain(e.ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	counts := api.counts()
	for _, g := range []string{"B", "C"} {
		for _, id := range order[g] {
			if counts[id] != 1 {
				t.Errorf("group %s job %s sent %d times while A1 failed; want once", g, id, counts[id])
			}
		}
	}
	for _, id := range order["A"] {
		if counts[id] != 0 {
			t.Errorf("job %s of group A was sent while A1 had failed", id)
		}
	}
	for round := 0; len(e.pending()) > 0; round++ {
		if round == 10 {
			t.Fatalf("still pending after 10 rounds: %d", len(e.pending()))
		}
		clk.Add(time.Second)
		for _, r := range []*outbox.Relay{r1, r2} {
			wg.Go(func() {
				if _, err := r.Drain(e.ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	got := map[string][]string{}
	for _, env := range e.drainQueue(3 * per) {
		var a emailArgs
		if err := jsonUnmarshal(env.Args, &a); err != nil {
			t.Fatal(err)
		}
		got[a.Order] = append(got[a.Order], env.ID)
	}
	for _, g := range []string{"A", "B", "C"} {
		if strings.Join(got[g], ",") != strings.Join(order[g], ",") {
			t.Errorf("group %s arrived as %v, committed as %v", g, got[g], order[g])
		}
	}
	for id, c := range api.counts() {
		if c != 1 {
			t.Errorf("job %s sent %d times", id, c)
		}
	}
}

// An unreadable item at the head of a FIFO group dies at once and no longer holds the group,
// through the sweeper and through the stream (whose record brings the group's read). (A
// standard item's attempts is not in the index the sweeper reads: its claim finds out, on AWS by
// a ValidationException, which TestEmulatorEveryCallKeepsTheConnection plays.)
func TestEmulatorUnreadableFIFOHeadDiesAndFreesItsGroup(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"sweeper", "stream"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, true, dynamooutbox.Config{Status: noStatus{}})
			head := e.job(emailArgs{Order: "head"}, producer.WithGroupID("g"))
			next := e.job(emailArgs{Order: "next"}, producer.WithGroupID("g"))
			if err := e.placeOrder("o", head, next); err != nil {
				t.Fatal(err)
			}
			// The head's attempts rewritten by other code.
			if _, err := e.ddb.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(e.ob.Table()), Key: map[string]types.AttributeValue{
				dynamooutbox.AttrPK: head.Items[0].Put.Item[dynamooutbox.AttrPK], dynamooutbox.AttrSK: head.Items[0].Put.Item[dynamooutbox.AttrSK]},
				UpdateExpression:          aws.String("SET attempts = :s"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "lots"}},
			}); err != nil {
				t.Fatal(err)
			}
			rig := e.streamRig(dynamooutbox.StreamRelayConfig{}, time.Now)
			switch path {
			case "stream":
				if resp, err := rig.sr.HandleDynamoDB(e.ctx, streamEvent(next)); err != nil || len(resp.BatchItemFailures) != 0 {
					t.Fatalf("HandleDynamoDB: %+v, %v", resp, err)
				}
			default:
				ob, _ := dynamooutbox.New(dynamooutbox.Config{Client: rig.probe, Table: e.ob.Table(), Logger: quiet()})
				p, _ := producer.New(producer.Config{SQS: rig.api, QueueURL: e.stack.QueueURL})
				r, _ := outbox.NewRelay(outbox.RelayConfig{Store: ob, Producers: []*producer.Producer{p}, ID: "sweeper", Logger: quiet()})
				if st, err := r.RunOnce(e.ctx); err != nil || st.Sent != 1 {
					t.Fatalf("sweep: %+v, %v; want next sent", st, err)
				}
			}
			if n := rig.api.counts(); n[next.ID()] != 1 || n[head.ID()] != 0 {
				t.Errorf("sent %v; want next alone", n)
			}
			en, err := e.ob.Get(e.ctx, head.ID())
			if err != nil || en.State != outbox.StateDead || !strings.Contains(en.LastError, "attribute attempts is a string") {
				t.Errorf("head: %+v, %v; want dead with the reason", en, err)
			}
		})
	}
}
