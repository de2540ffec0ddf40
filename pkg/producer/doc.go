// Package producer enqueues jobs: it turns typed [jobs.Args] into envelope v1 messages and
// sends them to an SQS queue with SendMessage ([Producer.Enqueue]) or SendMessageBatch
// ([Producer.EnqueueBatch]).
//
//	p, err := producer.New(producer.Config{SQS: sqs.NewFromConfig(cfg), QueueURL: url})
//	res, err := p.Enqueue(ctx, EmailArgs{To: "a@b.c"}, producer.WithKey("order-42-welcome"))
//
// Every job is validated before anything is sent, and every error names the job and the field
// at fault: the kind's syntax, args that must encode to a JSON object, the key, max attempts,
// message attributes (at most [MaxAttributes] of the producer's own, valid SQS names, none under
// the reserved "AWS.", "Amazon." and "sqsworker." prefixes, Number values that SQS reads as
// numbers), the delay, the FIFO message group and deduplication ids, and the size: body +
// attributes at most the queue's MaximumMessageSize ([Config.QueueMaxMessageSize], 1 MiB
// unless set) less 8 KiB kept for what the worker adds when it dead-letters or re-sends a job
// ([MaxMessageSize] on a 1 MiB queue).
// Validation errors wrap [ErrInvalid]; oversize jobs also wrap [ErrTooLarge], and delays SQS
// cannot express also wrap [ErrNeedsScheduler].
//
// Delays: on a standard queue [WithDelay] sets SQS DelaySeconds (0 to 15 minutes, sub-second
// delays rounded up to the next second). Longer delays, and any delay on a FIFO queue, go
// through a one-time EventBridge Scheduler schedule when [Config.Scheduler] is set (a
// *schedule.Client); without it they are rejected with [ErrNeedsScheduler]. [Producer.EnqueueAt]
// and [Producer.EnqueueIn] choose the same way.
//
// FIFO queues (a queue URL ending in ".fifo") need a message group ([WithGroupID]). The
// deduplication id is [WithDeduplicationID], or else derived from the job's kind and key
// ("kind:key", or its hex SHA-256 when that is longer than 128 characters or has characters SQS
// does not allow), so enqueueing the same operation twice within SQS's 5-minute deduplication
// window sends it once. On a standard queue a message group id is passed through: it enables
// SQS fair queues (the group identifies the tenant).
//
// The caller's W3C trace context ([jobs.WithTraceParent], or the running job's when enqueueing
// from a worker) is copied into the envelope's meta.traceparent, so the job continues the trace.
//
// A Producer is safe for concurrent use.
package producer
