package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"
)

// Limits of SQS and of Lambda's SQS event source mapping that Config follows.
const (
	// MaxBatchSize is the largest BatchSize for a standard queue.
	MaxBatchSize = 10000
	// MaxFIFOBatchSize is the largest BatchSize for a FIFO queue.
	MaxFIFOBatchSize = 10
	// MaxBatchWindow is the longest BatchWindow.
	MaxBatchWindow = 300 * time.Second
	// MaxWaitTime is the longest long poll SQS allows.
	MaxWaitTime = 20 * time.Second
	// MaxVisibilityTimeout is the longest visibility timeout SQS allows, counted from the receive.
	MaxVisibilityTimeout = 12 * time.Hour
	// MaxConcurrency is the largest Concurrency (Lambda's MaximumConcurrency limit).
	MaxConcurrency = 1000
	// maxReceive is the most messages one ReceiveMessage call returns.
	maxReceive = 10
)

// ErrInvalidConfig is wrapped by every error New returns for a bad Config.
var ErrInvalidConfig = errors.New("poller: invalid config")

// ErrAlreadyRunning is returned by Run when the Poller is already running.
var ErrAlreadyRunning = errors.New("poller: already running")

// Config configures a Poller. SQS, Handler and QueueURL (or Queues) are required; every other
// field's zero value is its default.
type Config struct {
	// SQS is the client, usually sqs.NewFromConfig(cfg). Required. Size cfg's HTTP pool to
	// what runs at once, or most calls beyond the SDK's 10 per host dial a new connection:
	// config.LoadDefaultConfig(ctx, config.WithHTTPClient(HTTPClient(IdleConnsPerHost(
	// Concurrency, worker's Concurrency)))) (see IdleConnsPerHost).
	SQS SQSAPI
	// QueueURL is the URL of the queue to consume. Required, unless Queues is set. A URL ending in
	// ".fifo" is a FIFO queue.
	QueueURL string
	// Queues, instead of QueueURL, makes the Poller consume several queues (a stack's "critical",
	// "default" and "bulk") with the handler slots of Concurrency shared by them, each batch taken
	// from a queue chosen by Priority (see Priority for what each guarantees). The order is the
	// priority order of Strict, highest first. Every other setting applies to each queue (on a
	// FIFO queue BatchSize is at most 10 and BatchWindow 0). Defaults to nil: QueueURL alone.
	Queues []Queue
	// Priority chooses the queue of each batch when there are several Queues: Weighted (the
	// default) or Strict.
	Priority Priority
	// Rand returns a number in [0, 1) for Weighted's choices. It is called with the Poller's
	// lock held, so it need not be safe for concurrent use. Defaults to math/rand/v2's Float64;
	// tests inject a seeded source.
	Rand func() float64
	// OnBatchReady, when set, is called with several Queues each time a queue's receiver holds a
	// received batch, ready for the next hand-off to a handler slot: the queue's URL and the
	// batch's size. From then on the batch is a candidate of every hand-off (Priority). It runs
	// on the receiver's goroutine: keep it short. Defaults to nil.
	OnBatchReady func(queueURL string, messages int)
	// Handler handles the batches. Required.
	Handler Handler

	// BatchSize is the most messages in one batch: 1–10,000 for a standard queue, 1–10 for a FIFO
	// queue. Defaults to 10.
	BatchSize int
	// BatchWindow is how long to keep gathering messages, from the first one received, before
	// invoking the handler with fewer than BatchSize. Gathering also stops once the bodies reach
	// 6 MB (Lambda's payload limit). At most 300 s; required (at least 1 s) when BatchSize is
	// above 10, as Lambda requires; not allowed on a FIFO queue. Defaults to 0: the handler gets
	// what the first receive returned.
	BatchWindow time.Duration
	// Concurrency is how many batches may be handled at the same time; each slot polls the queue
	// on its own. 1–1,000. Defaults to 1. The SQS client's idle pool should hold
	// IdleConnsPerHost(Concurrency, the handler's jobs per batch) connections per host.
	Concurrency int
	// WaitTime is the long-poll duration of each ReceiveMessage, in whole seconds from 1 to 20
	// (short polling is not offered: it would spin on an empty queue). Defaults to 20 s.
	WaitTime time.Duration
	// VisibilityTimeout is the visibility timeout requested on receive and restored by each
	// heartbeat, in whole seconds from 1 s to 12 h. Defaults to the queue's, read once by Run with
	// GetQueueAttributes.
	VisibilityTimeout time.Duration
	// InvocationTimeout, when above 0, is the deadline of the handler's context, as a Lambda
	// function's timeout is; the heartbeat stops at that deadline, so a handler that ignores it
	// lets its messages return after their visibility timeout, as in Lambda. Unlike Lambda, a
	// handler that returns after its deadline still has its response honoured (its work is done).
	// Defaults to 0: no deadline.
	InvocationTimeout time.Duration
	// DisableHeartbeat turns off the heartbeat that extends the visibility of the messages in
	// flight every visibility/3 while the handler runs (and while a batch is being gathered).
	// Defaults to false: the heartbeat runs, so a handler longer than the visibility timeout does
	// not see its messages redelivered. It costs nothing for handlers shorter than visibility/3.
	// With it disabled, keep the visibility timeout above InvocationTimeout + BatchWindow (Lambda
	// asks for 6 × the function timeout); Run logs a warning when it is not.
	DisableHeartbeat bool
	// Paused, when set, is asked before each receive whether the queue is paused (flow.QueueGate
	// answers from the job table's pause record, `sqsworker pause --queue`): while it answers
	// true, the slot receives nothing and asks again after PausedPoll, as a disabled Lambda event
	// source mapping stops polling. Batches already received finish. It should answer from a
	// cache: it is called once per receive of every slot. Defaults to nil: never paused.
	Paused func(ctx context.Context) bool
	// PausedPoll is how long a slot waits before asking Paused again. Defaults to 5 s.
	PausedPoll time.Duration
	// Region is the awsRegion of the events. Defaults to the region in the queue's ARN.
	Region string
	// Logger receives the poller's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Backoff returns the pause before retry number attempt (1, 2, …) after a failed receive or
	// delete. Defaults to an exponential backoff from 100 ms doubling to 20 s, with jitter
	// (each pause is between half and all of the step).
	Backoff func(attempt int) time.Duration
}

// DefaultBackoff is the default Config.Backoff: exponential from 100 ms, doubling to at most
// 20 s, each pause drawn between half and all of its step.
func DefaultBackoff(attempt int) time.Duration {
	return ExponentialBackoff(100*time.Millisecond, 20*time.Second)(attempt)
}

// ExponentialBackoff returns a backoff that starts at base and doubles up to limit; each pause is
// drawn uniformly between half and all of its step, so it is never zero and never spins.
func ExponentialBackoff(base, limit time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < limit; i++ {
			if d > limit/2 {
				d = limit
				break
			}
			d *= 2
		}
		d = min(d, limit)
		if d <= 1 {
			return d
		}
		half := d / 2
		return half + rand.N(d-half)
	}
}

// isFIFO reports whether a queue URL names a FIFO queue.
func isFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }

// isQueueURL reports whether s looks like a queue URL: a scheme, a host and a path.
func isQueueURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != "" && strings.Trim(u.Path, "/") != ""
}

// withDefaults returns cfg with its defaults filled in, and every problem found.
func (cfg Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if cfg.SQS == nil {
		bad("SQS is required")
	}
	if cfg.Handler == nil {
		bad("Handler is required")
	}
	fifo := isFIFO(cfg.QueueURL)
	switch {
	case len(cfg.Queues) > 0:
		if cfg.QueueURL != "" {
			bad("QueueURL and Queues are both set: give one queue's URL, or the queues")
		}
		fifo = checkQueues(cfg.Queues, bad)
	case cfg.QueueURL == "":
		bad("QueueURL is required")
	case !isQueueURL(cfg.QueueURL):
		bad("QueueURL %q is not a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)", cfg.QueueURL)
	}
	if cfg.Priority > Strict {
		bad("Priority %d is not Weighted or Strict", cfg.Priority)
	}

	if cfg.BatchSize == 0 {
		cfg.BatchSize = 10
	}
	switch {
	case cfg.BatchSize < 1 || cfg.BatchSize > MaxBatchSize:
		bad("BatchSize %d is out of range 1–%d", cfg.BatchSize, MaxBatchSize)
	case fifo && cfg.BatchSize > MaxFIFOBatchSize:
		bad("BatchSize %d is out of range 1–%d for a FIFO queue", cfg.BatchSize, MaxFIFOBatchSize)
	}

	switch {
	case cfg.BatchWindow < 0 || cfg.BatchWindow > MaxBatchWindow:
		bad("BatchWindow %v is out of range 0–%v", cfg.BatchWindow, MaxBatchWindow)
	case fifo && cfg.BatchWindow != 0:
		bad("BatchWindow is not supported on a FIFO queue")
	case cfg.BatchSize > maxReceive && cfg.BatchWindow < time.Second:
		bad("BatchWindow must be at least 1s when BatchSize (%d) is above %d", cfg.BatchSize, maxReceive)
	}

	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if cfg.Concurrency < 1 || cfg.Concurrency > MaxConcurrency {
		bad("Concurrency %d is out of range 1–%d", cfg.Concurrency, MaxConcurrency)
	}

	if cfg.WaitTime == 0 {
		cfg.WaitTime = MaxWaitTime
	}
	if cfg.WaitTime < time.Second || cfg.WaitTime > MaxWaitTime || cfg.WaitTime%time.Second != 0 {
		bad("WaitTime %v must be whole seconds in 1s–20s", cfg.WaitTime)
	}

	if cfg.VisibilityTimeout != 0 && (cfg.VisibilityTimeout < time.Second ||
		cfg.VisibilityTimeout > MaxVisibilityTimeout || cfg.VisibilityTimeout%time.Second != 0) {
		bad("VisibilityTimeout %v must be whole seconds in 1s–12h (or 0 for the queue's)", cfg.VisibilityTimeout)
	}

	if cfg.InvocationTimeout < 0 {
		bad("InvocationTimeout %v must not be negative", cfg.InvocationTimeout)
	}

	if cfg.PausedPoll < 0 {
		bad("PausedPoll %v must not be negative", cfg.PausedPoll)
	}
	if cfg.PausedPoll == 0 {
		cfg.PausedPoll = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return cfg, errors.Join(errs...)
}
