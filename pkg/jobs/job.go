package jobs

import (
	"context"
	"encoding/json"
	"time"
)

// Args are a job's typed arguments. Kind names the job type; it must match
// ^[a-z0-9][a-z0-9._:-]{0,127}$ and must not depend on the value (it is read from the zero value
// when registering). Args are encoded as a JSON object.
type Args interface {
	Kind() string
}

// Info is what is known about a job apart from its typed arguments: the envelope's fields and the
// delivery's. Middleware sees jobs as *Info; workers see it embedded in [Job].
type Info struct {
	// ID is the job's unique id (envelope "id").
	ID string
	// Kind is the job's kind (envelope "kind").
	Kind string
	// Key is the idempotency key, scoped by kind; it defaults to ID.
	Key string
	// Attempt is the number of this attempt, starting at 1. Without a store it is
	// attempts_before + ApproximateReceiveCount; a store (middleware) may set it from its run count
	// (the idempotency middleware: max(runs recorded, attempts_before) + 1).
	Attempt int
	// MaxAttempts is the envelope's max_attempts when present, else the kind's default.
	MaxAttempts int
	// AttemptsBefore is the envelope's attempts_before: attempts spent before a re-send.
	AttemptsBefore int
	// EnqueuedAt is when the producer created the job (zero when the envelope omits it).
	EnqueuedAt time.Time
	// RunAt, when set, is the earliest time the job may run (a re-sent long retry).
	RunAt time.Time
	// Meta is the envelope's string context (nil when absent).
	Meta map[string]string
	// TraceParent is the W3C trace context of the producer (meta.traceparent), if any.
	TraceParent string
	// RawArgs are the args exactly as they arrived (a JSON object).
	RawArgs json.RawMessage
	// Continuation is how many times the job was continued before this run (slices that ended,
	// sleeps; see [ContinueError]): the job's record says it when the idempotency middleware ran
	// it, else the envelope's meta (MetaContinuation). 0 for a job's first run.
	Continuation int
	// RunTime is the job's total run time before this run (all its slices and attempts), as its
	// record keeps it (the idempotency middleware sets it; 0 without a job table).
	RunTime time.Duration

	// MessageID is the SQS message id of this delivery.
	MessageID string
	// QueueARN is the ARN of the queue the message came from (the event's eventSourceARN; ""
	// when the consumer does not say).
	QueueARN string
	// GroupID is the message group id: the FIFO group, or a standard queue's fair-queue group
	// ("" when the message has none).
	GroupID string
	// ReceiveCount is the message's ApproximateReceiveCount.
	ReceiveCount int
	// SentAt is the message's SentTimestamp.
	SentAt time.Time
	// FirstReceivedAt is the message's ApproximateFirstReceiveTimestamp: when this copy of the
	// job was first received (zero when the consumer does not say).
	FirstReceivedAt time.Time
	// AWSTraceHeader is the X-Ray trace header system attribute, if any.
	AWSTraceHeader string
}

// Job is a job handed to a [Worker]: its [Info] and its decoded arguments.
type Job[T Args] struct {
	*Info
	// Args are the decoded arguments.
	Args T
}

// Worker works jobs of one kind.
//
// Work returns nil on success. A plain error retries the job after the kind's backoff until its
// attempts are exhausted; [Cancel] stops retrying and dead-letters it; [RetryAfter] retries after
// a given delay. The context is cancelled at the invocation's deadline (minus the worker's
// margin) or at the kind's timeout.
type Worker[T Args] interface {
	Work(ctx context.Context, job *Job[T]) error
}

// WorkFunc adapts a function to a [Worker].
type WorkFunc[T Args] func(ctx context.Context, job *Job[T]) error

// Work calls f.
func (f WorkFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

type infoKey struct{}

// WithInfo returns a context that carries info, for [InfoFromContext].
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoContext is a context carrying a job's Info, like [WithInfo] returns, for code that keeps it
// inside a struct it has already allocated (the worker does, saving an allocation per job). Set
// both fields; use a pointer to it as the context.
type InfoContext struct {
	context.Context
	Info *Info
}

// Value returns Info for [InfoFromContext] and asks the parent context otherwise.
func (c *InfoContext) Value(key any) any {
	if _, ok := key.(infoKey); ok {
		return c.Info
	}
	return c.Context.Value(key)
}

// InfoFromContext returns the job being worked, when ctx is a job's context.
func InfoFromContext(ctx context.Context) (*Info, bool) {
	info, ok := ctx.Value(infoKey{}).(*Info)
	return info, ok && info != nil
}

type traceKey struct{}

// WithTraceParent returns a context carrying a W3C traceparent. The worker puts the job's trace
// context in its job's context this way, and the producer copies the caller's into the envelope
// (meta.traceparent), so jobs enqueued from a job continue its trace.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceKey{}, traceparent)
}

// TraceParentFromContext returns the traceparent set with [WithTraceParent], or the one of the
// job being worked in ctx.
func TraceParentFromContext(ctx context.Context) string {
	if tp, ok := ctx.Value(traceKey{}).(string); ok && tp != "" {
		return tp
	}
	if info, ok := InfoFromContext(ctx); ok {
		return info.TraceParent
	}
	return ""
}
