package producer

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Option sets a property of one job. Options are checked when the job is enqueued; a bad value
// rejects that job with an error naming the option. Later options override earlier ones, except
// WithMeta and WithAttributes, which add to what earlier calls set. An []Option may be reused
// for many jobs.
type Option func(*options)

type options struct {
	id, key, group, dedup             string
	idSet, keySet, groupSet, dedupSet bool

	delay    time.Duration
	delaySet bool
	runAt    time.Time
	runAtSet bool

	maxAttempts    int
	maxAttemptsSet bool

	meta map[string]string // owned: built by WithMeta for this job only

	attrs      map[string]types.MessageAttributeValue
	attrsOwned bool // attrs is a copy made by this job, not a caller's map

	queue    string
	queueSet bool
}

// WithID sets the job's id instead of a new ULID: 1 to MaxIDLength printable ASCII characters.
// The id names one job; use WithKey to name the operation.
func WithID(id string) Option {
	return func(o *options) { o.id, o.idSet = id, true }
}

// WithKey sets the job's idempotency key, scoped by kind (envelope "key"): it names the
// operation, so that two jobs with the same kind and key are one job to the worker's
// idempotency store and, on FIFO queues, to SQS's deduplication. Non-empty, valid UTF-8, at most
// MaxKeyLength bytes. Without it the key is the job's id.
func WithKey(key string) Option {
	return func(o *options) { o.key, o.keySet = key, true }
}

// WithDelay delays the job's first delivery by d: up to 15 minutes with SQS DelaySeconds on
// standard queues (rounded up to whole seconds); longer, or any delay on a FIFO queue, through a
// one-time EventBridge Scheduler schedule (Config.Scheduler; without one such a delay is rejected
// with ErrNeedsScheduler). The scheduler fires within a minute of the time. Without it (or with
// 0), the queue's default delay applies. WithRunAt and WithDelay override each other.
func WithDelay(d time.Duration) Option {
	return func(o *options) { o.delay, o.delaySet, o.runAtSet = d, true, false }
}

// WithRunAt delivers the job at t (not before): a delay of t minus now, as WithDelay. A time in
// the past is an error.
func WithRunAt(t time.Time) Option {
	return func(o *options) { o.runAt, o.runAtSet, o.delaySet = t, true, false }
}

// WithMaxAttempts overrides the kind's MaxAttempts for this job (envelope "max_attempts"). n
// must be at least 1.
func WithMaxAttempts(n int) Option {
	return func(o *options) { o.maxAttempts, o.maxAttemptsSet = n, true }
}

// WithGroupID sets the SQS message group id: required on FIFO queues, where jobs of one group
// run one at a time in order. On a standard queue it enables SQS fair queues (the group names
// the tenant). 1 to 128 characters: letters, digits and ASCII punctuation.
func WithGroupID(group string) Option {
	return func(o *options) { o.group, o.groupSet = group, true }
}

// WithDeduplicationID sets the SQS message deduplication id of a job on a FIFO queue (1 to 128
// characters: letters, digits and ASCII punctuation). Without it the producer derives one from
// the kind and key. It is an error on a standard queue.
func WithDeduplicationID(id string) Option {
	return func(o *options) { o.dedup, o.dedupSet = id, true }
}

// WithMeta adds a string to the envelope's meta. The key "traceparent" overrides the trace
// context taken from the caller's context.
func WithMeta(key, value string) Option {
	return func(o *options) {
		if o.meta == nil {
			o.meta = make(map[string]string, 2)
		}
		o.meta[key] = value
	}
}

// WithAttributes adds SQS message attributes to the job's message. At most MaxAttributes per
// job; names follow SQS's rules and must not start with "AWS.", "Amazon." or "sqsworker."
// (reserved for AWS and for the worker). The map is read, not copied, unless several
// WithAttributes options are merged: do not modify it until the enqueue call returns.
func WithAttributes(attrs map[string]types.MessageAttributeValue) Option {
	return func(o *options) {
		if len(attrs) == 0 {
			return
		}
		if o.attrs == nil {
			o.attrs = attrs
			return
		}
		if !o.attrsOwned {
			merged := make(map[string]types.MessageAttributeValue, len(o.attrs)+len(attrs))
			for k, v := range o.attrs {
				merged[k] = v
			}
			o.attrs, o.attrsOwned = merged, true
		}
		for k, v := range attrs {
			o.attrs[k] = v
		}
	}
}

// WithQueue sends the job to the named queue of the stack (Config.Queues) instead of its kind's
// queue (Config.Routes): "critical" to jump the line, "bulk" to stay out of the way. The queue
// must be in the set, and be FIFO if the kind's queue is FIFO (and standard if it is standard);
// otherwise the job is rejected with an error wrapping ErrInvalid and queues.ErrUnknownQueue or
// queues.ErrMixedFIFO. A producer of one queue (Config.QueueURL) accepts only
// WithQueue(queues.DefaultName).
func WithQueue(name string) Option {
	return func(o *options) { o.queue, o.queueSet = name, true }
}
