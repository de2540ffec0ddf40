package jobstest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Defaults of Config.
const (
	DefaultTimeout         = 30 * time.Second
	DefaultVisibility      = 180 * time.Second // 6 × DefaultTimeout, as the CDK stack sets it
	DefaultMaxReceiveCount = 15
	DefaultBatchSize       = 10
	// maxSteps bounds RunUntilIdle: deliveries and clock steps.
	maxSteps = 10_000
)

// Config configures an Env. Registry is required; every other field's zero value is its default.
type Config struct {
	// Registry maps the kinds under test to their workers. Required.
	Registry *jobs.Registry
	// Clock is the environment's time. Defaults to NewClock(time.Time{}): now.
	Clock *Clock
	// FIFO makes the queues FIFO queues.
	FIFO bool
	// Timeout is each invocation's deadline, as the Lambda function's timeout (the worker keeps
	// its DeadlineMargin before it). Defaults to 30 s.
	Timeout time.Duration
	// Visibility is the queue's visibility timeout. Defaults to 180 s.
	Visibility time.Duration
	// MaxReceiveCount is the redrive policy's: a message received that many times goes to the
	// DLQ on the next receive. Defaults to 15.
	MaxReceiveCount int
	// BatchSize is the most messages per invocation. Defaults to 10.
	BatchSize int
	// Middleware runs outside the idempotency middleware (flow control, tracing), outermost
	// first. Defaults to none.
	Middleware []worker.Middleware
	// NoStore leaves out the idempotency middleware and its store (the worker then counts
	// attempts from the receive count). Defaults to false: every job runs under a claim in a
	// MemoryStore, as with the stack's job table.
	NoStore bool
	// Idempotency adjusts the idempotency middleware's config (Store, Now and Logger are set by
	// the Env). Defaults to nil.
	Idempotency func(*idempotency.MiddlewareConfig)
	// Worker adjusts the worker's config (Registry, SQS, QueueURL, DLQURL, Middleware, Now and
	// OnBatch are set by the Env). Defaults to nil.
	Worker func(*worker.Config)
	// Logger receives the worker's and the middleware's logs. Defaults to a logger that discards.
	Logger *slog.Logger
}

// Env is a job system in memory: a producer, an SQS queue and its DLQ, the real worker with the
// idempotency middleware on a MemoryStore, and a Lambda-like event source that delivers batches,
// all on one Clock. Deliver runs one invocation; RunUntilIdle runs until the queue is empty,
// stepping the clock through backoffs and delays. Nothing talks to AWS.
type Env struct {
	t   testing.TB
	cfg Config
	// Clock is the environment's time (Config.Clock).
	Clock *Clock
	// Queue is the job queue; DLQ its dead-letter queue (the worker's dead letters, and messages
	// past MaxReceiveCount).
	Queue    *Queue
	DLQ      *Queue
	Store    *idempotency.MemoryStore // nil with Config.NoStore
	Idem     *idempotency.Middleware  // nil with Config.NoStore
	Producer *producer.Producer       // enqueues on Queue (delays beyond 15 minutes: Queue's schedules)
	Handler  *worker.Handler          // the worker
	mu       sync.Mutex
	outcomes []worker.Outcome
}

// New builds an Env, failing the test on a bad Config.
func New(t testing.TB, cfg Config) *Env {
	t.Helper()
	env, err := newEnv(t, cfg)
	if err != nil {
		t.Fatalf("jobstest: %v", err)
	}
	return env
}

func newEnv(t testing.TB, cfg Config) (*Env, error) {
	if cfg.Registry == nil {
		return nil, errors.New("Config.Registry is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = NewClock(time.Time{})
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Visibility == 0 {
		cfg.Visibility = DefaultVisibility
	}
	if cfg.MaxReceiveCount == 0 {
		cfg.MaxReceiveCount = DefaultMaxReceiveCount
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	switch {
	case cfg.Timeout < 3*time.Second:
		return nil, fmt.Errorf("Config.Timeout %s is below 3 s (the worker keeps 2 s of it)", cfg.Timeout)
	case cfg.Visibility < time.Second || cfg.Visibility > 12*time.Hour:
		return nil, fmt.Errorf("Config.Visibility %s: SQS takes 1 s–12 h", cfg.Visibility)
	case cfg.MaxReceiveCount < 1 || cfg.MaxReceiveCount > 1000:
		return nil, fmt.Errorf("Config.MaxReceiveCount %d: SQS takes 1–1000", cfg.MaxReceiveCount)
	case cfg.BatchSize < 1 || cfg.FIFO && cfg.BatchSize > 10:
		return nil, fmt.Errorf("Config.BatchSize %d: want 1–10 on FIFO, at least 1 otherwise", cfg.BatchSize)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Env{t: t, cfg: cfg, Clock: cfg.Clock}
	e.DLQ = newQueue("jobstest-jobs-dlq", cfg.FIFO, cfg.Clock, cfg.Visibility, 0)
	e.Queue = newQueue("jobstest-jobs", cfg.FIFO, cfg.Clock, cfg.Visibility, cfg.MaxReceiveCount)
	e.Queue.dlq = e.DLQ
	var err error
	if e.Producer, err = producer.New(producer.Config{SQS: e.Queue, QueueURL: e.Queue.url, Clock: cfg.Clock.Now, Scheduler: e.Queue}); err != nil {
		return nil, err
	}
	mws := append([]worker.Middleware(nil), cfg.Middleware...)
	if !cfg.NoStore {
		e.Store = idempotency.NewMemoryStore()
		icfg := idempotency.MiddlewareConfig{Store: e.Store, Now: cfg.Clock.Now, Logger: cfg.Logger}
		if cfg.Idempotency != nil {
			cfg.Idempotency(&icfg)
			icfg.Store, icfg.Now = e.Store, cfg.Clock.Now
		}
		if e.Idem, err = idempotency.NewMiddleware(icfg); err != nil {
			return nil, err
		}
		mws = append(mws, e.Idem)
	}
	wcfg := worker.Config{Logger: cfg.Logger}
	if cfg.Worker != nil {
		cfg.Worker(&wcfg)
	}
	wcfg.Registry, wcfg.SQS, wcfg.QueueURL, wcfg.DLQURL, wcfg.Middleware, wcfg.Now = cfg.Registry, e.Queue, e.Queue.url, e.DLQ.url, mws, cfg.Clock.Now
	user := wcfg.OnBatch
	wcfg.OnBatch = func(ctx context.Context, o []worker.Outcome) {
		e.mu.Lock()
		e.outcomes = append(e.outcomes, o...)
		e.mu.Unlock()
		if user != nil {
			user(ctx, o)
		}
	}
	if e.Handler, err = worker.New(wcfg); err != nil {
		return nil, err
	}
	return e, nil
}

// Outcomes returns every message outcome so far, in order.
func (e *Env) Outcomes() []worker.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]worker.Outcome(nil), e.outcomes...)
}

// deadlineCtx carries the invocation's deadline in the Clock's time (what the worker and the
// middleware compare with Clock.Now), while the context itself ends after Timeout of real time.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Deliver runs one invocation as Lambda's event source does: it receives up to BatchSize visible
// messages (receive counts grow, visibility starts; a message past MaxReceiveCount goes to the
// DLQ instead), calls the worker with a deadline of Timeout, and deletes the messages the worker
// did not report failed. It returns the batch's outcomes (none when nothing was visible).
func (e *Env) Deliver(ctx context.Context) ([]worker.Outcome, error) {
	if err := e.Queue.fire(); err != nil {
		return nil, err
	}
	msgs := e.Queue.receive(e.cfg.BatchSize)
	if len(msgs) == 0 {
		return nil, nil
	}
	e.mu.Lock()
	start := len(e.outcomes)
	e.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	resp, err := e.Handler.HandleSQS(deadlineCtx{Context: rctx, deadline: e.Clock.Now().Add(e.cfg.Timeout)}, events.SQSEvent{Records: msgs})
	if err != nil {
		return nil, fmt.Errorf("jobstest: the batch failed as a whole (every message comes back after its visibility): %w", err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	ack := map[string]bool{}
	for _, m := range msgs {
		if !failed[m.MessageId] {
			ack[m.ReceiptHandle] = true
		}
	}
	e.Queue.delete(ack)
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]worker.Outcome(nil), e.outcomes[start:]...), nil
}

// RunUntilIdle delivers batches until the queue is empty (and no one-time schedule is left):
// when nothing is visible, it moves the clock to the next message's visibility or schedule (a
// backoff, a delay, an in-progress deferral), so that retries run at once in real time. It
// returns the outcomes of every delivery, and an error after 10,000 steps (a job that never
// ends).
func (e *Env) RunUntilIdle(ctx context.Context) ([]worker.Outcome, error) {
	var all []worker.Outcome
	for range maxSteps {
		out, err := e.Deliver(ctx)
		if err != nil {
			return all, err
		}
		all = append(all, out...)
		if len(out) > 0 {
			continue
		}
		next, ok := e.Queue.nextEvent()
		if !ok {
			return all, nil
		}
		e.Clock.advanceTo(next)
	}
	return all, fmt.Errorf("jobstest: the queue was not idle after %d steps (a job that never ends?)", maxSteps)
}
