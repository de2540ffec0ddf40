package idempotency_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// chargeArgs is a job with a side effect the tests count.
type chargeArgs struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

func (chargeArgs) Kind() string { return "payment.charge" }

// noopSQS accepts every call the worker makes (these tests are about the store, not the queue).
type noopSQS struct{}

func (noopSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (noopSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m")})
	}
	return out, nil
}

func (noopSQS) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.test/q")}, nil
}

func (noopSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{}, nil
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// rig is a worker with the idempotency middleware and a counted side effect.
type rig struct {
	t        *testing.T
	store    idempotency.Store
	mw       *idempotency.Middleware
	h        *worker.Handler
	clock    *clock
	charges  atomic.Int64
	mu       sync.Mutex
	outcomes []worker.Outcome
	work     func(ctx context.Context, job *jobs.Job[chargeArgs]) error
}

func newRig(t *testing.T, store idempotency.Store, maxAttempts int, mutate func(*idempotency.MiddlewareConfig)) *rig {
	t.Helper()
	r := &rig{t: t, store: store, clock: &clock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}}
	cfg := idempotency.MiddlewareConfig{Store: store, Now: r.clock.Now, Logger: slog.New(slog.DiscardHandler)}
	if mutate != nil {
		mutate(&cfg)
	}
	mw, err := idempotency.NewMiddleware(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.mw = mw
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[chargeArgs](func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
		if r.work != nil {
			return r.work(ctx, job)
		}
		r.charges.Add(1)
		return nil
	}), jobs.WithMaxAttempts(maxAttempts), jobs.WithPolicy(jobs.PolicyFunc(func(int) time.Duration { return time.Second })))
	r.h, err = worker.New(worker.Config{
		Registry: reg, SQS: noopSQS{}, QueueURL: "https://sqs.test/q", DLQURL: "https://sqs.test/dlq",
		Middleware: []worker.Middleware{mw}, Logger: slog.New(slog.DiscardHandler), Now: r.clock.Now,
		OnBatch: func(_ context.Context, o []worker.Outcome) {
			r.mu.Lock()
			r.outcomes = append(r.outcomes, o...)
			r.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// message is an SQS record carrying a charge job.
func message(msgID, jobID, key string, args chargeArgs, receives int) events.SQSMessage {
	a := `{"order":"` + args.Order + `","amount":` + strconv.Itoa(args.Amount) + `}`
	env := jobs.Envelope{V: 1, ID: jobID, Kind: "payment.charge", Args: []byte(a), Key: key}
	b, err := env.MarshalJSON()
	if err != nil {
		panic(err)
	}
	return events.SQSMessage{
		MessageId: msgID, ReceiptHandle: "rh-" + msgID, Body: string(b), EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q", AWSRegion: "us-east-1",
		Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(receives), "SentTimestamp": "1764410400000"},
	}
}

// deliver hands messages to the worker and returns their outcomes.
func (r *rig) deliver(ctx context.Context, msgs ...events.SQSMessage) []worker.Outcome {
	r.t.Helper()
	r.mu.Lock()
	start := len(r.outcomes)
	r.mu.Unlock()
	if _, err := r.h.HandleSQS(ctx, events.SQSEvent{Records: msgs}); err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]worker.Outcome(nil), r.outcomes[start:]...)
}

// stores runs a test on the memory store and on the DynamoDB store over the embedded emulator.
func stores(t *testing.T, test func(t *testing.T, newStore func() idempotency.Store)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		test(t, func() idempotency.Store { return idempotency.NewMemoryStore() })
	})
	t.Run("dynamodb", func(t *testing.T) {
		t.Parallel()
		client := emulatorDynamoDB(t)
		test(t, func() idempotency.Store { return newDynamoStore(t, client) })
	})
}

func emulatorDynamoDB(t *testing.T) *dynamodb.Client {
	t.Helper()
	b := awslocaltest.Backend(t)
	return dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
}

func newDynamoStore(t *testing.T, client idempotency.DynamoDBAPI) *idempotency.DynamoDBStore {
	t.Helper()
	b := awslocaltest.Backend(t)
	ddb := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table := awslocal.UniqueName("idem")
	if _, err := awslocal.ProvisionTable(context.Background(), ddb, table); err != nil {
		t.Fatal(err)
	}
	table = awslocal.TableName(table)
	s, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDuplicateDeliveryRunsOnce(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, nil)
		ctx := context.Background()
		args := chargeArgs{Order: "o-1", Amount: 100}
		first := r.deliver(ctx, message("m1", "job-1", "order-o-1", args, 1))
		redelivered := r.deliver(ctx, message("m1", "job-1", "order-o-1", args, 2))
		sameKey := r.deliver(ctx, message("m2", "job-2", "order-o-1", args, 1))
		if got := r.charges.Load(); got != 1 {
			t.Fatalf("charged %d times, want exactly once", got)
		}
		if first[0].Outcome != worker.OutcomeSucceeded || redelivered[0].Outcome != worker.OutcomeSkipped || sameKey[0].Outcome != worker.OutcomeSkipped {
			t.Errorf("outcomes = %s, %s, %s; want succeeded, skipped, skipped", first[0].Outcome, redelivered[0].Outcome, sameKey[0].Outcome)
		}
		if redelivered[0].Failed || sameKey[0].Failed {
			t.Errorf("duplicates must be acknowledged, not retried")
		}
		rec, err := r.store.Get(ctx, "payment.charge", "order-o-1")
		if err != nil || rec.State != idempotency.StateSucceeded || rec.Runs != 1 || rec.JobID != "job-1" {
			t.Errorf("record = %+v, %v", rec, err)
		}
	})
}

func TestConcurrentWorkersOneRuns(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		store := newStore()
		a, b := newRig(t, store, 5, nil), newRig(t, store, 5, nil)
		started := make(chan struct{})
		release := make(chan struct{})
		var once sync.Once
		block := func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
			a.charges.Add(1)
			once.Do(func() { close(started) })
			<-release
			return nil
		}
		a.work, b.work = block, block
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		args := chargeArgs{Order: "o-race", Amount: 5}
		var wg sync.WaitGroup
		var outA, outB []worker.Outcome
		wg.Add(1)
		go func() { defer wg.Done(); outA = a.deliver(ctx, message("m1", "job-1", "race", args, 1)) }()
		<-started
		outB = b.deliver(ctx, message("m2", "job-2", "race", args, 1))
		close(release)
		wg.Wait()
		if got := a.charges.Load(); got != 1 {
			t.Fatalf("ran %d times, want once", got)
		}
		if outA[0].Outcome != worker.OutcomeSucceeded {
			t.Errorf("first worker: %+v", outA[0])
		}
		if outB[0].Outcome != worker.OutcomeDeferred || !outB[0].Failed || !errors.Is(outB[0].Err, idempotency.ErrInProgress) || outB[0].Visibility <= 0 {
			t.Errorf("second worker: %+v, want deferred as in progress, reported failed with a visibility", outB[0])
		}
		// The second worker's message comes back later and is skipped: the job succeeded.
		again := b.deliver(ctx, message("m2", "job-2", "race", args, 2))
		if again[0].Outcome != worker.OutcomeSkipped || a.charges.Load() != 1 {
			t.Errorf("redelivery after completion: %+v (charges %d)", again[0], a.charges.Load())
		}
	})
}

func TestCrashMidJobIsReclaimedAfterTheLease(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, nil)
		ctx := context.Background()
		// A worker claimed the job and crashed before completing it.
		now := r.clock.Now()
		if _, err := r.store.Claim(ctx, idempotency.ClaimRequest{Kind: "payment.charge", Key: "crash", JobID: "job-1",
			Token: "dead-worker", Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		args := chargeArgs{Order: "o-c", Amount: 1}
		before := r.deliver(ctx, message("m1", "job-1", "crash", args, 2))
		if before[0].Outcome != worker.OutcomeDeferred || r.charges.Load() != 0 {
			t.Fatalf("during the lease: %+v, charges %d", before[0], r.charges.Load())
		}
		r.clock.Add(time.Minute + time.Second)
		after := r.deliver(ctx, message("m1", "job-1", "crash", args, 3))
		if after[0].Outcome != worker.OutcomeSucceeded || r.charges.Load() != 1 {
			t.Fatalf("after the lease: %+v, charges %d", after[0], r.charges.Load())
		}
		if after[0].Attempt != 2 {
			t.Errorf("attempt = %d, want 2 (the crashed run counted, the deferral did not)", after[0].Attempt)
		}
	})
}

func TestDeferralDoesNotSpendAnAttempt(t *testing.T) {
	t.Parallel()
	r := newRig(t, idempotency.NewMemoryStore(), 2, nil)
	ctx := context.Background()
	now := r.clock.Now()
	if _, err := r.store.Claim(ctx, idempotency.ClaimRequest{Kind: "payment.charge", Key: "k", JobID: "j",
		Token: "other", Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// Many receives while another worker holds the claim: never dead-lettered.
	for receives := 1; receives <= 6; receives++ {
		out := r.deliver(ctx, message("m", "j", "k", chargeArgs{Order: "x"}, receives))
		if out[0].Outcome != worker.OutcomeDeferred {
			t.Fatalf("receive %d: %+v, want deferred", receives, out[0])
		}
	}
	r.clock.Add(2 * time.Minute)
	out := r.deliver(ctx, message("m", "j", "k", chargeArgs{Order: "x"}, 7))
	if out[0].Outcome != worker.OutcomeSucceeded || out[0].Attempt != 2 {
		t.Errorf("after the lease: %+v, want succeeded on attempt 2", out[0])
	}
}

func TestFailureThenSuccessKeepsTheError(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, nil)
		fail := true
		r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
			if fail {
				return errors.New("card network timeout")
			}
			return nil
		}
		ctx := context.Background()
		args := chargeArgs{Order: "o-2"}
		out := r.deliver(ctx, message("m1", "job-1", "", args, 1))
		if out[0].Outcome != worker.OutcomeRetry {
			t.Fatalf("first: %+v", out[0])
		}
		rec, _ := r.store.Get(ctx, "payment.charge", "job-1")
		if rec.State != idempotency.StateRetrying || rec.LastError != "card network timeout" || rec.Runs != 1 {
			t.Errorf("after the failure: %+v", rec)
		}
		fail = false
		r.clock.Add(time.Second)
		out = r.deliver(ctx, message("m1", "job-1", "", args, 2))
		if out[0].Outcome != worker.OutcomeSucceeded || out[0].Attempt != 2 {
			t.Fatalf("second: %+v", out[0])
		}
		rec, _ = r.store.Get(ctx, "payment.charge", "job-1")
		if rec.State != idempotency.StateSucceeded || rec.Runs != 2 || rec.LastError != "card network timeout" {
			t.Errorf("after the success: %+v, want succeeded, 2 runs, the first error kept", rec)
		}
		if rec.FirstAttemptAt.Equal(rec.LastAttemptAt) || rec.ExpiresAt.Sub(r.clock.Now()) != idempotency.DefaultSucceededTTL {
			t.Errorf("times: first %s last %s expires %s", rec.FirstAttemptAt, rec.LastAttemptAt, rec.ExpiresAt)
		}
	})
}

func TestExhaustedIsDead(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 2, nil)
		r.work = func(context.Context, *jobs.Job[chargeArgs]) error { return errors.New("declined") }
		ctx := context.Background()
		r.deliver(ctx, message("m1", "job-1", "", chargeArgs{}, 1))
		out := r.deliver(ctx, message("m1", "job-1", "", chargeArgs{}, 2))
		if out[0].Outcome != worker.OutcomeDeadLettered || out[0].Reason != jobs.ReasonExhausted {
			t.Fatalf("second attempt: %+v", out[0])
		}
		rec, _ := r.store.Get(ctx, "payment.charge", "job-1")
		if rec.State != idempotency.StateDead || rec.Reason != jobs.ReasonExhausted || rec.Runs != 2 {
			t.Errorf("record = %+v", rec)
		}
		ds, ok := r.store.(*idempotency.DynamoDBStore)
		if !ok {
			return // listing by status is a DynamoDB table feature
		}
		st, err := status.New(status.Config{Client: emulatorDynamoDB(t), Table: ds.Table(), Now: r.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		page, err := st.List(ctx, status.ListQuery{State: idempotency.StateDead})
		if err != nil || len(page.Jobs) != 1 || page.Jobs[0].JobID != "job-1" || page.Jobs[0].Reason != jobs.ReasonExhausted {
			t.Errorf("List(dead) = %+v, %v", page, err)
		}
	})
}

func TestPayloadMismatchDeadLetters(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, nil)
		ctx := context.Background()
		r.deliver(ctx, message("m1", "job-1", "order-9", chargeArgs{Order: "9", Amount: 10}, 1))
		out := r.deliver(ctx, message("m2", "job-2", "order-9", chargeArgs{Order: "9", Amount: 99}, 1))
		if out[0].Outcome != worker.OutcomeDeadLettered || out[0].Reason != jobs.ReasonPayloadMismatch || out[0].Failed {
			t.Fatalf("mismatch: %+v", out[0])
		}
		rec, _ := r.store.Get(ctx, "payment.charge", "order-9")
		if rec.State != idempotency.StateSucceeded || rec.JobID != "job-1" || r.charges.Load() != 1 {
			t.Errorf("the first job's record was touched: %+v", rec)
		}
	})
}

func TestExpiredRecordRunsAgain(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, func(c *idempotency.MiddlewareConfig) { c.SucceededTTL = time.Hour })
		ctx := context.Background()
		r.deliver(ctx, message("m1", "job-1", "daily", chargeArgs{}, 1))
		r.clock.Add(59 * time.Minute)
		if out := r.deliver(ctx, message("m2", "job-2", "daily", chargeArgs{}, 1)); out[0].Outcome != worker.OutcomeSkipped {
			t.Fatalf("within the TTL: %+v", out[0])
		}
		r.clock.Add(2 * time.Minute)
		out := r.deliver(ctx, message("m3", "job-3", "daily", chargeArgs{}, 1))
		if out[0].Outcome != worker.OutcomeSucceeded || out[0].Attempt != 1 || r.charges.Load() != 2 {
			t.Errorf("after expiry: %+v, charges %d; want a fresh run (attempt 1)", out[0], r.charges.Load())
		}
	})
}

// failingStore fails every call.
type failingStore struct{ idempotency.Store }

func (failingStore) Claim(context.Context, idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	return idempotency.ClaimResult{}, errors.New("ProvisionedThroughputExceededException")
}

func TestStoreDownDefersUnlessFailOpen(t *testing.T) {
	t.Parallel()
	r := newRig(t, failingStore{idempotency.NewMemoryStore()}, 1, nil)
	// Receive 2 (beyond max attempts 1): hidden for the delay. (From the third receive a deferred
	// job is re-sent instead: pkg/worker's TestDeferredJobIsResentFromItsThirdReceive.)
	out := r.deliver(context.Background(), message("m1", "job-1", "", chargeArgs{}, 2))
	if out[0].Outcome != worker.OutcomeDeferred || !out[0].Failed || r.charges.Load() != 0 || out[0].Visibility < idempotency.DefaultStoreRetryDelay {
		t.Errorf("store down: %+v, charges %d; want deferred (not dead-lettered although beyond max attempts) and not run", out[0], r.charges.Load())
	}
	open := newRig(t, failingStore{idempotency.NewMemoryStore()}, 5, func(c *idempotency.MiddlewareConfig) { c.FailOpen = true })
	out = open.deliver(context.Background(), message("m1", "job-1", "", chargeArgs{}, 1))
	if out[0].Outcome != worker.OutcomeSucceeded || open.charges.Load() != 1 || open.mw.Stats().FailOpenRuns != 1 {
		t.Errorf("fail open: %+v", out[0])
	}
}

func TestLRUSkipsTheStore(t *testing.T) {
	t.Parallel()
	counting := &countingStore{Store: idempotency.NewMemoryStore()}
	r := newRig(t, counting, 5, func(c *idempotency.MiddlewareConfig) { c.CacheSize = 2 })
	ctx := context.Background()
	r.deliver(ctx, message("m1", "job-1", "", chargeArgs{}, 1))
	claims := counting.claims.Load()
	out := r.deliver(ctx, message("m1", "job-1", "", chargeArgs{}, 2))
	if out[0].Outcome != worker.OutcomeSkipped || counting.claims.Load() != claims || r.mw.Stats().CacheHits != 1 {
		t.Errorf("cached duplicate: %+v, claims %d → %d", out[0], claims, counting.claims.Load())
	}
}

type countingStore struct {
	idempotency.Store
	claims atomic.Int64
}

func (c *countingStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, req)
}

// lostLeaseStore fails renewals (touches), as when another worker took the job over.
type lostLeaseStore struct{ idempotency.Store }

func (lostLeaseStore) Touch(context.Context, idempotency.Touch) (idempotency.Record, error) {
	return idempotency.Record{}, idempotency.ErrLeaseLost
}

func TestLeaseRenewalInAContainer(t *testing.T) {
	t.Parallel()
	// No deadline in the context: the lease (3 s here) is renewed every second while the job runs.
	r := newRig(t, idempotency.NewMemoryStore(), 5, func(c *idempotency.MiddlewareConfig) { c.Lease = 3 * time.Second; c.Now = time.Now })
	r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
		deadline := time.Now().Add(30 * time.Second)
		for r.mw.Stats().LeaseRenewals < 1 && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		return nil
	}
	if out := r.deliver(context.Background(), message("m1", "job-1", "", chargeArgs{}, 1)); out[0].Outcome != worker.OutcomeSucceeded {
		t.Fatalf("renewed job: %+v", out[0])
	}
	if r.mw.Stats().LeaseRenewals < 1 {
		t.Errorf("no renewal happened")
	}

	lost := newRig(t, lostLeaseStore{idempotency.NewMemoryStore()}, 5, func(c *idempotency.MiddlewareConfig) { c.Lease = 3 * time.Second; c.Now = time.Now })
	lost.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(30 * time.Second):
			return errors.New("the context was never cancelled")
		}
	}
	out := lost.deliver(context.Background(), message("m1", "job-1", "", chargeArgs{}, 1))
	if out[0].Outcome != worker.OutcomeRetry || !errors.Is(out[0].Err, idempotency.ErrLeaseLost) || lost.mw.Stats().LeaseLostStops != 1 {
		t.Errorf("lost lease: %+v", out[0])
	}
}

// capturingSQS is a producer's SQS client that keeps what was sent.
type capturingSQS struct{ bodies []string }

func (c *capturingSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.bodies = append(c.bodies, aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{MessageId: aws.String("msg-" + strconv.Itoa(len(c.bodies)))}, nil
}

func (c *capturingSQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errors.New("not used")
}

func TestQueuedByTheProducerThenRunByTheWorker(t *testing.T) {
	t.Parallel()
	client := emulatorDynamoDB(t)
	store := newDynamoStore(t, client)
	st, err := status.New(status.Config{Client: client, Table: store.Table()})
	if err != nil {
		t.Fatal(err)
	}
	fake := &capturingSQS{}
	prod, err := producer.New(producer.Config{SQS: fake, QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/q", Status: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := prod.Enqueue(ctx, chargeArgs{Order: "o-q", Amount: 7}, producer.WithKey("order-o-q"))
	if err != nil || res.StatusErr != nil {
		t.Fatalf("Enqueue = %+v, %v", res, err)
	}
	job, err := st.Get(ctx, "payment.charge", "order-o-q")
	if err != nil || job.State != idempotency.StateQueued || job.JobID != res.ID {
		t.Fatalf("after enqueue: %+v, %v; want queued", job, err)
	}
	r := newRig(t, store, 5, func(c *idempotency.MiddlewareConfig) { c.Now = time.Now })
	msg := message("m1", res.ID, "order-o-q", chargeArgs{}, 1)
	msg.Body = fake.bodies[0]
	if out := r.deliver(ctx, msg); out[0].Outcome != worker.OutcomeSucceeded || r.charges.Load() != 1 {
		t.Fatalf("delivery: %+v", out[0])
	}
	if job, err = st.Get(ctx, "payment.charge", "order-o-q"); err != nil || job.State != idempotency.StateSucceeded || job.Runs != 1 {
		t.Errorf("after the run: %+v, %v", job, err)
	}
}

func TestFIFOTailDoesNotSpendAnAttempt(t *testing.T) {
	t.Parallel()
	r := newRig(t, idempotency.NewMemoryStore(), 5, nil)
	r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
		if job.Args.Order == "first" {
			return errors.New("first fails")
		}
		r.charges.Add(1)
		return nil
	}
	fifo := func(m events.SQSMessage) events.SQSMessage {
		m.EventSourceARN += ".fifo"
		m.Attributes["MessageGroupId"] = "g"
		return m
	}
	ctx := context.Background()
	out := r.deliver(ctx, fifo(message("m1", "j1", "", chargeArgs{Order: "first"}, 1)), fifo(message("m2", "j2", "", chargeArgs{Order: "tail"}, 1)))
	if out[1].Outcome != worker.OutcomeNotRun {
		t.Fatalf("tail: %+v", out[1])
	}
	if _, err := r.store.Get(ctx, "payment.charge", "j2"); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("the unrun tail has a record: %v", err)
	}
	out = r.deliver(ctx, fifo(message("m2", "j2", "", chargeArgs{Order: "tail"}, 2)))
	if out[0].Outcome != worker.OutcomeSucceeded || out[0].Attempt != 1 {
		t.Errorf("tail's next delivery: %+v, want attempt 1", out[0])
	}
}

// finishFailingStore records claims but cannot record outcomes.
type finishFailingStore struct{ idempotency.Store }

func (finishFailingStore) Finish(context.Context, idempotency.Finish) error {
	return errors.New("ThrottlingException")
}

func TestFailedCompletionStillAcknowledges(t *testing.T) {
	t.Parallel()
	var hooked atomic.Int64
	r := newRig(t, finishFailingStore{idempotency.NewMemoryStore()}, 5, func(c *idempotency.MiddlewareConfig) {
		c.OnFinishError = func(context.Context, *jobs.Info, error) { hooked.Add(1) }
	})
	out := r.deliver(context.Background(), message("m1", "job-1", "", chargeArgs{}, 1))
	if out[0].Outcome != worker.OutcomeSucceeded || out[0].Failed || r.mw.Stats().FinishErrors != 1 || hooked.Load() != 1 {
		t.Errorf("outcome %+v, finish errors %d, hook %d: want acknowledged, counted, reported", out[0], r.mw.Stats().FinishErrors, hooked.Load())
	}
}

func TestLRUDoesNotHideAPayloadMismatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, idempotency.NewMemoryStore(), 5, func(c *idempotency.MiddlewareConfig) { c.CacheSize = 10 })
	ctx := context.Background()
	r.deliver(ctx, message("m1", "job-1", "order-1", chargeArgs{Order: "1", Amount: 10}, 1))
	out := r.deliver(ctx, message("m2", "job-2", "order-1", chargeArgs{Order: "1", Amount: 99}, 1))
	if out[0].Outcome != worker.OutcomeDeadLettered || out[0].Reason != jobs.ReasonPayloadMismatch {
		t.Errorf("same key, other args, cached: %+v; want payload_mismatch", out[0])
	}
}

func TestPanicReleasesTheClaim(t *testing.T) {
	t.Parallel()
	r := newRig(t, idempotency.NewMemoryStore(), 5, func(c *idempotency.MiddlewareConfig) { c.Lease = 3 * time.Second; c.Now = time.Now })
	panics := true
	r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
		if panics {
			panic("boom")
		}
		r.charges.Add(1)
		return nil
	}
	ctx := context.Background() // no deadline: a container, with lease renewal
	out := r.deliver(ctx, message("m1", "job-1", "", chargeArgs{}, 1))
	if out[0].Outcome != worker.OutcomeRetry {
		t.Fatalf("panic: %+v", out[0])
	}
	rec, err := r.store.Get(ctx, "payment.charge", "job-1")
	if err != nil || rec.State != idempotency.StateRetrying || rec.LastError != "job panicked: boom" {
		t.Fatalf("record after the panic: %+v, %v; want retrying with the panic", rec, err)
	}
	panics = false
	if out := r.deliver(ctx, message("m1", "job-1", "", chargeArgs{}, 2)); out[0].Outcome != worker.OutcomeSucceeded || out[0].Attempt != 2 {
		t.Errorf("next delivery: %+v, want it to run (attempt 2)", out[0])
	}
	if n := r.mw.Stats().LeaseRenewals; n != 0 {
		t.Errorf("renewals after the jobs ended: %d", n)
	}
}

// A cancelled job whose DLQ send failed comes back as the same message: it is dead-lettered again
// without running a second time. A redriven copy (a new message) runs.
func TestDeadLetteredMessageComingBackDoesNotRunAgain(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, nil)
		cancel := true
		r.work = func(context.Context, *jobs.Job[chargeArgs]) error {
			r.charges.Add(1)
			if cancel {
				return jobs.Cancel(errors.New("order already refunded"))
			}
			return nil
		}
		ctx := context.Background()
		out := r.deliver(ctx, message("m1", "job-1", "", chargeArgs{}, 1))
		if out[0].Outcome != worker.OutcomeDeadLettered || r.charges.Load() != 1 {
			t.Fatalf("first: %+v", out[0])
		}
		out = r.deliver(ctx, message("m1", "job-1", "", chargeArgs{}, 2)) // the DLQ send had failed
		if out[0].Outcome != worker.OutcomeDeadLettered || out[0].Reason != jobs.ReasonCancelled || r.charges.Load() != 1 {
			t.Fatalf("same message again: %+v, charges %d; want dead-lettered again without running", out[0], r.charges.Load())
		}
		cancel = false
		out = r.deliver(ctx, message("m2", "job-1", "", chargeArgs{}, 1)) // redriven: a new message
		if out[0].Outcome != worker.OutcomeSucceeded || r.charges.Load() != 2 {
			t.Errorf("redriven copy: %+v, charges %d", out[0], r.charges.Load())
		}
	})
}

func TestStoredResult(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newStore func() idempotency.Store) {
		r := newRig(t, newStore(), 5, nil)
		r.work = func(ctx context.Context, job *jobs.Job[chargeArgs]) error {
			r.charges.Add(1)
			return idempotency.SetResult(ctx, []byte(`{"charge_id":"ch_42"}`))
		}
		ctx := context.Background()
		r.deliver(ctx, message("m1", "job-1", "order-7", chargeArgs{}, 1))
		out := r.deliver(ctx, message("m2", "job-2", "order-7", chargeArgs{}, 1))
		if out[0].Outcome != worker.OutcomeSkipped || r.charges.Load() != 1 {
			t.Fatalf("duplicate: %+v", out[0])
		}
		rec, err := r.store.Get(ctx, "payment.charge", "order-7")
		if err != nil || rec.Result != `{"charge_id":"ch_42"}` {
			t.Errorf("record = %+v, %v; want the stored result", rec, err)
		}
	})
	if err := idempotency.SetResult(context.Background(), []byte("{}")); err == nil {
		t.Error("SetResult outside a job must be an error")
	}
}
