package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// SQSAPI is the part of the SQS client the worker uses.
type SQSAPI interface {
	ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// PayloadStore reads the payloads of jobs that travel through S3, and writes those of re-sent
// copies (see [Config.Payload]). *payload.Store implements it.
type PayloadStore interface {
	// Read returns the object p names (in p's bucket) and whether it is marked done. An error for
	// which payload.IsPermanent is true (no such object or bucket, a bucket the store does not
	// allow) dead-letters the message at once.
	Read(ctx context.Context, p payload.Pointer) (payload.Object, error)
	// Put writes body under key in the store's bucket (a re-sent copy of a job kept in S3).
	Put(ctx context.Context, key string, body []byte) (payload.Pointer, error)
	// Delete deletes the object p names (PayloadDelete).
	Delete(ctx context.Context, p payload.Pointer) error
	// MarkDone tags the object p names as settled (PayloadMarkDone).
	MarkDone(ctx context.Context, p payload.Pointer) error
	// Key returns the key of a job's payload, derived from its id.
	Key(jobID string) string
	// SizeAttribute is the size attribute's name to send with the store's pointers.
	SizeAttribute() string
}

// PayloadCleanup is what the worker does with the S3 object of a job settled for good (see
// [Config.PayloadCleanup]).
type PayloadCleanup uint8

const (
	// PayloadDelete deletes the object (DeleteObject). A duplicate delivery of the message that
	// arrives afterwards finds no object and is dead-lettered as payload_missing. The default.
	PayloadDelete PayloadCleanup = iota
	// PayloadMarkDone tags the object payload.DoneTagKey=payload.DoneTagValue
	// (PutObjectTagging) and leaves it to the bucket's lifecycle rule, which must expire tagged
	// objects (the CDK stack's rule does, a day after their creation). A duplicate delivery that
	// arrives meanwhile finds the object: it is acknowledged without running when S3 reports the
	// mark with the object, and otherwise runs as any duplicate does (acknowledged by the
	// idempotency store). The CDK stack's worker uses this.
	PayloadMarkDone
	// PayloadKeep leaves the object as it is, for a lifecycle rule or another consumer.
	PayloadKeep
)

func (c PayloadCleanup) String() string {
	switch c {
	case PayloadDelete:
		return "delete"
	case PayloadMarkDone:
		return "mark"
	case PayloadKeep:
		return "keep"
	}
	return fmt.Sprintf("PayloadCleanup(%d)", uint8(c))
}

// ParsePayloadCleanup reads a PayloadCleanup's name: "delete", "mark" or "keep".
func ParsePayloadCleanup(s string) (PayloadCleanup, error) {
	for c := PayloadDelete; c <= PayloadKeep; c++ {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: payload cleanup %q: want delete, mark or keep", ErrConfig, s)
}

var _ PayloadStore = (*payload.Store)(nil)

// Config configures a [Handler]. Registry and SQS are required; every other field has a default.
type Config struct {
	// Registry maps kinds to workers. Required.
	Registry *jobs.Registry
	// SQS is the client used for visibility changes, DLQ sends and re-sends. Required.
	SQS SQSAPI

	// QueueURL is the source queue's URL. Defaults to the URL of the event source ARN, looked up
	// once with GetQueueUrl and cached. Leave it unset for a handler fed by several queues: a
	// record whose event source ARN names another queue is settled on that queue anyway (and
	// logged once as a misconfiguration).
	QueueURL string
	// DLQURL is the dead-letter queue's URL. Defaults to the target of the source queue's redrive
	// policy, looked up once (GetQueueAttributes, GetQueueUrl) and cached. With QueueURL set, it
	// is the DLQ of that queue's records only; without, of every queue's.
	DLQURL string

	// Concurrency bounds the jobs of one batch that run at the same time (on a FIFO source: the
	// message groups). Defaults to 10.
	Concurrency int
	// DeadlineMargin is kept free before the invocation's deadline for reporting: no job starts
	// after deadline − DeadlineMargin, and jobs still running then are abandoned and reported
	// failed. Defaults to 2 seconds.
	DeadlineMargin time.Duration
	// AbandonGrace is the visibility given to a job still running at the deadline (Go cannot stop a
	// goroutine, and Lambda may thaw it later), so that it does not run twice at once. Defaults to
	// 60 seconds.
	AbandonGrace time.Duration
	// Slice is the default slice of the kinds that set none (jobs.WithSlice): once a job that
	// saves checkpoints (jobs.Checkpoint) has run Slice, its slice ends (its context is cancelled
	// with jobs.ErrSliceEnded, or its next checkpoint returns it) and it is re-sent to continue
	// from its cursor without spending an attempt. The invocation's deadline ends a slice too
	// (less DeadlineMargin and SliceGrace). Defaults to 0: only the deadline does; under a
	// consumer without a deadline (pkg/poller without InvocationTimeout) a job then runs to its
	// end. Jobs that never checkpoint are not affected.
	Slice time.Duration
	// SliceGrace is the time a job whose slice ended at the invocation's deadline gets to return
	// before the worker abandons it (at deadline − DeadlineMargin): its slice ends at deadline −
	// DeadlineMargin − SliceGrace. Defaults to 2 seconds.
	SliceGrace time.Duration
	// Scheduler, when set, sends the re-sent copies due more than 15 minutes ahead (a durable
	// sleep, a long RetryAfter) through a one-time EventBridge Scheduler schedule
	// (*schedule.Client implements it), so that nothing runs until they are due. Not used on a
	// FIFO queue, for a job whose body is an S3 pointer, or for a copy larger than a schedule's
	// input (256 KB): those wait in SQS (DelaySeconds, then their message's visibility, received
	// about every 12 hours). Defaults to nil: every copy waits in SQS.
	Scheduler Scheduler

	// VisibilityMargin is kept below SQS's 12-hour visibility limit (counted from the receive,
	// which may precede the invocation by the batching window, up to 5 minutes). Defaults to 10
	// minutes; at least 6.
	VisibilityMargin time.Duration

	// Middleware wraps every job, outermost first. Idempotency, status and metrics plug in here.
	Middleware []Middleware
	// MalformedHook, when set, receives messages whose body is not a valid envelope (for example,
	// a non-sqsworker producer's). Returning nil acknowledges the message; an error dead-letters it
	// with the reason "malformed". Defaults to nil: malformed bodies go to the DLQ.
	MalformedHook func(ctx context.Context, msg events.SQSMessage) error

	// Payload, when set, reads the jobs whose message body is an S3 pointer in the format of the
	// Amazon SQS Extended Client Library (see pkg/payload and docs/envelope.md): the object is
	// fetched before the envelope is decoded (the batch's pointers in parallel, within the
	// deadline), and the rest of the worker sees the envelope as if it had come inline. Once the
	// job has succeeded the object is cleaned up as PayloadCleanup says; a dead-lettered job's DLQ
	// copy keeps the pointer, and its object is kept, so that a redrive still finds it. An object
	// that does not exist dead-letters the message with the reason "payload_missing" at once, a
	// pointer to a bucket the store does not allow with "payload_refused" (never read); other S3
	// errors are retried with the default backoff and dead-letter it as "payload_missing" after
	// jobs.DefaultMaxAttempts receives. Defaults to nil: a pointer body is not an envelope (it goes
	// to MalformedHook, or to the DLQ as "malformed").
	Payload PayloadStore
	// PayloadCleanup is what happens to a settled job's object (succeeded, acknowledged as a
	// duplicate, accepted by the malformed hook, or superseded by a re-sent copy). Defaults to
	// PayloadDelete; PayloadMarkDone for a bucket whose lifecycle rule expires tagged objects (so
	// that duplicate deliveries are not dead-lettered), PayloadKeep for one that expires every
	// object or is read by several consumers.
	PayloadCleanup PayloadCleanup

	// OnBatch, when set, is called after each batch is settled with every message's outcome (in
	// the batch's order). Metrics and tests use it. Defaults to nil.
	OnBatch func(ctx context.Context, outcomes []Outcome)

	// Routing, when set, says which queue each kind belongs on (a stack of several queues:
	// pkg/queues' Set.Routing implements it). A job that arrives on a queue its kind is not
	// routed to runs all the same, so that a routing change never strands the jobs already sent;
	// its Outcome has Misrouted set (pkg/metrics counts it as JobsMisrouted) and the first such
	// job of each kind and queue is logged. Defaults to nil: nothing is checked.
	Routing Routing

	// Observer, when set, sees each message from the start of its work to its settlement
	// (pkg/tracing turns that into OpenTelemetry spans). Defaults to nil: nothing is observed and
	// nothing is allocated for it.
	Observer Observer

	// Logger receives one line per job outcome: successes and skipped duplicates at Debug (off at
	// the default Info level), continued jobs (a slice that ended, a sleep) at Info, retries at
	// Warn, dead letters at Error. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// LogArgs adds the job's args to its log lines. Defaults to false (payloads may hold personal
	// data).
	LogArgs bool

	// Now returns the current time. Defaults to time.Now. Inject a clock in tests.
	Now func() time.Time
	// NewID makes ids for re-sent FIFO copies' deduplication. Defaults to jobs.NewID.
	NewID func() string
}

// Routing says whether a job arrived on its kind's queue ([Config.Routing]). pkg/queues'
// *Routing implements it; the worker does not import that package.
type Routing interface {
	// Misrouted reports whether a job of kind that arrived from the queue queueARN (the event
	// source) belongs on another queue.
	Misrouted(kind, queueARN string) bool
}

// Defaults of [Config].
const (
	DefaultConcurrency      = 10
	DefaultDeadlineMargin   = 2 * time.Second
	DefaultAbandonGrace     = 60 * time.Second
	DefaultVisibilityMargin = 10 * time.Minute
	DefaultSliceGrace       = 2 * time.Second
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("worker: invalid config")

func (c *Config) setDefaults() error {
	if c.Registry == nil {
		return fmt.Errorf("%w: Registry is required", ErrConfig)
	}
	if c.SQS == nil {
		return fmt.Errorf("%w: SQS client is required", ErrConfig)
	}
	if c.PayloadCleanup > PayloadKeep {
		return fmt.Errorf("%w: PayloadCleanup %d: want PayloadDelete, PayloadMarkDone or PayloadKeep", ErrConfig, c.PayloadCleanup)
	}
	checks := []struct {
		name  string
		value time.Duration
		def   time.Duration
		field *time.Duration
		max   time.Duration
	}{
		{"DeadlineMargin", c.DeadlineMargin, DefaultDeadlineMargin, &c.DeadlineMargin, 10 * time.Minute},
		{"AbandonGrace", c.AbandonGrace, DefaultAbandonGrace, &c.AbandonGrace, jobs.MaxVisibility},
		{"VisibilityMargin", c.VisibilityMargin, DefaultVisibilityMargin, &c.VisibilityMargin, time.Hour},
		{"SliceGrace", c.SliceGrace, DefaultSliceGrace, &c.SliceGrace, 10 * time.Minute},
		{"Slice", c.Slice, 0, &c.Slice, 7 * 24 * time.Hour},
	}
	for _, ch := range checks {
		if ch.value < 0 {
			return fmt.Errorf("%w: %s %s must not be negative", ErrConfig, ch.name, ch.value)
		}
		if ch.value > ch.max {
			return fmt.Errorf("%w: %s %s is above its limit %s", ErrConfig, ch.name, ch.value, ch.max)
		}
		if ch.value == 0 {
			*ch.field = ch.def
		}
	}
	if c.Slice != 0 && c.Slice < time.Second {
		return fmt.Errorf("%w: Slice %s must be 0 (none) or at least 1s", ErrConfig, c.Slice)
	}
	if c.VisibilityMargin < 6*time.Minute {
		return fmt.Errorf("%w: VisibilityMargin %s is below 6m (Lambda's batching window is up to 5 minutes)", ErrConfig, c.VisibilityMargin)
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("%w: Concurrency %d must not be negative", ErrConfig, c.Concurrency)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	for i, m := range c.Middleware {
		if m == nil {
			return fmt.Errorf("%w: Middleware[%d] is nil", ErrConfig, i)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = jobs.NewID
	}
	return nil
}
